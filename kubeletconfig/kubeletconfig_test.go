package kubeletconfig

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoad(t *testing.T) {
	tests := map[string]struct {
		files   map[string]string
		config  string // relative to the temporary directory; "" none
		dropins string // likewise
		wantErr string
		check   func(t *testing.T, c *KC, dir string)
	}{
		"strict: an unknown field is an error": {
			files:   map[string]string{"k.yaml": header + "maxPod: 10\n"},
			config:  "k.yaml",
			wantErr: `unknown field "maxPod"`,
		},
		"strict: a duplicate field is an error": {
			files:   map[string]string{"k.yaml": header + "maxPods: 10\nmaxPods: 11\n"},
			config:  "k.yaml",
			wantErr: "maxPods",
		},
		"another kind is refused": {
			files:   map[string]string{"k.yaml": "apiVersion: v1\nkind: Pod\n"},
			config:  "k.yaml",
			wantErr: "no kind",
		},
		"an empty file is an error": {
			files:   map[string]string{"k.yaml": ""},
			config:  "k.yaml",
			wantErr: "was empty",
		},
		"relative paths are resolved against the file's directory": {
			files:  map[string]string{"etc/k.yaml": header + "staticPodPath: manifests\ntlsCertFile: /abs/cert\nresolvConf: ''\n"},
			config: "etc/k.yaml",
			check: func(t *testing.T, c *KC, dir string) {
				if want := filepath.Join(dir, "etc", "manifests"); c.StaticPodPath != want {
					t.Errorf("staticPodPath = %q, want %q", c.StaticPodPath, want)
				}
				if c.TLSCertFile != "/abs/cert" || c.ResolverConfig == nil || *c.ResolverConfig != "" {
					t.Errorf("tlsCertFile %q, resolvConf %v: absolute and empty paths must stay", c.TLSCertFile, c.ResolverConfig)
				}
			},
		},
		"no evictionHard: the kubelet's defaults; mergeDefaultEvictionSettings fills the rest": {
			files:  map[string]string{"a.yaml": header, "b.yaml": header + "mergeDefaultEvictionSettings: true\nevictionHard: {memory.available: 1Gi}\n"},
			config: "a.yaml",
			check: func(t *testing.T, c *KC, dir string) {
				if diff := cmp.Diff(defaultEvictionHard(), c.EvictionHard); diff != "" {
					t.Errorf("evictionHard (-want +got):\n%s", diff)
				}
				c2, err := Load(filepath.Join(dir, "b.yaml"), "")
				if err != nil {
					t.Fatal(err)
				}
				want := defaultEvictionHard()
				want["memory.available"] = "1Gi"
				if diff := cmp.Diff(want, c2.EvictionHard); diff != "" {
					t.Errorf("merged evictionHard (-want +got):\n%s", diff)
				}
			},
		},
		"drop-ins merge in lexical order, maps key by key, lists replaced, only *.conf": {
			files: map[string]string{
				"k.yaml":           header + "maxPods: 10\nsystemReserved: {cpu: 100m, memory: 1Gi}\nclusterDNS: [10.0.0.10, 10.0.0.11]\n",
				"d/20-b.conf":      header + "maxPods: 30\nclusterDNS: [10.0.0.12]\n",
				"d/10-a.conf":      header + "maxPods: 20\nsystemReserved: {memory: 2Gi}\nclusterDomain: a.local\n",
				"d/30-c.yaml":      header + "maxPods: 99\n",
				"d/sub/40-d.conf":  header + "clusterDomain: d.local\n",
				"d/05-first.conf":  header + "syncFrequency: 5s\n",
				"d/99-strict.txt":  "not even yaml: [",
				"d/sub/README.md":  "ignored",
				"d/sub/50-e.conf~": "ignored: backup",
			},
			config:  "k.yaml",
			dropins: "d",
			check: func(t *testing.T, c *KC, dir string) {
				if c.MaxPods != 30 || c.ClusterDomain != "d.local" || c.SyncFrequency.Duration != 5*time.Second {
					t.Errorf("maxPods %d clusterDomain %q syncFrequency %s: want 30, d.local, 5s", c.MaxPods, c.ClusterDomain, c.SyncFrequency.Duration)
				}
				if diff := cmp.Diff(map[string]string{"cpu": "100m", "memory": "2Gi"}, c.SystemReserved); diff != "" {
					t.Errorf("systemReserved (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"10.0.0.12"}, c.ClusterDNS); diff != "" {
					t.Errorf("clusterDNS (-want +got):\n%s", diff)
				}
			},
		},
		"drop-ins alone": {
			files:   map[string]string{"d/10.conf": header + "maxPods: 7\n"},
			dropins: "d",
			check: func(t *testing.T, c *KC, dir string) {
				if c.MaxPods != 7 {
					t.Errorf("maxPods = %d, want 7", c.MaxPods)
				}
			},
		},
		"a drop-in is strict too": {
			files:   map[string]string{"k.yaml": header, "d/10.conf": header + "maxpods: 7\n"},
			config:  "k.yaml",
			dropins: "d",
			wantErr: `unknown field "maxpods"`,
		},
		"a drop-in without kind is refused": {
			files:   map[string]string{"d/10.conf": "maxPods: 7\n"},
			dropins: "d",
			wantErr: "10.conf",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			var cfg, dropins string
			if tt.config != "" {
				cfg = filepath.Join(dir, tt.config)
			}
			if tt.dropins != "" {
				dropins = filepath.Join(dir, tt.dropins)
			}
			c, err := Load(cfg, dropins)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c, dir)
		})
	}
}

// testFlags is a flag set with a few of crivk's flags, as cmd/crivk
// registers them.
type testFlags struct {
	fs                         *flag.FlagSet
	files                      *Files
	maxPods                    int64
	qps                        float64
	sync                       time.Duration
	evictionHard, taints, dns  string
	pulls                      int
	webhook, anonymous, perQOS bool
	memcg, failCgroupV1        bool
	manifests, bootstrap       string
	podMaxPids                 int64
	readOnlyPort               int
	logWorkers                 int
	logInterval                time.Duration
}

func newTestFlags() *testFlags {
	f := &testFlags{fs: flag.NewFlagSet("crivk", flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard)
	f.fs.Int64Var(&f.maxPods, "max-pods", 110, "")
	f.fs.Float64Var(&f.qps, "kube-api-qps", 50, "")
	f.fs.DurationVar(&f.sync, "sync-interval", 10*time.Second, "")
	f.fs.StringVar(&f.evictionHard, "eviction-hard", "memory.available<100Mi", "")
	f.fs.StringVar(&f.taints, "register-with-taints", "", "")
	f.fs.StringVar(&f.dns, "cluster-dns", "", "")
	f.fs.IntVar(&f.pulls, "max-parallel-image-pulls", 1, "")
	f.fs.BoolVar(&f.webhook, "authentication-token-webhook", true, "")
	f.fs.BoolVar(&f.anonymous, "anonymous-auth", false, "")
	f.fs.BoolVar(&f.perQOS, "cgroups-per-qos", true, "")
	f.fs.BoolVar(&f.memcg, "kernel-memcg-notification", false, "")
	f.fs.BoolVar(&f.failCgroupV1, "fail-cgroupv1", true, "")
	f.fs.StringVar(&f.manifests, "pod-manifest-path", "", "")
	f.fs.StringVar(&f.bootstrap, "bootstrap-kubeconfig", "", "")
	f.fs.Int64Var(&f.podMaxPids, "pod-max-pids", -1, "")
	f.fs.IntVar(&f.readOnlyPort, "read-only-port", 0, "")
	f.fs.IntVar(&f.logWorkers, "container-log-max-workers", 1, "")
	f.fs.DurationVar(&f.logInterval, "container-log-monitor-interval", 10*time.Second, "")
	f.files = AddFlags(f.fs)
	return f
}

func TestApply(t *testing.T) {
	tests := map[string]struct {
		file    string
		args    []string
		wantErr string
		check   func(t *testing.T, f *testFlags)
	}{
		"fields set their flags": {
			file: "maxPods: 20\nkubeAPIQPS: 7\nsyncFrequency: 1m\nclusterDNS: [10.0.0.10, 10.0.0.11]\n" +
				"registerWithTaints: [{key: a, value: b, effect: NoSchedule}, {key: c, effect: NoExecute}]\n" +
				"authentication: {webhook: {enabled: false}, anonymous: {enabled: true}}\ncgroupsPerQOS: false\n" +
				"evictionHard: {memory.available: 1Gi, nodefs.available: 5%}\nserializeImagePulls: false\nstaticPodPath: /etc/m\n",
			check: func(t *testing.T, f *testFlags) {
				if f.maxPods != 20 || f.qps != 7 || f.sync != time.Minute || f.dns != "10.0.0.10,10.0.0.11" ||
					f.taints != "a=b:NoSchedule,c:NoExecute" || f.webhook || !f.anonymous || f.perQOS ||
					f.evictionHard != "memory.available<1Gi,nodefs.available<5%" || f.pulls != 0 || f.manifests != "/etc/m" {
					t.Errorf("flags after Apply: %+v", *f)
				}
			},
		},
		"kernelMemcgNotification sets --kernel-memcg-notification": {
			file: "kernelMemcgNotification: true\n",
			check: func(t *testing.T, f *testFlags) {
				if !f.memcg {
					t.Errorf("kernel-memcg-notification false after kernelMemcgNotification: true")
				}
			},
		},
		"kernelMemcgNotification false (the default) is accepted": {
			file: "kernelMemcgNotification: false\n",
			check: func(t *testing.T, f *testFlags) {
				if f.memcg {
					t.Errorf("kernel-memcg-notification true after kernelMemcgNotification: false")
				}
			},
		},
		"podPidsLimit sets --pod-max-pids": {
			file: "podPidsLimit: 1024\n",
			check: func(t *testing.T, f *testFlags) {
				if f.podMaxPids != 1024 {
					t.Errorf("pod-max-pids %d after podPidsLimit: 1024", f.podMaxPids)
				}
			},
		},
		"podPidsLimit -1 (the kubelet's default) is accepted": {
			file: "podPidsLimit: -1\n",
			check: func(t *testing.T, f *testFlags) {
				if f.podMaxPids != -1 {
					t.Errorf("pod-max-pids %d after podPidsLimit: -1", f.podMaxPids)
				}
			},
		},
		"--pod-max-pids on the command line wins over podPidsLimit": {
			file: "podPidsLimit: 1024\n",
			args: []string{"--pod-max-pids=64"},
			check: func(t *testing.T, f *testFlags) {
				if f.podMaxPids != 64 {
					t.Errorf("pod-max-pids %d, want the command line's 64 over the file's 1024", f.podMaxPids)
				}
			},
		},
		"flags given on the command line win": {
			file: "maxPods: 20\nsyncFrequency: 1m\n",
			args: []string{"--max-pods=30"},
			check: func(t *testing.T, f *testFlags) {
				if f.maxPods != 30 || f.sync != time.Minute {
					t.Errorf("max-pods %d sync-interval %s, want 30 (command line) and 1m (file)", f.maxPods, f.sync)
				}
			},
		},
		"omitted fields leave crivk's defaults": {
			file: "maxPods: 20\n",
			check: func(t *testing.T, f *testFlags) {
				if f.sync != 10*time.Second || f.qps != 50 || f.pulls != 1 {
					t.Errorf("sync-interval %s kube-api-qps %v pulls %d: want crivk's defaults", f.sync, f.qps, f.pulls)
				}
			},
		},
		"an unsupported field is refused by name": {
			file:    "maxPods: 20\ncpuManagerPolicy: static\n",
			wantErr: "KubeletConfiguration field cpuManagerPolicy is not supported by crivk",
		},
		// MemoryQoS in v1.37 (#140007, #137584): no memoryThrottlingFactor
		// by default, memoryReservationPolicy None; crivk writes neither
		// memory.high nor memory.min, so it takes only those defaults.
		"memoryReservationPolicy None, the v1.37 default": {
			file: "memoryReservationPolicy: None\n",
		},
		"memoryReservationPolicy TieredReservation is refused": {
			file:    "memoryReservationPolicy: TieredReservation\n",
			wantErr: "KubeletConfiguration field memoryReservationPolicy is not supported by crivk",
		},
		"memoryThrottlingFactor 0.9, no longer the default, is refused": {
			file:    "memoryThrottlingFactor: 0.9\n",
			wantErr: "KubeletConfiguration field memoryThrottlingFactor is not supported by crivk",
		},
		"a nested unsupported field is refused by its path": {
			file:    "authentication: {webhook: {cacheTTL: 10s}}\n",
			wantErr: "KubeletConfiguration field authentication.webhook.cacheTTL is not supported by crivk",
		},
		"unsupported fields at the kubelet's defaults are not errors": {
			file: "cgroupDriver: cgroupfs\ncpuManagerPolicy: none\nenableServer: true\nauthentication: {webhook: {cacheTTL: 2m}}\n" +
				"healthzPort: 10248\nlogging: {format: text}\nfileCheckFrequency: 20s\nreadOnlyPort: 0\nfailSwapOn: false\nfailCgroupV1: false\n",
		},
		"a field whose flag this crivk lacks is refused unless default": {
			file:    "imageGCHighThresholdPercent: 90\n",
			wantErr: "KubeletConfiguration field imageGCHighThresholdPercent is not supported by crivk (this crivk has no --image-gc-high-threshold flag)",
		},
		"readOnlyPort sets --read-only-port": {
			file: "readOnlyPort: 10255\n",
			check: func(t *testing.T, f *testFlags) {
				if f.readOnlyPort != 10255 {
					t.Errorf("--read-only-port %d, want 10255", f.readOnlyPort)
				}
			},
		},
		"containerLogMaxWorkers and containerLogMonitorInterval set their flags": {
			file: "containerLogMaxWorkers: 2\ncontainerLogMonitorInterval: 3s\n",
			check: func(t *testing.T, f *testFlags) {
				if f.logWorkers != 2 || f.logInterval != 3*time.Second {
					t.Errorf("--container-log-max-workers %d --container-log-monitor-interval %s, want 2 and 3s", f.logWorkers, f.logInterval)
				}
			},
		},
		"--container-log-max-workers and --container-log-monitor-interval win over the file": {
			file: "containerLogMaxWorkers: 2\ncontainerLogMonitorInterval: 3s\n",
			args: []string{"--container-log-max-workers=4", "--container-log-monitor-interval=1m"},
			check: func(t *testing.T, f *testFlags) {
				if f.logWorkers != 4 || f.logInterval != time.Minute {
					t.Errorf("--container-log-max-workers %d --container-log-monitor-interval %s, want the command line's 4 and 1m", f.logWorkers, f.logInterval)
				}
			},
		},
		"containerLogMaxWorkers 0 reaches the flag, whose validation refuses it": {
			file: "containerLogMaxWorkers: 0\ncontainerLogMonitorInterval: 0s\n",
			check: func(t *testing.T, f *testFlags) {
				if f.logWorkers != 0 || f.logInterval != 0 {
					t.Errorf("--container-log-max-workers %d --container-log-monitor-interval %s, want the file's 0 and 0s", f.logWorkers, f.logInterval)
				}
			},
		},
		"the systemd cgroup driver is refused": {
			file:    "cgroupDriver: systemd\n",
			wantErr: "field cgroupDriver is not supported by crivk: crivk uses the cgroupfs driver only",
		},
		"serializeImagePulls with maxParallelImagePulls above 1 is refused": {
			file:    "serializeImagePulls: true\nmaxParallelImagePulls: 3\n",
			wantErr: "needs serializeImagePulls false",
		},
		"maxParallelImagePulls": {
			file: "serializeImagePulls: false\nmaxParallelImagePulls: 3\n",
			check: func(t *testing.T, f *testFlags) {
				if f.pulls != 3 {
					t.Errorf("max-parallel-image-pulls = %d, want 3", f.pulls)
				}
			},
		},
		"a mapped field whose flag is absent names the flag": {
			file:    "syncFrequency: 1m\nmaxPods: 20\nkubeAPIQPS: 5\ncgroupsPerQOS: true\nauthorization: {mode: AlwaysAllow}\n",
			wantErr: "KubeletConfiguration field authorization.mode is not supported by crivk (this crivk has no --authorization-mode flag)",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"k.yaml": header + tt.file})
			f := newTestFlags()
			if err := f.fs.Parse(append([]string{"--config", filepath.Join(dir, "k.yaml")}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			err := f.files.Apply()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Apply error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func TestApplyWithoutFilesDoesNothing(t *testing.T) {
	f := newTestFlags()
	if err := f.fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := f.files.Apply(); err != nil {
		t.Fatal(err)
	}
	if f.maxPods != 110 || f.evictionHard != "memory.available<100Mi" {
		t.Errorf("flags changed without a file: %+v", *f)
	}
}

// TestEffective: /configz's view is the flags' final values in the
// kubelet's field names, with crivk's fixed behaviour.
func TestEffective(t *testing.T) {
	dir := writeFiles(t, map[string]string{"k.yaml": header + "maxPods: 20\nfailSwapOn: true\nregisterWithTaints: [{key: a, value: b, effect: NoSchedule}]\n"})
	f := newTestFlags()
	if err := f.fs.Parse([]string{"--config", filepath.Join(dir, "k.yaml"), "--sync-interval=3s", "--kube-api-qps=12.5", "--bootstrap-kubeconfig=/b"}); err != nil {
		t.Fatal(err)
	}
	if err := f.files.Apply(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(f.files.Effective())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"maxPods":             float64(20),
		"podPidsLimit":        float64(-1),
		"syncFrequency":       "3s",
		"kubeAPIQPS":          float64(12),
		"cgroupDriver":        "cgroupfs",
		"failSwapOn":          false, // accepted, reported as what crivk does
		"failCgroupV1":        true,  // the flag's default, the kubelet's
		"rotateCertificates":  true,
		"serializeImagePulls": true,
		"staticPodPath":       nil,
		"registerWithTaints":  []any{map[string]any{"key": "a", "value": "b", "effect": "NoSchedule"}},
		"evictionHard":        map[string]any{"imagefs.available": "15%", "imagefs.inodesFree": "5%", "memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
	}
	for k, w := range want {
		if diff := cmp.Diff(w, got[k]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
}

// TestMarshalEffectiveRoundTrip: the effective configuration, marshalled
// (crivk config check prints it), is a file crivk loads and applies to the
// same effective configuration.
func TestMarshalEffectiveRoundTrip(t *testing.T) {
	dir := writeFiles(t, map[string]string{"k.yaml": header + "maxPods: 20\nfailSwapOn: true\nsyncFrequency: 3s\nregisterWithTaints: [{key: a, value: b, effect: NoSchedule}]\n"})
	effective := func(args ...string) []byte {
		t.Helper()
		f := newTestFlags()
		if err := f.fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := f.files.Apply(); err != nil {
			t.Fatal(err)
		}
		b, err := Marshal(f.files.Effective())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := effective("--config", filepath.Join(dir, "k.yaml"), "--kube-api-qps=12")
	if !strings.HasPrefix(string(first), "apiVersion: kubelet.config.k8s.io/v1beta1\n") || !strings.Contains(string(first), "\nkind: KubeletConfiguration\n") || !strings.Contains(string(first), "\nmaxPods: 20\n") {
		t.Fatalf("Marshal:\n%s", first)
	}
	again := filepath.Join(dir, "effective.yaml")
	if err := os.WriteFile(again, first, 0o644); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(first), string(effective("--config", again))); diff != "" {
		t.Errorf("the effective configuration loaded again (-first +again):\n%s", diff)
	}
}

// throughKubeletInternal does to c what the node e2e suite does to
// /configz before writing it back as --config (test/e2e_node/kubeletconfig:
// decodeConfigz converts the v1beta1 configuration to the kubelet's
// internal type, WriteKubeletConfigFile converts it back): the internal type
// holds most pointer fields of v1beta1 as plain values, so a pointer field
// left out (nil) comes back set, to its type's zero value. internalPointers
// are the v1beta1 pointer fields whose internal counterpart is a pointer too
// (pkg/kubelet/apis/config/types.go, v1.35.4): those stay nil.
func throughKubeletInternal(c *KC) {
	internalPointers := map[string]bool{
		"singleProcessOOMKill": true, "maxParallelImagePulls": true, "memoryThrottlingFactor": true,
		"tracing": true, "userNamespaces": true, "crashLoopBackOff.maxContainerRestartPeriod": true,
	}
	walk(reflect.ValueOf(c).Elem(), reflect.ValueOf(kubeletDefaults()), "", func(path string, v, _ reflect.Value) {
		if v.Kind() == reflect.Pointer && v.IsNil() && !internalPointers[path] {
			v.Set(reflect.New(v.Type().Elem()))
		}
	})
}

// writtenBack is the node e2e suite's round trip (updateKubeletConfig):
// f's effective configuration (/configz, after f.files.Apply) taken
// through the kubelet's internal type, changed by change, written to
// dir/kubelet-config and loaded by a new flag set (flags adds flags to it
// first, if not nil), parsed with --config and then args. It returns that
// flag set, the file written, and the new set's Apply error.
func writtenBack(t *testing.T, f *testFlags, dir string, change func(*KC), flags func(*testFlags), args ...string) (*testFlags, []byte, error) {
	t.Helper()
	if err := f.files.Apply(); err != nil {
		t.Fatal(err)
	}
	c := f.files.Effective()
	throughKubeletInternal(c)
	change(c)
	b, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	written := filepath.Join(dir, "kubelet-config")
	if err := os.WriteFile(written, b, 0o644); err != nil {
		t.Fatal(err)
	}
	g := newTestFlags()
	if flags != nil {
		flags(g)
	}
	if err := g.fs.Parse(append([]string{"--config", written}, args...)); err != nil {
		t.Fatal(err)
	}
	return g, b, g.files.Apply()
}

// TestEffectiveThroughKubeletInternal: the effective configuration
// (/configz), taken through the kubelet's internal type and changed as the
// node e2e suite does (updateKubeletConfig), is a file crivk loads, with the
// change; as the kubelet loads its own /configz written back so.
func TestEffectiveThroughKubeletInternal(t *testing.T) {
	dir := writeFiles(t, map[string]string{"k.yaml": header + "maxPods: 20\nfailSwapOn: true\nevictionHard: {memory.available: 250Mi}\n"})
	f := newTestFlags()
	if err := f.fs.Parse([]string{"--config", filepath.Join(dir, "k.yaml"), "--bootstrap-kubeconfig=/b"}); err != nil {
		t.Fatal(err)
	}
	g, b, err := writtenBack(t, f, dir, func(c *KC) { c.EvictionHard = map[string]string{"memory.available": "1Gi"} }, nil, "--bootstrap-kubeconfig=/b")
	if err != nil {
		t.Fatalf("the effective configuration through the kubelet's internal type:\n%s\nApply: %v", b, err)
	}
	if g.maxPods != 20 || g.evictionHard != "memory.available<1Gi" {
		t.Errorf("flags after Apply: maxPods %d, evictionHard %q; want 20, memory.available<1Gi", g.maxPods, g.evictionHard)
	}
}

// TestEffectiveLogRotation: /configz reports the effective
// containerLogMaxWorkers and containerLogMonitorInterval (the flags' final
// values, the kubelet's defaults when nothing sets them), and the node e2e
// suite's ContainerLogRotationWithMultipleWorkers change (2 workers, every
// 3s, written over /configz taken through the kubelet's internal type)
// loads and reaches the flags.
func TestEffectiveLogRotation(t *testing.T) {
	effective := func(t *testing.T, f *testFlags) map[string]any {
		t.Helper()
		b, err := json.Marshal(f.files.Effective())
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for name, tc := range map[string]struct {
		file                    string
		args                    []string
		wantWorkers, wantPeriod any
	}{
		"the kubelet's defaults":     {file: "maxPods: 20\n", wantWorkers: float64(1), wantPeriod: "10s"},
		"from the file":              {file: "containerLogMaxWorkers: 2\ncontainerLogMonitorInterval: 3s\n", wantWorkers: float64(2), wantPeriod: "3s"},
		"the command line wins":      {file: "containerLogMaxWorkers: 2\ncontainerLogMonitorInterval: 3s\n", args: []string{"--container-log-max-workers=5", "--container-log-monitor-interval=30s"}, wantWorkers: float64(5), wantPeriod: "30s"},
		"from the command line only": {file: "maxPods: 20\n", args: []string{"--container-log-max-workers=3", "--container-log-monitor-interval=1m30s"}, wantWorkers: float64(3), wantPeriod: "1m30s"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"k.yaml": header + tc.file})
			f := newTestFlags()
			if err := f.fs.Parse(append([]string{"--config", filepath.Join(dir, "k.yaml")}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if err := f.files.Apply(); err != nil {
				t.Fatal(err)
			}
			got := effective(t, f)
			if got["containerLogMaxWorkers"] != tc.wantWorkers || got["containerLogMonitorInterval"] != tc.wantPeriod {
				t.Errorf("containerLogMaxWorkers %v containerLogMonitorInterval %v, want %v and %v",
					got["containerLogMaxWorkers"], got["containerLogMonitorInterval"], tc.wantWorkers, tc.wantPeriod)
			}
		})
	}
	t.Run("the node e2e suite's change through the kubelet's internal type", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"k.yaml": header + "maxPods: 20\n"})
		f := newTestFlags()
		if err := f.fs.Parse([]string{"--config", filepath.Join(dir, "k.yaml")}); err != nil {
			t.Fatal(err)
		}
		g, b, err := writtenBack(t, f, dir, func(c *KC) {
			// test/e2e_node/container_log_rotation_test.go, v1.35.4.
			c.ContainerLogMaxFiles = ptr.To[int32](3)
			c.ContainerLogMaxSize = "40Ki"
			c.ContainerLogMaxWorkers = ptr.To[int32](2)
			c.ContainerLogMonitorInterval = &metav1.Duration{Duration: 3 * time.Second}
		}, func(g *testFlags) {
			g.fs.String("container-log-max-size", "10Mi", "")
			g.fs.Int("container-log-max-files", 5, "")
		})
		if err != nil {
			t.Fatalf("the suite's configuration:\n%s\nApply: %v", b, err)
		}
		if g.logWorkers != 2 || g.logInterval != 3*time.Second {
			t.Errorf("--container-log-max-workers %d --container-log-monitor-interval %s, want 2 and 3s", g.logWorkers, g.logInterval)
		}
		got := effective(t, g)
		if got["containerLogMaxWorkers"] != float64(2) || got["containerLogMonitorInterval"] != "3s" ||
			got["containerLogMaxSize"] != "40Ki" || got["containerLogMaxFiles"] != float64(3) {
			t.Errorf("effective log rotation %v %v %v %v, want 2, 3s, 40Ki, 3", got["containerLogMaxWorkers"],
				got["containerLogMonitorInterval"], got["containerLogMaxSize"], got["containerLogMaxFiles"])
		}
	})
}

// TestImagePullCredentialsVerification: imagePullCredentialsVerificationPolicy
// and preloadedImagesVerificationAllowlist set their flags, are validated
// with the kubelet's messages (the flags too, without a file), and
// /configz shows them (the default policy when nothing sets it).
func TestImagePullCredentialsVerification(t *testing.T) {
	tests := map[string]struct {
		file, flag    string
		wantErr       string
		wantPolicy    string
		wantAllowlist []string
	}{
		"default": {wantPolicy: "NeverVerifyPreloadedImages"},
		"the file": {file: "imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [registry.example/team/app, quay.io/*]\n",
			wantPolicy: "NeverVerifyAllowlistedImages", wantAllowlist: []string{"registry.example/team/app", "quay.io/*"}},
		"the flag wins": {file: "imagePullCredentialsVerificationPolicy: NeverVerify\n", flag: "--image-pull-credentials-verification-policy=AlwaysVerify",
			wantPolicy: "AlwaysVerify"},
		"unknown policy": {file: "imagePullCredentialsVerificationPolicy: Sometimes\n",
			wantErr: `invalid configuration: option "Sometimes" specified for imagePullCredentialsVerificationPolicy. Valid options are "NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages" or "AlwaysVerify"`},
		"unknown policy, flag only": {flag: "--image-pull-credentials-verification-policy=sometimes", wantErr: `option "sometimes" specified for imagePullCredentialsVerificationPolicy`},
		"allowlist without its policy": {file: "preloadedImagesVerificationAllowlist: [quay.io/*]\n",
			wantErr: "invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\""},
		"allowlist entry with a tag": {file: "imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [docker.io/library/busybox:1.36]\n",
			wantErr: "invalid image pattern in `preloadedImagesVerificationAllowlist`: neither tag nor digest is accepted in an image reference"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var args []string
			if tt.file != "" {
				dir := writeFiles(t, map[string]string{"k.yaml": header + tt.file})
				args = append(args, "--config", filepath.Join(dir, "k.yaml"))
			}
			if tt.flag != "" {
				args = append(args, tt.flag)
			}
			f := newTestFlags()
			if err := f.fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := f.files.Apply()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Apply error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.files.ImagePullCredentialsVerificationPolicy != tt.wantPolicy || !slices.Equal(f.files.PreloadedImagesVerificationAllowlist(), tt.wantAllowlist) {
				t.Errorf("flags: %q %q, want %q %q", f.files.ImagePullCredentialsVerificationPolicy, f.files.PreloadedImagesVerificationAllowlist(), tt.wantPolicy, tt.wantAllowlist)
			}
			c := f.files.Effective()
			if string(c.ImagePullCredentialsVerificationPolicy) != tt.wantPolicy || !slices.Equal(c.PreloadedImagesVerificationAllowlist, tt.wantAllowlist) {
				t.Errorf("/configz: %q %q, want %q %q", c.ImagePullCredentialsVerificationPolicy, c.PreloadedImagesVerificationAllowlist, tt.wantPolicy, tt.wantAllowlist)
			}
		})
	}
}
