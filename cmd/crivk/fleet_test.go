package main

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/crivk/crivk/internal/fleet"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

func TestParseFlagsNodeCount(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		wantErr   string
		wantNodes []string
	}{
		{"default: one node, its name", []string{"--kubeconfig=/k", "--node-name=m"}, "", []string{"m"}},
		{"three nodes", []string{"--kubeconfig=/k", "--node-name=m", "--node-count=3"}, "", []string{"m-0", "m-1", "m-2"}},
		{"no node", []string{"--kubeconfig=/k", "--node-count=0"}, "--node-count must be at least 1, got 0", nil},
		{"static pods on every node", []string{"--kubeconfig=/k", "--node-count=2", "--pod-manifest-path=/etc/m"}, "--pod-manifest-path with --node-count above 1", nil},
		{"healthz among the ports", []string{"--kubeconfig=/k", "--node-count=3", "--port=10246"}, "--healthz-port 10248 is one of the nodes' API ports 10246-10248", nil},
		{"read-only ports overlap", []string{"--kubeconfig=/k", "--node-count=3", "--read-only-port=10251"}, "ranges of 3 ports overlap", nil},
		{"unequal shares", []string{"--kubeconfig=/k", "--node-name=m", "--node-count=3", "--node-shares=2,1,1"}, "", []string{"m-0", "m-1", "m-2"}},
		{"a weight per node", []string{"--kubeconfig=/k", "--node-count=3", "--node-shares=2,1"}, "--node-shares needs one weight per node, each an integer from 1 to 1000000: 2 weights for --node-count 3", nil},
		{"weights are integers", []string{"--kubeconfig=/k", "--node-count=2", "--node-shares=0.5,0.5"}, `--node-shares needs one weight per node, each an integer from 1 to 1000000: "0.5" in "0.5,0.5"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notInPod(t)
			o, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFlags: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			specs, err := o.fleetSpecs()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range specs {
				names = append(names, s.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNodes, ",") {
				t.Errorf("nodes %v, want %v", names, tc.wantNodes)
			}
		})
	}
}

// TestNodeOptionsPortion: each node's options carry its part of the
// machine, by --node-shares or equal; a single node's is the whole.
func TestNodeOptionsPortion(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"single node", []string{"--kubeconfig=/k"}, []string{"whole"}},
		{"equal", []string{"--kubeconfig=/k", "--node-count=3"}, []string{"1/3", "1/3", "1/3"}},
		{"weighted", []string{"--kubeconfig=/k", "--node-count=3", "--node-shares=2,1,1"}, []string{"2/4", "1/4", "1/4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notInPod(t)
			o, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			specs, err := o.fleetSpecs()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range specs {
				got = append(got, nodeOptions(o, s).portion.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("portions %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNodeOptionsShareNoMutableState: two nodes' options differ in every
// per-node setting, and what one node's stack changes in its labels or
// taints reaches neither the other node nor the process' options.
func TestNodeOptionsShareNoMutableState(t *testing.T) {
	notInPod(t)
	o, err := parseFlags([]string{"--kubeconfig=/k", "--node-name=m", "--node-count=2", "--read-only-port=10255",
		"--node-labels=pool=a", "--register-with-taints=k=v:NoSchedule", "--root-dir=/r", "--pod-log-dir=/l", "--cgroup-root=/c"})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := o.fleetSpecs()
	if err != nil {
		t.Fatal(err)
	}
	a, b := nodeOptions(o, specs[0]), nodeOptions(o, specs[1])
	for _, tc := range []struct {
		what       string
		base, x, y any
	}{
		{"name", o.nodeName, a.nodeName, b.nodeName},
		{"root dir", o.rootDir, a.rootDir, b.rootDir},
		{"pod log dir", o.podLogDir, a.podLogDir, b.podLogDir},
		{"cgroup root", o.cgroupRoot, a.cgroupRoot, b.cgroupRoot},
	} {
		if tc.x == tc.y || tc.x == tc.base || tc.y == tc.base {
			t.Errorf("%s: process %v, nodes %v and %v, want three different", tc.what, tc.base, tc.x, tc.y)
		}
	}
	// Node i's ports are the flags' + i.
	if a.port != o.port || b.port != o.port+1 || a.readOnlyPort != o.readOnlyPort || b.readOnlyPort != o.readOnlyPort+1 {
		t.Errorf("ports %d/%d and %d/%d, want %d/%d and the next ones", a.port, a.readOnlyPort, b.port, b.readOnlyPort, o.port, o.readOnlyPort)
	}
	// Each node's kubepods is bounded by its share of the machine.
	if a.nodeCount != 2 || b.nodeCount != 2 {
		t.Errorf("the nodes' options share the machine among %d and %d nodes, want 2", a.nodeCount, b.nodeCount)
	}
	a.nodeLabels["pool"] = "changed"
	a.taints[0].Value = "changed"
	for who, opts := range map[string]*options{"node 1": b, "the process": o} {
		if opts.nodeLabels["pool"] != "a" || opts.taints[0].Value != "v" {
			t.Errorf("%s saw node 0's change: %v %v", who, opts.nodeLabels, opts.taints)
		}
	}
	if got := (fleet.Spec{Name: "m-0", Multi: true}).RuntimeNode(); got != "m-0" {
		t.Errorf("RuntimeNode %q", got)
	}
}

// nodeEvents records the object each event is about.
type nodeEvents struct {
	*record.FakeRecorder
	about []string
}

func (r *nodeEvents) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	ref := obj.(*v1.ObjectReference)
	r.about = append(r.about, ref.Kind+"/"+ref.Name+"/"+string(ref.UID)+" "+reason)
}

// The shared image collector's events land on every node, each on its
// own Node, whatever object the collector names.
func TestEveryNodeRecordsOnEachNode(t *testing.T) {
	var nodes []*fleetNode
	var recs []*nodeEvents
	for _, name := range []string{"m-0", "m-1", "m-2"} {
		r := &nodeEvents{FakeRecorder: record.NewFakeRecorder(1)}
		recs = append(recs, r)
		nodes = append(nodes, &fleetNode{spec: fleet.Spec{Name: name}, recorder: r})
	}
	everyNode(nodes).Eventf(nodeRef("m-0"), v1.EventTypeWarning, "FreeDiskSpaceFailed", "freed %d bytes", 1)
	for i, r := range recs {
		want := []string{"Node/m-" + strconv.Itoa(i) + "/m-" + strconv.Itoa(i) + " FreeDiskSpaceFailed"}
		if !reflect.DeepEqual(r.about, want) {
			t.Errorf("node %d recorded %v, want %v", i, r.about, want)
		}
	}
}
