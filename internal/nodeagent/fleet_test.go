package nodeagent

import (
	"context"
	"github.com/crivk/crivk/nodestatus"
	"reflect"
	"strconv"
	"testing"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/internal/fleet"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// fleetSettings are settings of count nodes named m, with the flags'
// defaults for what fleet.Specs reads.
func fleetSettings(count int, shares string) *Settings {
	return &Settings{NodeCount: count, NodeName: "m", NodeShares: shares, Port: 10250, HealthzPort: 10248,
		RootDir: "/r", PodLogDir: "/l", CgroupRoot: "/c", Kubeconfig: "/k"}
}

// TestNodePortion: each node carries its part of the machine, by
// --node-shares or equal; a single node's is the whole.
func TestNodePortion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		count  int
		shares string
		want   []string
	}{
		{"single node", 1, "", []string{"whole"}},
		{"equal", 3, "", []string{"1/3", "1/3", "1/3"}},
		{"weighted", 3, "2,1,1", []string{"2/4", "1/4", "1/4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			specs, err := fleetSettings(tc.count, tc.shares).fleetSpecs()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range specs {
				got = append(got, portionOf(s).String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("portions %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNodeSettingsShareNoMutableState: two nodes' settings differ in
// every per-node setting, and what one node's stack changes in its labels
// or taints reaches neither the other node nor the process' settings.
func TestNodeSettingsShareNoMutableState(t *testing.T) {
	o := fleetSettings(2, "")
	o.ReadOnlyPort = 10255
	o.nodeLabels = map[string]string{"pool": "a"}
	o.taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}}
	specs, err := o.fleetSpecs()
	if err != nil {
		t.Fatal(err)
	}
	a, b := nodeSettings(o, specs[0]), nodeSettings(o, specs[1])
	for _, tc := range []struct {
		what       string
		base, x, y any
	}{
		{"name", o.NodeName, a.NodeName, b.NodeName},
		{"root dir", o.RootDir, a.RootDir, b.RootDir},
		{"pod log dir", o.PodLogDir, a.PodLogDir, b.PodLogDir},
		{"cgroup root", o.CgroupRoot, a.CgroupRoot, b.CgroupRoot},
	} {
		if tc.x == tc.y || tc.x == tc.base || tc.y == tc.base {
			t.Errorf("%s: process %v, nodes %v and %v, want three different", tc.what, tc.base, tc.x, tc.y)
		}
	}
	// Node i's ports are the flags' + i.
	if a.Port != o.Port || b.Port != o.Port+1 || a.ReadOnlyPort != o.ReadOnlyPort || b.ReadOnlyPort != o.ReadOnlyPort+1 {
		t.Errorf("ports %d/%d and %d/%d, want %d/%d and the next ones", a.Port, a.ReadOnlyPort, b.Port, b.ReadOnlyPort, o.Port, o.ReadOnlyPort)
	}
	if a.NodeCount != 2 || b.NodeCount != 2 {
		t.Errorf("the nodes' settings share the machine among %d and %d nodes, want 2", a.NodeCount, b.NodeCount)
	}
	a.nodeLabels["pool"] = "changed"
	a.taints[0].Value = "changed"
	for who, opts := range map[string]*Settings{"node 1": b, "the process": o} {
		if opts.nodeLabels["pool"] != "a" || opts.taints[0].Value != "v" {
			t.Errorf("%s saw node 0's change: %v %v", who, opts.nodeLabels, opts.taints)
		}
	}
}

// unlabelled is a runtime holding crivk sandboxes with no node label (a
// single-node crivk's, or an earlier version's); it counts the calls.
type unlabelled struct {
	ids   []string
	calls int
}

func (u *unlabelled) UnlabelledSandboxes(context.Context) ([]string, error) {
	u.calls++
	return u.ids, nil
}

// TestFleetOfOneAdoptsUnlabelledSandboxes: a single node, built by the
// same path as a fleet's, is not refused a runtime that holds unlabelled
// crivk sandboxes, and its runtime is the base one, whose objects carry
// no node label and whose selector names no node: it owns (adopts) every
// crivk sandbox. A fleet of two is refused, and each node's runtime
// selects its own.
func TestFleetOfOneAdoptsUnlabelledSandboxes(t *testing.T) {
	base, err := cri.New(cri.Config{PodLogDir: "/l"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		count     int
		wantErr   bool
		wantLabel []string
	}{
		{"one node adopts", 1, false, []string{""}},
		{"many nodes refuse", 2, true, []string{"m-0", "m-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			specs, err := fleetSettings(tc.count, "").fleetSpecs()
			if err != nil {
				t.Fatal(err)
			}
			rt := &unlabelled{ids: []string{"sb-old"}}
			err = fleet.RefuseUnlabelled(context.Background(), specs, rt)
			if (err != nil) != tc.wantErr {
				t.Errorf("RefuseUnlabelled: %v, want an error %v", err, tc.wantErr)
			}
			if !tc.wantErr && rt.calls != 0 {
				t.Errorf("a single node asked the runtime for unlabelled sandboxes %d times", rt.calls)
			}
			for i, s := range specs {
				n := &node{spec: s, o: nodeSettings(fleetSettings(tc.count, ""), s), recorder: record.NewFakeRecorder(1)}
				nrt, err := nodeRuntime(base, n)
				if err != nil {
					t.Fatal(err)
				}
				if !s.Multi && nrt != base {
					t.Errorf("a single node's runtime is not the base runtime")
				}
				if got := nrt.Owned()[cri.LabelNode]; got != tc.wantLabel[i] {
					t.Errorf("node %s selects %s=%q, want %q", s.Name, cri.LabelNode, got, tc.wantLabel[i])
				}
			}
		})
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
// own Node, whatever node the collector names: with that node's UID when
// the reference given has one (ImageGCFailed), else without
// (FreeDiskSpaceFailed), as the kubelet's.
func TestEveryNodeRecordsOnEachNode(t *testing.T) {
	var nodes []*node
	var recs []*nodeEvents
	for _, name := range []string{"m-0", "m-1", "m-2"} {
		r := &nodeEvents{FakeRecorder: record.NewFakeRecorder(1)}
		recs = append(recs, r)
		ref := nodestatus.NewNodeRef(name)
		ref.ResolveFrom(func() types.UID { return types.UID("uid-" + name) })
		nodes = append(nodes, &node{spec: fleet.Spec{Name: name}, recorder: r, ref: ref})
	}
	everyNode(nodes).Eventf(nodes[0].ref.NameOnly(), v1.EventTypeWarning, "FreeDiskSpaceFailed", "freed %d bytes", 1)
	everyNode(nodes).Eventf(nodes[0].ref.WithUID(), v1.EventTypeWarning, "ImageGCFailed", "failed")
	for i, r := range recs {
		want := []string{"Node/m-" + strconv.Itoa(i) + "/ FreeDiskSpaceFailed", "Node/m-" + strconv.Itoa(i) + "/uid-m-" + strconv.Itoa(i) + " ImageGCFailed"}
		if !reflect.DeepEqual(r.about, want) {
			t.Errorf("node %d recorded %v, want %v", i, r.about, want)
		}
	}
}
