package main

import (
	"context"
	"flag"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/eviction"
	"github.com/crivk/crivk/images"
	"github.com/crivk/crivk/lifecycle"
	"github.com/crivk/crivk/metrics"
	"github.com/crivk/crivk/nodeapi/stats"
	"github.com/crivk/crivk/nodestatus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// gcOptions are the garbage collectors' flags, the kubelet's names and
// defaults, and a node of many's shared image collector.
type gcOptions struct {
	image     images.Policy
	container cri.GCPolicy
	// sharedImages is the process' image collector for a node of many
	// (fleet.go), run there; nil for a single node, which makes and runs
	// its own.
	sharedImages *images.Manager
}

func addGCFlags(fs *flag.FlagSet, o *gcOptions) {
	o.image, o.container = images.DefaultPolicy, cri.DefaultGCPolicy
	fs.IntVar(&o.image.HighThresholdPercent, "image-gc-high-threshold", o.image.HighThresholdPercent, "the percent of disk usage of the image filesystem at or above which unused images are removed; 100 with --image-maximum-gc-age=0 turns image garbage collection off (the kubelet's)")
	fs.IntVar(&o.image.LowThresholdPercent, "image-gc-low-threshold", o.image.LowThresholdPercent, "the percent of disk usage image garbage collection frees down to; at most --image-gc-high-threshold")
	fs.DurationVar(&o.image.MinAge, "image-minimum-gc-age", o.image.MinAge, "minimum age of an unused image (since crivk first saw it) before it is removed")
	fs.DurationVar(&o.image.MaxAge, "image-maximum-gc-age", o.image.MaxAge, "an image unused for longer is removed whatever the disk usage (0: never)")
	fs.DurationVar(&o.container.MinAge, "minimum-container-ttl-duration", o.container.MinAge, "minimum age of a finished container before the container garbage collector removes it")
	fs.IntVar(&o.container.MaxPerPodContainer, "maximum-dead-containers-per-container", o.container.MaxPerPodContainer, "dead instances kept per container of a pod (negative: no limit for the collector; every sync keeps at most max(this, 1))")
	fs.IntVar(&o.container.MaxContainers, "maximum-dead-containers", o.container.MaxContainers, "dead containers kept on the node (negative: no limit)")
}

func (o *gcOptions) validate() error {
	if err := o.image.Validate(); err != nil {
		return err
	}
	return o.container.Validate()
}

// startGC starts the container collector (every minute) and the image
// collector (every 5 minutes, its image list every 30 s, reported as the
// node's status.images) until ctx ends. The eviction manager reaches them
// through the returned collectors' DeleteAllUnusedContainers and
// DeleteUnusedImages.
func startGC(ctx context.Context, o *options, rt *cri.Runtime, engine *lifecycle.Engine, nodeProvider *nodestatus.NodeProvider,
	recorder record.EventRecorder, agentMetrics *metrics.Agent) (*cri.ContainerGC, *images.Manager, error) {
	// The kubelet's node reference: the node's name doubles as its UID.
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: o.nodeName, UID: types.UID(o.nodeName)}
	cgc, err := cri.NewContainerGC(rt, cri.ContainerGCConfig{Policy: o.gc.container, Pods: engine, NodeRef: nodeRef,
		Observe: agentMetrics.ObserveContainerGC})
	if err != nil {
		return nil, nil, err
	}
	// A node of many shares the process' image collector (fleet.go), run
	// there.
	igc := o.gc.sharedImages
	if igc == nil {
		if igc, err = images.New(images.Config{Policy: o.gc.image, Runtime: rt, Recorder: recorder, NodeRef: nodeRef,
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
