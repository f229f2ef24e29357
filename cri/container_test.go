package cri

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func configPod() *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "prod", "uid-7"
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](45)
	return pod
}

func TestContainerConfig(t *testing.T) {
	tests := map[string]struct {
		pod     func() *v1.Pod
		c       v1.Container
		typ     ContainerType
		attempt uint32
		check   func(t *testing.T, cfg *runtimeapi.ContainerConfig)
		wantErr bool
	}{
		"env expands earlier vars only, command and args see all": {
			pod: configPod,
			c: v1.Container{Name: "app", Image: "nginx:1.27",
				Env: []v1.EnvVar{
					{Name: "A", Value: "x"},
					{Name: "B", Value: "$(A)-$(C)"}, // C is defined later: left as is
					{Name: "C", Value: "c"},
					{Name: "D", Value: "$$(A)"},
				},
				Command: []string{"/bin/$(C)", "$(A)$(B)"},
				Args:    []string{"--v=$(UNDEF)", "$$(A)"},
			},
			typ: ContainerTypeRegular,
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
				var env []string
				for _, kv := range cfg.Envs {
					env = append(env, kv.Key+"="+string(kv.Value))
				}
				if want := []string{"A=x", "B=x-$(C)", "C=c", "D=$(A)"}; !reflect.DeepEqual(env, want) {
					t.Errorf("env = %v, want %v", env, want)
				}
				if want := []string{"/bin/c", "xx-$(C)"}; !reflect.DeepEqual(cfg.Command, want) {
					t.Errorf("command = %v, want %v", cfg.Command, want)
				}
				if want := []string{"--v=$(UNDEF)", "$(A)"}; !reflect.DeepEqual(cfg.Args, want) {
					t.Errorf("args = %v, want %v", cfg.Args, want)
				}
			},
		},
		"metadata, image, log path and labels of attempt 3": {
			pod:     configPod,
			c:       v1.Container{Name: "app", Image: "nginx:1.27", TerminationMessagePath: "/dev/termination-log"},
			typ:     ContainerTypeInit,
			attempt: 3,
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
				if cfg.Metadata.Name != "app" || cfg.Metadata.Attempt != 3 {
					t.Errorf("metadata = %+v, want app attempt 3", cfg.Metadata)
				}
				if cfg.LogPath != "app/3.log" {
					t.Errorf("log path = %q, want app/3.log (kubelet: <container>/<restartCount>.log)", cfg.LogPath)
				}
				if cfg.Image.Image != "sha256:abc" || cfg.Image.UserSpecifiedImage != "nginx:1.27" {
					t.Errorf("image = %+v, want ref sha256:abc as user's nginx:1.27", cfg.Image)
				}
				wantLabels := map[string]string{
					LabelPodName: "web", LabelPodNamespace: "prod", LabelPodUID: "uid-7",
					LabelContainerName: "app", LabelContainerType: "init", LabelManagedBy: "crivk",
				}
				if !reflect.DeepEqual(cfg.Labels, wantLabels) {
					t.Errorf("labels = %v, want %v", cfg.Labels, wantLabels)
				}
				for k, v := range map[string]string{
					AnnotationRestartCount:              "3",
					AnnotationPodTerminationGracePeriod: "45",
					AnnotationTerminationMessagePath:    "/dev/termination-log",
					AnnotationContainerType:             "init",
				} {
					if cfg.Annotations[k] != v {
						t.Errorf("annotation %s = %q, want %q", k, cfg.Annotations[k], v)
					}
				}
			},
		},
		"runAsNonRoot with runAsUser 0 is a config error": {
			pod: configPod,
			c: v1.Container{Name: "app", Image: "nginx:1.27", SecurityContext: &v1.SecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}},
			wantErr: true,
		},
		"pod-level runAsNonRoot with container runAsUser 0 is a config error": {
			pod: func() *v1.Pod {
				p := configPod()
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
				return p
			},
			c:       v1.Container{Name: "app", Image: "nginx:1.27", SecurityContext: &v1.SecurityContext{RunAsUser: ptr.To[int64](0)}},
			wantErr: true,
		},
		"runAsNonRoot with runAsUser 1000 is fine and passed on": {
			pod: func() *v1.Pod {
				p := configPod()
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000)}
				return p
			},
			c: v1.Container{Name: "app", Image: "nginx:1.27"},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
				sc := cfg.Linux.SecurityContext
				if sc.RunAsUser.GetValue() != 1000 || sc.RunAsGroup.GetValue() != 2000 {
					t.Errorf("runAsUser/Group = %v/%v, want 1000/2000", sc.RunAsUser, sc.RunAsGroup)
				}
			},
		},
		"container runAsUser overrides the pod's": {
			pod: func() *v1.Pod {
				p := configPod()
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}
				return p
			},
			c: v1.Container{Name: "app", Image: "nginx:1.27", SecurityContext: &v1.SecurityContext{RunAsUser: ptr.To[int64](1001)}},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
				if got := cfg.Linux.SecurityContext.RunAsUser.GetValue(); got != 1001 {
					t.Errorf("runAsUser = %d, want 1001", got)
				}
			},
		},
		"privileged gets no masked paths": {
			pod: configPod,
			c:   v1.Container{Name: "app", Image: "nginx:1.27", SecurityContext: &v1.SecurityContext{Privileged: ptr.To(true)}},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
				sc := cfg.Linux.SecurityContext
				if !sc.Privileged || len(sc.MaskedPaths) != 0 || len(sc.ReadonlyPaths) != 0 {
					t.Errorf("privileged=%v masked=%v readonly=%v, want privileged without masked or read-only paths", sc.Privileged, sc.MaskedPaths, sc.ReadonlyPaths)
				}
			},
		},
		"unprivileged gets the default masked paths": {
			pod: configPod,
			c:   v1.Container{Name: "app", Image: "nginx:1.27"},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
				sc := cfg.Linux.SecurityContext
				if sc.Privileged || len(sc.MaskedPaths) == 0 || len(sc.ReadonlyPaths) == 0 {
					t.Errorf("privileged=%v masked=%v readonly=%v, want default masked and read-only paths", sc.Privileged, sc.MaskedPaths, sc.ReadonlyPaths)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			typ := tc.typ
			if typ == "" {
				typ = ContainerTypeRegular
			}
			cfg, err := ContainerConfig(tc.pod(), &tc.c, typ, tc.attempt, "sha256:abc", nil)
			if tc.wantErr {
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v (%T), want *ConfigError", err, err)
				}
				if cfg != nil {
					t.Errorf("config = %v, want nil with the error", cfg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ContainerConfig: %v", err)
			}
			tc.check(t, cfg)
		})
	}
}

func TestContainerLogPath(t *testing.T) {
	tests := map[string]struct {
		name    string
		attempt uint32
		want    string
	}{
		"first": {"app", 0, "app/0.log"},
		"tenth": {"sidecar", 10, "sidecar/10.log"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ContainerLogPath(tc.name, tc.attempt); got != tc.want {
				t.Errorf("ContainerLogPath(%q, %d) = %q, want %q", tc.name, tc.attempt, got, tc.want)
			}
		})
	}
}

// TestContainerConfigDevicePluginOptions: what the device plugins add (the
// kubelet's DeviceRunContainerOptions) reaches the CRI config: devices, CDI
// devices and annotations, beneath the container's own annotations.
func TestContainerConfigDevicePluginOptions(t *testing.T) {
	pod := configPod()
	c := &v1.Container{Name: "app", Image: "busybox"}
	opts := &RunContainerOptions{
		Devices:     []*runtimeapi.Device{{ContainerPath: "/dev/x0", HostPath: "/dev/null", Permissions: "rw"}},
		CDIDevices:  []*runtimeapi.CDIDevice{{Name: "example.com/dev=d0"}},
		Annotations: map[string]string{"example.com/dev": "d0", AnnotationRestartCount: "99"},
	}
	cfg, err := ContainerConfig(pod, c, ContainerTypeRegular, 2, "busybox", opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Devices) != 1 || cfg.Devices[0].HostPath != "/dev/null" || cfg.Devices[0].Permissions != "rw" {
		t.Errorf("devices %v", cfg.Devices)
	}
	if len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "example.com/dev=d0" {
		t.Errorf("CDI devices %v", cfg.CDIDevices)
	}
	if cfg.Annotations["example.com/dev"] != "d0" || cfg.Annotations[AnnotationRestartCount] != "2" {
		t.Errorf("annotations %v: the plugin's are added, the container's own win", cfg.Annotations)
	}
}

func TestAttemptFromLogDir(t *testing.T) {
	for name, tc := range map[string]struct {
		files []string
		dirs  []string
		want  uint32
	}{
		"no directory":        {want: 0},
		"empty":               {dirs: []string{"."}, want: 0},
		"first attempt":       {files: []string{"0.log"}, want: 1},
		"highest wins":        {files: []string{"0.log", "2.log", "1.log"}, want: 3},
		"rotated copies":      {files: []string{"4.log.20250601-120000", "4.log.20250601-110000.gz", "3.log"}, want: 5},
		"others ignored":      {files: []string{"notes.txt", "x.log", "1.logs", "07.log"}, want: 8},
		"directories ignored": {files: []string{"1.log"}, dirs: []string{"9.log"}, want: 2},
		"out of range":        {files: []string{"4294967295.log", "99999999999.log", "5.log"}, want: 6},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "app")
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range tc.files {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			got, err := AttemptFromLogDir(dir)
			if err != nil {
				t.Fatalf("AttemptFromLogDir: %v", err)
			}
			if got != tc.want {
				t.Errorf("AttemptFromLogDir(%v) = %d, want %d", tc.files, got, tc.want)
			}
		})
	}
}
