package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// TestEngineResizeRetry: a Deferred resize is decided again on the
// kubelet's triggers (its allocation manager's RetryPendingResizes), not
// at the pod's own syncs: when another pod's API object is gone
// (pods_removed), and 3 min after the last retry (periodic_retry) when the
// resources were freed by a pod that finished but was not removed.
func TestEngineResizeRetry(t *testing.T) {
	node := &v1.Node{}
	node.Name = "n"
	node.Status.Allocatable = testutil.Resources("2", "4Gi")
	node.Status.Allocatable[v1.ResourcePods] = resource.MustParse("110")
	for name, tc := range map[string]struct {
		free func(f *engineFixture, big *v1.Pod)
		// wait is how long the clock is stepped (by a minute at a time)
		// before the resize must be allocated; before that, it stays
		// Deferred through the pod's own syncs.
		wait time.Duration
	}{
		"the other pod removed": {
			free: func(f *engineFixture, big *v1.Pod) {
				f.e.Kill(context.Background(), deleted(big, f.clock.Now(), nil))
			},
		},
		"the other pod finished: the periodic retry": {
			free: func(f *engineFixture, big *v1.Pod) { f.rt.exit(big.UID, 0) },
			wait: resizeRetryDelay,
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newEngineFixture(t, func(c *Config) {
				c.NodeAllocatable = node.Status.Allocatable
				c.Node = func() *v1.Node { return node }
			})
			sized := func(uid types.UID, cpu string, policy v1.RestartPolicy) *v1.Pod {
				p := enginePod(uid, string(uid), policy)
				p.Generation = 1
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: testutil.Resources(cpu, "64Mi"), Limits: testutil.Resources(cpu, "64Mi")}
				return p
			}
			big := sized("big", "1500m", v1.RestartPolicyNever)
			small := sized("small", "200m", v1.RestartPolicyAlways)
			f.startRunning(t, big)
			f.startRunning(t, small)
			pending := func() *v1.PodCondition {
				for _, c := range f.lastPublished("small").Status.Conditions {
					if c.Type == v1.PodResizePending {
						return &c
					}
				}
				return nil
			}
			resized := small.DeepCopy()
			resized.Generation = 2
			resized.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: testutil.Resources("1", "64Mi"), Limits: testutil.Resources("1", "64Mi")}
			f.e.UpdatePod(context.Background(), resized)
			f.eventually(t, "PodResizePending Deferred", func() bool { c := pending(); return c != nil && c.Reason == v1.PodReasonDeferred })
			// The resize's own decision asked the other deferred resizes to be
			// retried (pod_updated); that retry must be over before the
			// resources are freed, or it would find them free (under load it
			// ran after free, and the periodic timer was not reset by it).
			f.eventually(t, "the pod_updated retry handled", f.e.alloc.RetriesIdle)

			tc.free(f, big)
			f.e.Housekeeping(context.Background())
			f.eventually(t, "big no longer active", func() bool {
				f.e.Housekeeping(context.Background())
				return f.e.Pod("big") == nil || f.e.workers.IsPodKnownTerminated("big")
			})
			allocated := func() bool {
				return f.lastPublished("small").Status.ContainerStatuses[0].AllocatedResources.Cpu().MilliValue() == 1000 && pending() == nil
			}
			start := f.clock.Now()
			for f.clock.Since(start) < tc.wait-time.Minute {
				f.step(time.Minute)
				f.eventually(t, "small idle", func() bool { return !f.e.workers.isWorking("small") })
				if allocated() {
					t.Fatalf("allocated %s after the resources were freed, at a sync of its own; want at the retry", f.clock.Since(start))
				}
			}
			if tc.wait > 0 {
				f.step(2 * time.Minute)
			}
			f.eventually(t, "the deferred resize allocated", allocated)
			if d := f.clock.Since(start); d >= tc.wait+2*time.Minute+syncInterval {
				t.Errorf("allocated %s after the resources were freed", d)
			}
		})
	}
}
