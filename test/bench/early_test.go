package main

import (
	"context"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runningOf is a runtime whose running containers belong to the given pod
// UIDs.
type runningOf []types.UID

func (r runningOf) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	var cs []*runtimeapi.Container
	for i, uid := range r {
		cs = append(cs, &runtimeapi.Container{Id: string(rune('a' + i)), State: runtimeapi.ContainerState_CONTAINER_RUNNING,
			Labels: map[string]string{cri.LabelPodUID: string(uid)}})
	}
	return cs, nil
}

func (r runningOf) ContainerStatus(context.Context, string, bool) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{}, nil
}

// TestEarlyDeletionsCounted: of three pods of a batch, one's object is
// still in the API (its running container is fine), one is gone with no
// container (fine), one is gone while its container runs (early).
func TestEarlyDeletionsCounted(t *testing.T) {
	kept := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "b", UID: "u-kept"}}
	cs := fake.NewClientset(kept)
	d := &apiDriver{client: cs, ns: "b", cri: runningOf{"u-kept", "u-early", "u-other-batch"}, samplePeriod: 10 * time.Millisecond,
		early: map[types.UID]bool{}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.watchEarly(context.Background(), map[types.UID]bool{"u-kept": true, "u-early": true, "u-clean": true}, stop)
	}()
	// Wait for the sampler to have seen the early pod (at most 5 s), then
	// stop it: what else it counted by then is checked below.
	_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return d.earlyDeletions() >= 1, nil
	})
	close(stop)
	<-done
	if n := d.earlyDeletions(); n != 1 || !d.early["u-early"] {
		t.Errorf("early deletions %d %v, want 1 (u-early)", n, d.early)
	}
}
