package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Volume timing.
const (
	// mountRetry is how soon a pod whose volumes could not be set up is
	// synced again (a missing ConfigMap may appear at any time).
	mountRetry = time.Second
	// mountEventInterval bounds how often the same FailedMount event is
	// recorded for a pod: the event recorder's spam filter drops a pod's
	// events after a burst, which would hide the ones that follow.
	mountEventInterval = 10 * time.Second
)

// orphanCleaner is implemented by volume managers that can remove the
// directories of pods the engine does not know any more.
type orphanCleaner interface {
	CleanupOrphans(ctx context.Context, keep func(types.UID) bool) error
}

// mountEvents remembers the FailedMount events recorded per pod.
type mountEvents struct {
	mu   sync.Mutex
	last map[types.UID]map[string]time.Time // guarded by mu
}

// due reports whether the event msg of pod uid may be recorded at now.
func (m *mountEvents) due(uid types.UID, msg string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[types.UID]map[string]time.Time{}
	}
	byMsg := m.last[uid]
	if byMsg == nil {
		byMsg = map[string]time.Time{}
		m.last[uid] = byMsg
	}
	if t, ok := byMsg[msg]; ok && now.Sub(t) < mountEventInterval {
		return false
	}
	byMsg[msg] = now
	return true
}

func (m *mountEvents) forget(uid types.UID) {
	m.mu.Lock()
	delete(m.last, uid)
	m.mu.Unlock()
}

// mountVolumes sets up the pod's volumes before its containers may start.
// On failure the pod stays in ContainerCreating: a FailedMount Warning
// event names each volume that failed and the pod is synced again after
// mountRetry.
func (s *syncer) mountVolumes(ctx context.Context, pod *v1.Pod) error {
	if s.volumes == nil {
		return nil
	}
	err := s.volumes.MountPod(ctx, pod)
	if err == nil {
		s.mountEvents.forget(pod.UID)
		return nil
	}
	now := s.clock.Now()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, one := range errs {
		log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).Warn(one.Error())
		if s.recorder != nil && s.mountEvents.due(pod.UID, one.Error(), now) {
			s.recorder.Eventf(pod, v1.EventTypeWarning, "FailedMount", "%s", one.Error())
		}
	}
	return &BackOffError{Err: fmt.Errorf("volumes of pod %s/%s not ready: %w", pod.Namespace, pod.Name, err), Until: now.Add(mountRetry)}
}

// unmountVolumes removes the volumes of a pod none of whose containers can
// run any more.
func (s *syncer) unmountVolumes(ctx context.Context, pod *v1.Pod) error {
	s.mountEvents.forget(pod.UID)
	if s.volumes == nil {
		return nil
	}
	if err := s.volumes.UnmountPod(ctx, pod); err != nil {
		return fmt.Errorf("tearing down volumes of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// cleanupPodDirs removes the directories of pods that are not wanted
// (housekeeping's cleanupOrphans).
func (s *syncer) cleanupPodDirs(ctx context.Context, wanted func(types.UID) bool) error {
	oc, ok := s.volumes.(orphanCleaner)
	if !ok {
		return nil
	}
	return oc.CleanupOrphans(ctx, wanted)
}
