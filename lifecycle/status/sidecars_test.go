package status

import (
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestSidecarStatus(t *testing.T) {
	pod := func(policy v1.RestartPolicy) *v1.Pod {
		p := testutil.Pod(policy, []string{"side"}, "a")
		p.Spec.InitContainers[0].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
		return p
	}
	tests := map[string]struct {
		policy      v1.RestartPolicy
		rt          *cri.PodStatus
		wantPhase   v1.PodPhase
		initialized bool
	}{
		"sidecar not started yet: Pending, not initialized": {
			rt: rtStatus(true), wantPhase: v1.PodPending,
		},
		"sidecar running, main not yet created: initialized, Pending": {
			rt: rtStatus(true, ini("side", 0, cri.StateRunning, 0)), wantPhase: v1.PodPending, initialized: true,
		},
		"both running: Running": {
			rt: rtStatus(true, ini("side", 0, cri.StateRunning, 0), reg("a", 0, cri.StateRunning, 0)), wantPhase: v1.PodRunning, initialized: true,
		},
		"sidecar restarting after initialization: still Running and initialized": {
			rt: rtStatus(true, ini("side", 0, cri.StateExited, 1), reg("a", 0, cri.StateRunning, 0)), wantPhase: v1.PodRunning, initialized: true,
		},
		"Never: main done, sidecar still running: Running until it is stopped": {
			policy: v1.RestartPolicyNever,
			rt:     rtStatus(true, ini("side", 0, cri.StateRunning, 0), reg("a", 0, cri.StateExited, 0)), wantPhase: v1.PodRunning, initialized: true,
		},
		"Never: main done, sidecar stopped: Succeeded whatever the sidecar's exit code": {
			policy: v1.RestartPolicyNever,
			rt:     rtStatus(true, ini("side", 0, cri.StateExited, 137), reg("a", 0, cri.StateExited, 0)), wantPhase: v1.PodSucceeded, initialized: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			policy := tc.policy
			if policy == "" {
				policy = v1.RestartPolicyAlways
			}
			s := Generate(Input{Pod: pod(policy), Runtime: tc.rt, Now: time.Now()})
			if s.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", s.Phase, tc.wantPhase)
			}
			for _, c := range s.Conditions {
				if c.Type == v1.PodInitialized && (c.Status == v1.ConditionTrue) != tc.initialized {
					t.Errorf("Initialized %s (%s), want %v", c.Status, c.Message, tc.initialized)
				}
			}
		})
	}
}
