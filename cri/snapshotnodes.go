package cri

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// NodeSnapshots is one walk of the runtime for every node of a
// multi-node crivk (docs/scale.md): the process lists once, each node's
// PLEG diffs its own share (lifecycle/pleg.Shared).
type NodeSnapshots struct {
	// Nodes maps a node name (LabelNode) to the Snapshot of its objects:
	// what that node's Runtime's Snapshot would have listed at that
	// moment. A node with no object has no entry.
	Nodes map[string]*Snapshot
	// Unlabelled counts the crivk sandboxes and containers that carry no
	// LabelNode (a single-node crivk's): no node's.
	Unlabelled int
}

// SnapshotNodes lists every crivk sandbox and container once, with the
// two list calls of Snapshot selecting OwnedSelector(""), and splits them
// by LabelNode. It is the base runtime's (Config.Node empty); a node's
// runtime lists its own with Snapshot.
func (r *Runtime) SnapshotNodes(ctx context.Context) (*NodeSnapshots, error) {
	if r.cfg.Node != "" {
		return nil, fmt.Errorf("runtime of node %q: only the base runtime lists every node's objects", r.cfg.Node)
	}
	sbs, cs, err := r.listSelected(ctx, OwnedSelector(""))
	if err != nil {
		return nil, err
	}
	out := &NodeSnapshots{Nodes: map[string]*Snapshot{}}
	nodeSbs := map[string][]*runtimeapi.PodSandbox{}
	nodeCs := map[string][]*runtimeapi.Container{}
	for _, sb := range sbs {
		if n, ok := sb.Labels[LabelNode]; ok && n != "" {
			nodeSbs[n] = append(nodeSbs[n], sb)
		} else {
			out.Unlabelled++
		}
	}
	for _, c := range cs {
		if n, ok := c.Labels[LabelNode]; ok && n != "" {
			nodeCs[n] = append(nodeCs[n], c)
		} else {
			out.Unlabelled++
		}
	}
	for n, l := range nodeSbs {
		out.Nodes[n] = snapshotOf(l, nodeCs[n])
	}
	for n, l := range nodeCs {
		if _, ok := out.Nodes[n]; !ok {
			out.Nodes[n] = snapshotOf(nil, l)
		}
	}
	return out, nil
}
