package podutil

import (
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func ctr(req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func TestComputeQOSClass(t *testing.T) {
	for name, tc := range map[string]struct {
		containers, inits []v1.Container
		pod               *v1.ResourceRequirements // spec.resources
		want              v1.PodQOSClass
	}{
		"nothing":                        {containers: []v1.Container{ctr(nil, nil)}, want: v1.PodQOSBestEffort},
		"only other resources":           {containers: []v1.Container{ctr(v1.ResourceList{"example.com/gpu": resource.MustParse("1")}, nil)}, want: v1.PodQOSBestEffort},
		"zero requests":                  {containers: []v1.Container{ctr(testutil.Resources("0", "0"), nil)}, want: v1.PodQOSBestEffort},
		"limits equal requests":          {containers: []v1.Container{ctr(testutil.Resources("100m", "16Mi"), testutil.Resources("100m", "16Mi"))}, want: v1.PodQOSGuaranteed},
		"limits only, not defaulted":     {containers: []v1.Container{ctr(nil, testutil.Resources("1", "1Gi"))}, want: v1.PodQOSBurstable}, // the API server defaults requests to limits first
		"memory limit only":              {containers: []v1.Container{ctr(nil, testutil.Resources("", "16Mi"))}, want: v1.PodQOSBurstable},
		"request below limit":            {containers: []v1.Container{ctr(testutil.Resources("100m", "16Mi"), testutil.Resources("200m", "16Mi"))}, want: v1.PodQOSBurstable},
		"one guaranteed, one besteffort": {containers: []v1.Container{ctr(testutil.Resources("1", "1Gi"), testutil.Resources("1", "1Gi")), ctr(nil, nil)}, want: v1.PodQOSBurstable},
		"init container without limits":  {containers: []v1.Container{ctr(testutil.Resources("1", "1Gi"), testutil.Resources("1", "1Gi"))}, inits: []v1.Container{ctr(testutil.Resources("", "1Mi"), nil)}, want: v1.PodQOSBurstable},
		"requests only":                  {containers: []v1.Container{ctr(testutil.Resources("100m", ""), nil)}, want: v1.PodQOSBurstable},
		// Pod-level resources (the kubelet's ComputePodQOS with PodLevelResources): the containers' values are not read.
		"pod-level limits equal requests, containers without": {containers: []v1.Container{ctr(nil, nil), ctr(nil, nil)}, pod: &v1.ResourceRequirements{Requests: testutil.Resources("100m", "32Mi"), Limits: testutil.Resources("100m", "32Mi")}, want: v1.PodQOSGuaranteed},
		"pod-level guaranteed, container burstable":           {containers: []v1.Container{ctr(testutil.Resources("50m", "16Mi"), nil)}, pod: &v1.ResourceRequirements{Requests: testutil.Resources("100m", "32Mi"), Limits: testutil.Resources("100m", "32Mi")}, want: v1.PodQOSGuaranteed},
		"pod-level requests below limits":                     {containers: []v1.Container{ctr(nil, nil)}, pod: &v1.ResourceRequirements{Requests: testutil.Resources("50m", "32Mi"), Limits: testutil.Resources("100m", "32Mi")}, want: v1.PodQOSBurstable},
		"pod-level memory limit only":                         {containers: []v1.Container{ctr(testutil.Resources("1", "1Gi"), testutil.Resources("1", "1Gi"))}, pod: &v1.ResourceRequirements{Requests: testutil.Resources("", "32Mi"), Limits: testutil.Resources("", "32Mi")}, want: v1.PodQOSBurstable},
		"pod-level requests only":                             {containers: []v1.Container{ctr(nil, nil)}, pod: &v1.ResourceRequirements{Requests: testutil.Resources("100m", "")}, want: v1.PodQOSBurstable},
		"pod-level with only other resources":                 {containers: []v1.Container{ctr(testutil.Resources("1", "1Gi"), testutil.Resources("1", "1Gi"))}, pod: &v1.ResourceRequirements{Requests: v1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi")}}, want: v1.PodQOSBestEffort},
		// Empty pod-level resources do not count (v1.37, #137150): the containers decide.
		"pod-level {}":               {containers: []v1.Container{ctr(testutil.Resources("1", "1Gi"), testutil.Resources("1", "1Gi"))}, pod: &v1.ResourceRequirements{}, want: v1.PodQOSGuaranteed},
		"pod-level {requests: {}}":   {containers: []v1.Container{ctr(testutil.Resources("1", "1Gi"), testutil.Resources("1", "1Gi"))}, pod: &v1.ResourceRequirements{Requests: v1.ResourceList{}}, want: v1.PodQOSGuaranteed},
		"pod-level {limits: {}}":     {containers: []v1.Container{ctr(testutil.Resources("100m", ""), nil)}, pod: &v1.ResourceRequirements{Limits: v1.ResourceList{}}, want: v1.PodQOSBurstable},
		"pod-level unsupported only": {containers: []v1.Container{ctr(testutil.Resources("1", "1Gi"), testutil.Resources("1", "1Gi"))}, pod: &v1.ResourceRequirements{Requests: v1.ResourceList{"example.com/gpu": resource.MustParse("1")}}, want: v1.PodQOSGuaranteed},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: tc.containers, InitContainers: tc.inits, Resources: tc.pod}}
			if got := ComputeQOSClass(pod); got != tc.want {
				t.Errorf("ComputeQOSClass = %s, want %s", got, tc.want)
			}
			if got := QOSClass(pod); got != tc.want {
				t.Errorf("QOSClass without status = %s, want %s", got, tc.want)
			}
			pod.Status.QOSClass = v1.PodQOSBurstable
			if got := QOSClass(pod); got != v1.PodQOSBurstable {
				t.Errorf("QOSClass does not take the status's class: %s", got)
			}
		})
	}
}
