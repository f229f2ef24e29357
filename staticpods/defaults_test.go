package staticpods

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestImageVolumeDefaults: an image volume of a static pod gets the API's
// default pull policy (SetDefaults_Volume), as a container's image does: a
// static pod never passes through the API server before it runs.
func TestImageVolumeDefaults(t *testing.T) {
	for ref, want := range map[string]v1.PullPolicy{
		"registry.example/tools":   v1.PullAlways,
		"registry.example/tools:1": v1.PullIfNotPresent,
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "v", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref}}},
			{Name: "set", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: v1.PullNever}}},
		}}}
		setAPIDefaults(pod)
		if got := pod.Spec.Volumes[0].Image.PullPolicy; got != want {
			t.Errorf("%s: pull policy %q, want %q", ref, got, want)
		}
		if got := pod.Spec.Volumes[1].Image.PullPolicy; got != v1.PullNever {
			t.Errorf("%s: a policy given became %q", ref, got)
		}
	}
}
