package nodeagent

import (
	"context"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/eviction"
	"github.com/crivk/crivk/images"
	"github.com/crivk/crivk/lifecycle"
	"github.com/crivk/crivk/nodeapi/stats"
	"github.com/crivk/crivk/nodestatus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// startGC starts the container collector (every minute) and the image
// collector (every 5 minutes, its image list every 30 s, reported as the
// node's status.images) until ctx ends. The eviction manager reaches them
// through the returned collectors' DeleteAllUnusedContainers and
// DeleteUnusedImages.
func startGC(ctx context.Context, n *node, rt *cri.Runtime, engine *lifecycle.Engine, nodeProvider *nodestatus.NodeProvider) (*cri.ContainerGC, *images.Manager, error) {
	o, recorder, agentMetrics := n.o, n.recorder, n.metrics
	cgc, err := cri.NewContainerGC(rt, cri.ContainerGCConfig{Policy: o.GC.Container, Pods: engine, NodeRef: n.ref.WithUID,
		Observe: agentMetrics.ObserveContainerGC})
	if err != nil {
		return nil, nil, err
	}
	// A node of many shares the process' image collector (startShared),
	// run there.
	igc := n.sharedImages
	if igc == nil {
		if igc, err = images.New(images.Config{Policy: o.GC.Image, Runtime: rt, Recorder: recorder, NodeRef: n.ref.NameOnly(), NodeRefWithUID: n.ref.WithUID,
			FsStats:        func(ctx context.Context) (*statsapi.FsStats, error) { return stats.ImageFsStats(ctx, rt) },
			ObserveRemoved: agentMetrics.ObserveImageRemoved, ObserveCollection: agentMetrics.ObserveImageGC}); err != nil {
			return nil, nil, err
		}
		go igc.Run(ctx)
	}
	nodeProvider.SetImages(igc.Images)
	go cgc.Run(ctx, cri.ContainerGCPeriod)
	return cgc, igc, nil
}

// reclaim is the eviction manager's node-level reclaim under disk pressure
// (eviction.ImageGC and eviction.ContainerGC): the garbage collectors that
// startGC makes. The eviction manager is made before the engine (admission
// asks it) and the collectors after it (they ask the engine which pods are
// gone), so the collectors are bound here before the manager's Run starts;
// unbound, a reclaim frees nothing and pods are evicted, as with no GC.
type reclaim struct {
	containers *cri.ContainerGC
	images     *images.Manager
}

var (
	_ eviction.ImageGC     = (*reclaim)(nil)
	_ eviction.ContainerGC = (*reclaim)(nil)
)

func (r *reclaim) DeleteAllUnusedContainers(ctx context.Context) error {
	if r.containers == nil {
		return nil
	}
	return r.containers.DeleteAllUnusedContainers(ctx)
}

func (r *reclaim) DeleteUnusedImages(ctx context.Context) (int64, error) {
	if r.images == nil {
		return 0, nil
	}
	return r.images.DeleteUnusedImages(ctx)
}
