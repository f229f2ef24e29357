package provider

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// NodeConfig describes the node crivk registers.
type NodeConfig struct {
	Name           string
	InternalIP     string
	KubeletPort    int32
	MaxPods        int64
	RootDir        string // its filesystem gives ephemeral-storage
	AgentVersion   string // reported as kubeletVersion, e.g. v1.35.4-crivk.0
	RuntimeVersion cri.VersionInfo
	Labels         map[string]string
	// Taints are set when the Node is created (--register-with-taints).
	Taints []v1.Taint
	// Reservations are taken off the capacity for the allocatable.
	Reservations Reservations
}

// Node condition reasons and messages, the kubelet's (pkg/kubelet/nodestatus).
const (
	reasonReady    = "KubeletReady"
	reasonNotReady = "KubeletNotReady"
)

// BuildNode returns the Node object crivk registers, with capacity read from
// the machine and conditions from the runtime's readiness rd.
func BuildNode(cfg NodeConfig, rd cri.Readiness, now time.Time) (*v1.Node, error) {
	mem, err := memTotal()
	if err != nil {
		return nil, err
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(cfg.RootDir, &fs); err != nil {
		return nil, fmt.Errorf("statfs of root dir %s: %w", cfg.RootDir, err)
	}
	storage := int64(fs.Blocks) * int64(fs.Bsize)
	capacity := v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(mem, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(cfg.MaxPods, resource.DecimalSI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(storage, resource.BinarySI),
	}
	labels := map[string]string{
		"kubernetes.io/hostname":  cfg.Name,
		"kubernetes.io/os":        runtime.GOOS,
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
		"node.crivk.io/agent":     "crivk",
	}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	uname := unix.Utsname{}
	_ = unix.Uname(&uname)
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Labels: labels},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: cfg.Reservations.Allocatable(capacity),
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: cfg.InternalIP},
				{Type: v1.NodeHostName, Address: cfg.Name},
			},
			DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: cfg.KubeletPort}},
			NodeInfo: v1.NodeSystemInfo{
				MachineID:       readTrim("/etc/machine-id"),
				SystemUUID:      readTrim("/sys/class/dmi/id/product_uuid"),
				BootID:          readTrim("/proc/sys/kernel/random/boot_id"),
				KernelVersion:   unix.ByteSliceToString(uname.Release[:]),
				OSImage:         osImage(),
				OperatingSystem: runtime.GOOS,
				Architecture:    runtime.GOARCH,
				KubeletVersion:  cfg.AgentVersion,
			},
		},
	}
	if cfg.RuntimeVersion.RuntimeName != "" { // unknown while the runtime is down
		n.Status.NodeInfo.ContainerRuntimeVersion = cfg.RuntimeVersion.RuntimeName + "://" + cfg.RuntimeVersion.RuntimeVersion
	}
	n.Status.Conditions = NodeConditions(nil, rd, now)
	n.Spec.Taints = append([]v1.Taint(nil), cfg.Taints...)
	n.Status.Phase = v1.NodeRunning
	return n, nil
}

// NodeConditions computes the conditions the node owns from the runtime's
// readiness, keeping the transition time of those that did not change.
// NetworkUnavailable is not among them: it belongs to the network provider
// (the kubelet never sets it); a runtime network that is not ready makes
// the node NotReady, as on the kubelet.
func NodeConditions(prev []v1.NodeCondition, rd cri.Readiness, now time.Time) []v1.NodeCondition {
	t := metav1.NewTime(now)
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: reasonReady, Message: "kubelet is posting ready status"}
	if !rd.RuntimeReady || !rd.NetworkReady {
		ready = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: reasonNotReady, Message: rd.Message}
	}
	conds := []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		ready,
	}
	for i := range conds {
		conds[i].LastHeartbeatTime = t
		conds[i].LastTransitionTime = t
		for _, p := range prev {
			if p.Type == conds[i].Type && p.Status == conds[i].Status {
				conds[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	return conds
}

// ReadinessChecker is what the node provider needs of the runtime.
type ReadinessChecker interface {
	Status(ctx context.Context) (cri.Readiness, error)
}

// NodeProvider reports the node's conditions from the runtime's readiness.
//
// Liveness is the agent's, readiness is the runtime's: Ping never asks the
// runtime, so virtual-kubelet renews the node Lease whenever crivk reaches
// the API server, whatever containerd does; a runtime that does not answer
// or is not ready makes Ready=False with the kubelet's reason and message.
// Like the kubelet's node status loop, every interval the conditions are
// computed and compared with the Node as the API has it (apiNode): a
// difference (a condition crivk changed, or the node lifecycle
// controller's Unknown after an outage) is reported at once; otherwise
// virtual-kubelet reports the status every node status report period.
type NodeProvider struct {
	rt       ReadinessChecker
	interval time.Duration
	health   []func() error // e.g. the PLEG's; an error makes the node NotReady
	// apiNode reads the node as the API has it; nil: not compared.
	apiNode func(ctx context.Context) (*v1.Node, error)

	mu   sync.Mutex
	node *v1.Node // guarded by mu
	// netErr is the runtime's network readiness at the last check (nil:
	// ready, or not checked yet). Guarded by mu.
	netErr error
	// recorder receives the kubelet's node events (Starting, NodeReady,
	// NodeNotReady, ...); nil drops them.
	recorder record.EventRecorder
}

// Node event reasons, the kubelet's (pkg/kubelet/events).
const (
	EventStarting     = "Starting"
	EventNodeReady    = "NodeReady"
	EventNodeNotReady = "NodeNotReady"
)

// nodeEvent records an event on the node in the kubelet's words.
func (p *NodeProvider) nodeEvent(name, typ, reason, format string, args ...any) {
	if p.recorder == nil {
		return
	}
	// The kubelet's node reference: the node's name doubles as its UID.
	ref := &v1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
	p.recorder.Eventf(ref, typ, reason, format, args...)
}

// startEvents records what the kubelet records when it starts: Starting,
// then the node's conditions as they are now.
func (p *NodeProvider) startEvents(n *v1.Node) {
	p.nodeEvent(n.Name, v1.EventTypeNormal, EventStarting, "Starting kubelet.")
	for _, c := range n.Status.Conditions {
		if ev := conditionEvent(c); ev != "" {
			p.nodeEvent(n.Name, v1.EventTypeNormal, ev, "Node %s status is now: %s", n.Name, ev)
		}
	}
}

// conditionEvent is the kubelet's event reason for a node condition's
// status ("" for conditions it records no event for).
func conditionEvent(c v1.NodeCondition) string {
	ok := c.Status == v1.ConditionTrue
	switch c.Type {
	case v1.NodeReady:
		if ok {
			return EventNodeReady
		}
		return EventNodeNotReady
	case v1.NodeMemoryPressure:
		if ok {
			return "NodeHasInsufficientMemory"
		}
		return "NodeHasSufficientMemory"
	case v1.NodeDiskPressure:
		if ok {
			return "NodeHasDiskPressure"
		}
		return "NodeHasNoDiskPressure"
	case v1.NodePIDPressure:
		if ok {
			return "NodeHasInsufficientPID"
		}
		return "NodeHasSufficientPID"
	}
	return ""
}

// conditionChangeEvents records an event for each condition whose status
// changed from prev to cur.
func (p *NodeProvider) conditionChangeEvents(name string, prev, cur []v1.NodeCondition) {
	for _, c := range cur {
		changed := true
		for _, o := range prev {
			if o.Type == c.Type && o.Status == c.Status {
				changed = false
			}
		}
		if ev := conditionEvent(c); changed && ev != "" {
			p.nodeEvent(name, v1.EventTypeNormal, ev, "Node %s status is now: %s", name, ev)
		}
	}
}

var _ node.NodeProvider = (*NodeProvider)(nil)

// NetworkError reports the runtime's network as not ready at the last
// check, in the kubelet's words; nil when it was ready. The engine asks it
// before starting a pod that is not on the host network.
func (p *NodeProvider) NetworkError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.netErr
}

// NewNodeProvider checks rt every interval and reports changes of n, and
// differences from the node as apiNode reads it from the API (nil: none).
// Each health check that fails makes the node NotReady with its message.
func NewNodeProvider(rt ReadinessChecker, n *v1.Node, interval time.Duration, apiNode func(ctx context.Context) (*v1.Node, error),
	recorder record.EventRecorder, health ...func() error) *NodeProvider {
	return &NodeProvider{rt: rt, interval: interval, apiNode: apiNode, recorder: recorder, health: health, node: n.DeepCopy()}
}

// Ping reports that the agent is alive: it never asks the runtime, so the
// Lease is renewed while containerd is down (the node is then NotReady,
// not Unknown, and its pods are not evicted as unreachable).
func (p *NodeProvider) Ping(ctx context.Context) error {
	return ctx.Err()
}

// NotifyNodeStatus starts watching the runtime; cb gets the node whenever a
// condition changes status.
func (p *NodeProvider) NotifyNodeStatus(ctx context.Context, cb func(*v1.Node)) {
	p.mu.Lock()
	start := p.node.DeepCopy()
	p.mu.Unlock()
	p.startEvents(start)
	go func() {
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if n, report := p.check(ctx); report {
				cb(n)
			}
		}
	}()
}

// check computes the node's conditions now and reports whether they must
// be written: their status changed, or the API's node differs from them.
func (p *NodeProvider) check(ctx context.Context) (*v1.Node, bool) {
	rd, err := p.rt.Status(ctx)
	if err != nil {
		// The kubelet's words; the cause goes to the log.
		log.G(ctx).WithError(err).Warn("container runtime status")
		rd = cri.Readiness{Message: "container runtime is down"}
	}
	for _, h := range p.health {
		if err := h(); err != nil {
			rd.RuntimeReady = false
			rd.Message = strings.TrimPrefix(rd.Message+", "+err.Error(), ", ")
		}
	}
	p.mu.Lock()
	p.netErr = nil
	if err == nil && !rd.NetworkReady {
		p.netErr = fmt.Errorf("container runtime network not ready: %s", rd.Message)
	}
	conds := NodeConditions(p.node.Status.Conditions, rd, time.Now())
	changed := !sameConditionStatus(p.node.Status.Conditions, conds)
	p.conditionChangeEvents(p.node.Name, p.node.Status.Conditions, conds)
	p.node.Status.Conditions = conds
	n := p.node.DeepCopy()
	p.mu.Unlock()
	if changed {
		log.G(ctx).WithField("ready", rd.RuntimeReady && rd.NetworkReady).WithField("message", rd.Message).Info("node conditions changed")
		return n, true
	}
	if p.apiNode == nil {
		return n, false
	}
	cur, err := p.apiNode(ctx)
	if err != nil {
		// The API server is out of reach: nothing can be written now; the
		// next check compares again.
		log.G(ctx).WithError(err).Debug("reading the node from the API")
		return n, false
	}
	if !sameConditionStatus(ownConditions(cur.Status.Conditions, conds), conds) {
		log.G(ctx).WithField("api", conditionSummary(cur.Status.Conditions)).Info("the API's node differs from crivk's status; reporting it")
		return n, true
	}
	return n, false
}

// ownConditions returns the conditions of the types in own, in own's
// order; a missing one is left out (so it differs).
func ownConditions(api, own []v1.NodeCondition) []v1.NodeCondition {
	var out []v1.NodeCondition
	for _, o := range own {
		for _, c := range api {
			if c.Type == o.Type {
				out = append(out, c)
			}
		}
	}
	return out
}

func conditionSummary(cs []v1.NodeCondition) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, string(c.Type)+"="+string(c.Status))
	}
	return strings.Join(parts, ",")
}

func sameConditionStatus(a, b []v1.NodeCondition) bool {
	strip := func(cs []v1.NodeCondition) []v1.NodeCondition {
		out := make([]v1.NodeCondition, len(cs))
		for i, c := range cs {
			out[i] = v1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
		return out
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// MemoryCapacity is the machine's memory in bytes (MemTotal of
// /proc/meminfo), the node's memory capacity.
func MemoryCapacity() (int64, error) { return memTotal() }

func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing MemTotal in /proc/meminfo: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func osImage() string {
	for _, line := range strings.Split(readTrim("/etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}
