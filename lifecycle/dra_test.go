package lifecycle

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// draPod is enginePod asking for claim "gpu" (by name, or by template
// when template is set).
func draPod(template bool) *v1.Pod {
	pod := enginePod("uid-1", "job", v1.RestartPolicyNever)
	c := v1.PodResourceClaim{Name: "gpu"}
	if template {
		c.ResourceClaimTemplateName = ptr.To("gpu-template")
	} else {
		c.ResourceClaimName = ptr.To("gpu-claim")
	}
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{c}
	pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return pod
}

func gpuClaim(reserved bool, drivers ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "gpu-claim", UID: "claim-uid"}}
	if reserved {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "job", UID: "uid-1"}}
	}
	if drivers != nil {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, d := range drivers {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: d, Pool: "node", Device: "gpu-0"})
		}
	}
	return c
}

// TestPrepareResourceClaims: the kubelet's DRA manager's validation pass,
// in its order and words; a claim a driver allocated is never prepared
// (no driver registers with crivk).
func TestPrepareResourceClaims(t *testing.T) {
	tests := map[string]struct {
		pod     *v1.Pod
		claims  []runtime.Object
		noCli   bool
		wantErr string // "": the pod may run
	}{
		"no claims": {pod: enginePod("uid-1", "job", v1.RestartPolicyNever)},
		"claim missing": {pod: draPod(false),
			wantErr: `prepare dynamic resources: fetch ResourceClaim gpu-claim: resourceclaims.resource.k8s.io "gpu-claim" not found`},
		"no client": {pod: draPod(false), noCli: true,
			wantErr: "prepare dynamic resources: fetch ResourceClaim gpu-claim: no ResourceClaim client configured"},
		"not reserved for the pod": {pod: draPod(false), claims: []runtime.Object{gpuClaim(false, "gpu.example.com")},
			wantErr: "prepare dynamic resources: pod job (uid-1) is not allowed to use ResourceClaim gpu-claim (claim-uid)"},
		"reserved, not allocated": {pod: draPod(false), claims: []runtime.Object{gpuClaim(true)},
			wantErr: "prepare dynamic resources: ResourceClaim gpu-claim: not allocated"},
		"allocated by a driver: never prepared here": {pod: draPod(false), claims: []runtime.Object{gpuClaim(true, "gpu.example.com")},
			wantErr: "prepare dynamic resources: DRA driver gpu.example.com is not registered"},
		"allocated without devices: nothing to prepare": {pod: draPod(false), claims: []runtime.Object{gpuClaim(true, []string{}...)}},
		"template, claim not made yet": {pod: draPod(true),
			wantErr: `prepare dynamic resources: pod "prod/job": ResourceClaim not created yet`},
		"template, no claim needed": {pod: func() *v1.Pod {
			p := draPod(true)
			p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu"}}
			return p
		}()},
		"template, claim not owned by the pod": {pod: func() *v1.Pod {
			p := draPod(true)
			p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("gpu-claim")}}
			return p
		}(), claims: []runtime.Object{gpuClaim(true, "gpu.example.com")},
			wantErr: "prepare dynamic resources: ResourceClaim prod/gpu-claim was not created for pod prod/job (pod is not owner)"},
		"neither name nor template": {pod: func() *v1.Pod {
			p := draPod(false)
			p.Spec.ResourceClaims[0].ResourceClaimName = nil
			return p
		}(), wantErr: `prepare dynamic resources: pod "prod/job", spec.resourceClaim "gpu": none of the supported fields are set`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var cli resourcev1client.ResourceClaimsGetter
			if !tc.noCli {
				cli = fake.NewSimpleClientset(tc.claims...).ResourceV1()
			}
			err := prepareResourceClaims(context.Background(), cli, tc.pod)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestEngineDoesNotRunAPodWhoseClaimsCannotBePrepared: as the kubelet's
// SyncPod, nothing of the pod is created; the Warning
// FailedPrepareDynamicResources says why and the pod waits (Pending,
// ContainerCreating) and is tried again at the next resync.
func TestEngineDoesNotRunAPodWhoseClaimsCannotBePrepared(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	cli := fake.NewSimpleClientset(gpuClaim(true, "gpu.example.com")).ResourceV1()
	f := newEngineFixture(t, func(c *Config) { c.Recorder, c.ResourceClaims = rec, cli })
	pod := draPod(false)
	f.e.UpdatePod(context.Background(), pod)
	want := "Warning FailedPrepareDynamicResources Failed to prepare dynamic resources: prepare dynamic resources: DRA driver gpu.example.com is not registered"
	waitEvent := func() {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case e := <-rec.Events:
				if e == want {
					return
				}
			case <-deadline:
				t.Fatalf("no event %q", want)
			}
		}
	}
	waitEvent()
	f.eventually(t, "the worker idle", func() bool { return !f.e.workers.isWorking("uid-1") })
	if n := f.rt.count("uid-1", "SyncPod"); n != 0 {
		t.Errorf("SyncPod called %d times for a pod whose claims cannot be prepared", n)
	}
	f.eventually(t, "Pending with c waiting ContainerCreating published", func() bool {
		p := f.lastPublished("uid-1")
		return p != nil && p.Status.Phase == v1.PodPending && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Waiting != nil && p.Status.ContainerStatuses[0].State.Waiting.Reason == "ContainerCreating"
	})
	f.step(2 * syncInterval) // past the resync's jitter
	waitEvent()              // tried again
	if n := f.rt.count("uid-1", "SyncPod"); n != 0 {
		t.Errorf("SyncPod called %d times after the resync", n)
	}
}
