package nodestatus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
	// NodeNotReady, ...) on ref's WithUID; nil drops them.
	recorder record.EventRecorder
	ref      *NodeRef
	// pressure decides the pressure conditions (the eviction manager);
	// nil: never under pressure.
	pressure PressureSource
	// images lists the node's images for status.images (images.go); nil:
	// none reported. Guarded by mu.
	images func() []*runtimeapi.Image
	// devicePlugins reads the device plugins' resources
	// (deviceplugins.go); nil: none. Guarded by mu.
	devicePlugins DevicePluginCapacity
}

// Node event reasons, the kubelet's (pkg/kubelet/events).
const (
	EventStarting     = "Starting"
	EventNodeReady    = "NodeReady"
	EventNodeNotReady = "NodeNotReady"
)

// nodeEvent records an event on the node in the kubelet's words, on the
// reference with the Node's UID once known (the kubelet's
// nodeRefWithUID).
func (p *NodeProvider) nodeEvent(typ, reason, format string, args ...any) {
	if p.recorder == nil {
		return
	}
	p.recorder.Eventf(p.ref.WithUID(), typ, reason, format, args...)
}

// startEvents records what the kubelet records when it starts: Starting,
// then the node's conditions as they are now.
func (p *NodeProvider) startEvents(n *v1.Node) {
	p.nodeEvent(v1.EventTypeNormal, EventStarting, "Starting kubelet.")
	for _, c := range n.Status.Conditions {
		if ev := conditionEvent(c); ev != "" {
			p.nodeEvent(v1.EventTypeNormal, ev, "Node %s status is now: %s", n.Name, ev)
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
			p.nodeEvent(v1.EventTypeNormal, ev, "Node %s status is now: %s", name, ev)
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

// NewNodeProvider checks rt and pressure (nil: none) every interval and
// reports changes of n, and differences from the node as apiNode reads it
// from the API (nil: none). Each health check that fails makes the node
// NotReady with its message. Its events go to recorder on ref (nil: n's
// name, without a UID).
func NewNodeProvider(rt ReadinessChecker, n *v1.Node, interval time.Duration, apiNode func(ctx context.Context) (*v1.Node, error),
	recorder record.EventRecorder, ref *NodeRef, pressure PressureSource, health ...func() error) *NodeProvider {
	if ref == nil {
		ref = NewNodeRef(n.Name)
	}
	return &NodeProvider{rt: rt, interval: interval, apiNode: apiNode, recorder: recorder, ref: ref, pressure: pressure, health: health, node: n.DeepCopy()}
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
		rd = cri.Readiness{Message: RuntimeDownMessage}
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
	conds := NodeConditions(p.node.Status.Conditions, rd, p.pressure, time.Now())
	changed := !sameConditionStatus(p.node.Status.Conditions, conds)
	p.conditionChangeEvents(p.node.Name, p.node.Status.Conditions, conds)
	p.node.Status.Conditions = conds
	imagesChanged := p.updateImages()
	devicesChanged := p.updateDevicePlugins()
	handlersChanged := false
	if hs := RuntimeHandlers(rd.Handlers); hs != nil && !equality.Semantic.DeepEqual(hs, p.node.Status.RuntimeHandlers) {
		p.node.Status.RuntimeHandlers, handlersChanged = hs, true
	}
	n := p.node.DeepCopy()
	p.mu.Unlock()
	if (imagesChanged || devicesChanged || handlersChanged) && !changed {
		return n, true
	}
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
