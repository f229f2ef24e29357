package cri

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	v1 "k8s.io/api/core/v1"
)

// NodeView is what differs between the nodes of one crivk process that
// share one runtime connection (docs/scale.md). Each field is the node's
// own value of the Config field of the same name.
type NodeView struct {
	// Node names the node (Config.Node); required.
	Node string
	// PodLogDir is the node's own: its collector removes the log
	// directories of the pods it does not know, so no two nodes may share
	// one. Required, absolute.
	PodLogDir string
	// CgroupParent and PodCgroups are the node's pod cgroup tree
	// (<cgroup-root>/<node>/kubepods/...); nil: the runtime's default.
	CgroupParent func(pod *v1.Pod) string
	PodCgroups   PodCgroupResizer
	// Recorder records the node's events (its own event source).
	Recorder EventRecorder
	// UserNamespaces is the node's user namespace allocator (its share of
	// the machine's IDs); nil: hostUsers: false is refused.
	UserNamespaces UserNamespaces
}

// ForNode returns the Runtime of one node of a multi-node crivk over r's
// connection. It shares with r the connection, the image pulls in flight
// and their limit (Config.MaxParallelImagePulls), the sandbox creation
// limit (Config.MaxParallelSandboxes: they protect the one containerd,
// not a node), the RuntimeClass lookup set on r before, the resolver
// configuration and the clock. It has its own node label and selector
// (Config.Node), pod log directory, pod cgroups, event recorder, runtime
// helper (SetRuntimeHelper, before its first SyncPod), credential
// providers (SetCredentialProviders: the plugins are the process', the
// service account reads and tokens the node's own) and cache of the
// handlers' features. Its Close closes the shared connection: close r
// alone, after every node stopped. r must be the process' base Runtime
// (Config.Node empty), which syncs no pod itself.
func (r *Runtime) ForNode(v NodeView) (*Runtime, error) {
	if r.cfg.Node != "" {
		return nil, fmt.Errorf("runtime of node %q: a node's runtime is made from the base runtime, not from another node's", r.cfg.Node)
	}
	if v.Node == "" {
		return nil, errors.New("runtime of a node: no node name")
	}
	if v.PodLogDir == "" || !filepath.IsAbs(v.PodLogDir) {
		return nil, fmt.Errorf("runtime of node %q: pod log directory %q is not an absolute path", v.Node, v.PodLogDir)
	}
	cfg := r.cfg
	cfg.Node, cfg.PodLogDir, cfg.CgroupParent, cfg.PodCgroups, cfg.Recorder = v.Node, v.PodLogDir, v.CgroupParent, v.PodCgroups, v.Recorder
	cfg.UserNamespaces = v.UserNamespaces
	return &Runtime{cfg: cfg, rs: r.rs, is: r.is, resolv: r.resolv, classes: r.classes, recorder: v.Recorder,
		clock: r.clock, puller: r.puller, pulls: r.pulls, sandboxes: r.sandboxes, started: r.started}, nil
}

// UnlabelledSandboxes returns the IDs, sorted, of the crivk sandboxes that
// carry no LabelNode: a single-node crivk's or an earlier version's. A
// multi-node crivk refuses to start while there are any, rather than leave
// them to nobody or guess their node (docs/scale.md).
func (r *Runtime) UnlabelledSandboxes(ctx context.Context) ([]string, error) {
	sbs, err := r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: OwnedSelector("")})
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	var out []string
	for _, sb := range sbs {
		if _, ok := sb.Labels[LabelNode]; !ok {
			out = append(out, sb.Id)
		}
	}
	sort.Strings(out)
	return out, nil
}
