package podutil

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestVolumeMountStatuses: the container status' volumeMounts as the
// kubelet's convertToAPIContainerStatuses writes them: every mount in spec
// order with name, mountPath and readOnly; recursiveReadOnly only on
// read-only mounts, Enabled where the mount resolves to recursive on this
// handler, else Disabled (a mount that cannot be resolved too).
func TestVolumeMountStatuses(t *testing.T) {
	disabled, enabled := ptr.To(v1.RecursiveReadOnlyDisabled), ptr.To(v1.RecursiveReadOnlyEnabled)
	for name, tc := range map[string]struct {
		mount     v1.VolumeMount
		supported bool
		want      v1.VolumeMountStatus
	}{
		"writable":              {mount: v1.VolumeMount{}, want: v1.VolumeMountStatus{}},
		"writable, IfPossible":  {mount: v1.VolumeMount{RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)}, supported: true, want: v1.VolumeMountStatus{}},
		"read-only, unset":      {mount: v1.VolumeMount{ReadOnly: true}, supported: true, want: v1.VolumeMountStatus{ReadOnly: true, RecursiveReadOnly: disabled}},
		"IfPossible, supported": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)}, supported: true, want: v1.VolumeMountStatus{ReadOnly: true, RecursiveReadOnly: enabled}},
		"IfPossible, not supported": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)},
			want: v1.VolumeMountStatus{ReadOnly: true, RecursiveReadOnly: disabled}},
		"Enabled, supported": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: enabled}, supported: true, want: v1.VolumeMountStatus{ReadOnly: true, RecursiveReadOnly: enabled}},
		"Enabled, not supported (an error: Disabled)": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: enabled},
			want: v1.VolumeMountStatus{ReadOnly: true, RecursiveReadOnly: disabled}},
		"Enabled with propagation (an error: Disabled)": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: enabled, MountPropagation: ptr.To(v1.MountPropagationHostToContainer)},
			supported: true, want: v1.VolumeMountStatus{ReadOnly: true, RecursiveReadOnly: disabled}},
	} {
		t.Run(name, func(t *testing.T) {
			tc.mount.Name, tc.mount.MountPath, tc.mount.SubPath = "data", "/data", "sub"
			c := &v1.Container{VolumeMounts: []v1.VolumeMount{{Name: "first", MountPath: "/first"}, tc.mount}}
			tc.want.Name, tc.want.MountPath = "data", "/data"
			want := []v1.VolumeMountStatus{{Name: "first", MountPath: "/first"}, tc.want}
			if got := VolumeMountStatuses(c, tc.supported); !reflect.DeepEqual(got, want) {
				t.Errorf("VolumeMountStatuses = %+v, want %+v", got, want)
			}
		})
	}
	if got := VolumeMountStatuses(&v1.Container{}, true); got != nil {
		t.Errorf("no mounts: %+v, want nil", got)
	}
}

// TestResolveRecursiveReadOnly: the kubelet's resolveRecursiveReadOnly,
// including its errors (the runtime manager's CreateContainerConfigError
// text after "failed to resolve recursive read-only mode: ").
func TestResolveRecursiveReadOnly(t *testing.T) {
	for name, tc := range map[string]struct {
		mount     v1.VolumeMount
		supported bool
		want      bool
		wantErr   string
	}{
		"unset":                     {mount: v1.VolumeMount{ReadOnly: true}, supported: true},
		"Disabled":                  {mount: v1.VolumeMount{RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyDisabled)}, supported: true},
		"IfPossible, supported":     {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)}, supported: true, want: true},
		"IfPossible, not supported": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)}},
		"Enabled, supported":        {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled)}, supported: true, want: true},
		"Enabled, not supported": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled)},
			wantErr: `volume "v" requested recursive read-only mode, but it is not supported by the runtime`},
		"not read-only": {mount: v1.VolumeMount{RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)}, supported: true,
			wantErr: `volume "v" requested recursive read-only mode, but it is not read-only`},
		"propagation": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible), MountPropagation: ptr.To(v1.MountPropagationBidirectional)},
			supported: true, wantErr: `volume "v" requested recursive read-only mode, but it is not compatible with propagation "Bidirectional"`},
		"unknown mode": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyMode("Sometimes"))},
			wantErr: `unknown recursive read-only mode "Sometimes"`},
	} {
		t.Run(name, func(t *testing.T) {
			tc.mount.Name = "v"
			got, err := ResolveRecursiveReadOnly(tc.mount, tc.supported)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("= %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
