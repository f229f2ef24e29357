package lifecycle

import (
	"sync/atomic"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPodStateForContainerGC(t *testing.T) {
	var synced atomic.Bool
	apiPod := &v1.Pod{}
	apiPod.UID = "in-api-only"
	f := newEngineFixture(t, func(c *Config) {
		c.APIPods = func() ([]*v1.Pod, error) { return []*v1.Pod{apiPod}, nil }
		c.APIPodsSynced = func() bool { return synced.Load() }
	})
	if f.e.SourcesReady() {
		t.Error("sources ready before the informer synced")
	}
	synced.Store(true)
	if !f.e.SourcesReady() {
		t.Error("sources not ready once the informer synced")
	}

	pod := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
	f.startRunning(t, pod)
	for uid, want := range map[types.UID]bool{
		pod.UID:       false, // running
		"in-api-only": false, // not handed to the engine yet
		"unknown":     true,
	} {
		if got := f.e.ShouldPodContentBeRemoved(uid); got != want {
			t.Errorf("ShouldPodContentBeRemoved(%s) = %v, want %v", uid, got, want)
		}
		if got := f.e.ShouldPodRuntimeBeRemoved(uid); got != want {
			t.Errorf("ShouldPodRuntimeBeRemoved(%s) = %v, want %v", uid, got, want)
		}
	}
}
