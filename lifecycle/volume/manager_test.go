package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeObjects serves ConfigMaps and Secrets from maps and counts token
// requests.
type fakeObjects struct {
	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	clock      *clocktesting.FakeClock
	tokens     int
	lastReq    *authenticationv1.TokenRequest
	// pvcs by namespace/name and pvs by name; reads counts claim reads.
	pvcs  map[string]*v1.PersistentVolumeClaim
	pvs   map[string]*v1.PersistentVolume
	reads int
}

func (f *fakeObjects) GetPersistentVolumeClaim(_ context.Context, ns, name string) (*v1.PersistentVolumeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if c, ok := f.pvcs[ns+"/"+name]; ok {
		return c.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (f *fakeObjects) GetPersistentVolume(_ context.Context, name string) (*v1.PersistentVolume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pv, ok := f.pvs[name]; ok {
		return pv.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

func (f *fakeObjects) GetConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
}

func (f *fakeObjects) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
}

func (f *fakeObjects) RequestToken(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens++
	f.lastReq = req
	out := req.DeepCopy()
	out.Status.Token = ns + "/" + sa + "/" + strings.Repeat("t", f.tokens)
	exp := int64(3600) // the API's default
	if req.Spec.ExpirationSeconds != nil {
		exp = *req.Spec.ExpirationSeconds
	}
	out.Status.ExpirationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Duration(exp) * time.Second))
	return out, nil
}

// fakeMounter records tmpfs and bind mounts instead of mounting.
type fakeMounter struct {
	mu      sync.Mutex
	mounted map[string]int64
	// binds: mount point → source, and whether read-only.
	binds map[string]fakeBind
}

type fakeBind struct {
	src      string
	readOnly bool
}

func (m *fakeMounter) Bind(src, dir string, readOnly bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.binds == nil {
		m.binds = map[string]fakeBind{}
	}
	m.binds[dir] = fakeBind{src, readOnly}
	m.mounted[dir] = 0
	return nil
}

func (m *fakeMounter) MountTmpfs(dir string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mounted[dir] = size
	return nil
}

func (m *fakeMounter) Unmount(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mounted, dir)
	delete(m.binds, dir)
	return nil
}

func (m *fakeMounter) MountPoints(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for mp := range m.mounted {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, nil
}

func (m *fakeMounter) IsMountPoint(dir string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.mounted[dir]
	return ok, nil
}

type fixture struct {
	m       *Manager
	objects *fakeObjects
	mounter *fakeMounter
	clock   *clocktesting.FakeClock
	root    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := &fixture{
		objects: &fakeObjects{configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}, clock: clk,
			pvcs: map[string]*v1.PersistentVolumeClaim{}, pvs: map[string]*v1.PersistentVolume{}},
		mounter: &fakeMounter{mounted: map[string]int64{}},
		clock:   clk,
		root:    t.TempDir(),
	}
	var err error
	f.m, err = New(Config{RootDir: f.root, Objects: f.objects, Clock: clk, Mounter: f.mounter,
		NodeAllocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}
		}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func ptr[T any](v T) *T { return &v }

func testPod(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1",
			Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"note": `say "hi"`}},
		Spec: v1.PodSpec{Volumes: vols, ServiceAccountName: "sa", Containers: []v1.Container{{
			Name: "c", Resources: v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
			},
		}}},
	}
}

// files reads the visible files of a volume with their modes.
func (f *fixture) files(t *testing.T, plugin, name string) map[string]string {
	t.Helper()
	return readVisible(t, f.m.volumeDir("uid-1", plugin, name))
}

func (f *fixture) mode(t *testing.T, plugin, name, file string) os.FileMode {
	t.Helper()
	info, err := os.Stat(filepath.Join(f.m.volumeDir("uid-1", plugin, name), file))
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func TestProjections(t *testing.T) {
	cm := &v1.ConfigMap{Data: map[string]string{"k1": "v1", "k2": "v2"}, BinaryData: map[string][]byte{"bin": {0, 1}}}
	sec := &v1.Secret{Data: map[string][]byte{"user": []byte("admin"), "pass": []byte("pw")}}
	tests := []struct {
		name      string
		vol       v1.Volume
		plugin    string
		want      map[string]string
		modes     map[string]os.FileMode
		wantErr   string
		tmpfs     bool
		fsGroupTo *int64
	}{
		{
			name: "configMap all keys default mode", plugin: pluginConfigMap,
			vol:   v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
			want:  map[string]string{"k1": "v1", "k2": "v2", "bin": "\x00\x01"},
			modes: map[string]os.FileMode{"k1": 0o644},
		},
		{
			name: "configMap items with paths and modes", plugin: pluginConfigMap,
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, DefaultMode: ptr(int32(0o400)),
				Items: []v1.KeyToPath{{Key: "k1", Path: "path/to/k1"}, {Key: "k2", Path: "k2", Mode: ptr(int32(0o600))}},
			}}},
			want:  map[string]string{"path/to/k1": "v1", "k2": "v2"},
			modes: map[string]os.FileMode{"path/to/k1": 0o400, "k2": 0o600},
		},
		{
			name: "configMap missing key", plugin: pluginConfigMap,
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: []v1.KeyToPath{{Key: "nope", Path: "x"}},
			}}},
			wantErr: `MountVolume.SetUp failed for volume "v" : configmap references non-existent config key: nope`,
		},
		{
			name: "configMap missing", plugin: pluginConfigMap,
			vol:     v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}}}},
			wantErr: `MountVolume.SetUp failed for volume "v" : configmap "gone" not found`,
		},
		{
			name: "optional configMap missing is empty", plugin: pluginConfigMap,
			vol:  v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}}},
			want: map[string]string{},
		},
		{
			name: "secret on tmpfs with fsGroup", plugin: pluginSecret, tmpfs: true, fsGroupTo: ptr(int64(os.Getgid())),
			vol:   v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr(int32(0o400))}}},
			want:  map[string]string{"user": "admin", "pass": "pw"},
			modes: map[string]os.FileMode{"user": 0o440},
		},
		{
			name: "secret missing", plugin: pluginSecret,
			vol:     v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "gone"}}},
			wantErr: `MountVolume.SetUp failed for volume "v" : secret "gone" not found`,
		},
		{
			name: "downwardAPI fields and resources", plugin: pluginDownwardAPI,
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
				{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "annotations", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
				{Path: "label-a", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['a']"}},
				{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
				{Path: "cpu-limit", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu"}},
				{Path: "cpu-request", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "requests.cpu", Divisor: resource.MustParse("1m")}},
				{Path: "mode", Mode: ptr(int32(0o400)), FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
			}}}},
			want: map[string]string{
				"name": "p", "labels": "a=\"1\"\nb=\"2\"", "annotations": `note="say \"hi\""`, "label-a": "1",
				"mem": "64", "cpu-limit": "2", "cpu-request": "250", "mode": "ns",
			},
			modes: map[string]os.FileMode{"name": 0o644, "mode": 0o400},
		},
		{
			name: "projected kube-api-access", plugin: pluginProjected, tmpfs: true,
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr(int32(0o644)), Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: []v1.KeyToPath{{Key: "k1", Path: "ca.crt"}}}},
				{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}},
			}}}},
			want: map[string]string{"token": "ns/sa/t", "ca.crt": "v1", "namespace": "ns"},
		},
		{
			name: "projected clusterTrustBundle unsupported", plugin: pluginProjected,
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "b"}},
			}}}},
			wantErr: "clusterTrustBundle is not supported",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.objects.configMaps["ns/cm"] = cm
			f.objects.secrets["ns/s"] = sec
			pod := testPod(tt.vol)
			if tt.fsGroupTo != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tt.fsGroupTo}
			}
			err := f.m.MountPod(context.Background(), pod)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				if _, err := os.Stat(f.m.volumeDir("uid-1", tt.plugin, "v")); !os.IsNotExist(err) {
					t.Fatalf("volume directory exists after a failed setup: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.files(t, tt.plugin, "v"); !equalMaps(got, tt.want) {
				t.Fatalf("files = %q, want %q", got, tt.want)
			}
			for file, mode := range tt.modes {
				if got := f.mode(t, tt.plugin, "v", file); got != mode {
					t.Errorf("mode of %s = %v, want %v", file, got, mode)
				}
			}
			mounted, _ := f.mounter.IsMountPoint(f.m.volumeDir("uid-1", tt.plugin, "v"))
			if mounted != tt.tmpfs {
				t.Errorf("tmpfs mounted = %v, want %v", mounted, tt.tmpfs)
			}
		})
	}
}

func TestLiveUpdateAndRefreshFailureKeepsFiles(t *testing.T) {
	f := newFixture(t)
	f.objects.configMaps["ns/cm"] = &v1.ConfigMap{Data: map[string]string{"k": "1"}}
	pod := testPod(
		v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
		v1.Volume{Name: "dw", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
	)
	ctx := context.Background()
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.objects.configMaps["ns/cm"] = &v1.ConfigMap{Data: map[string]string{"k": "2", "new": "x"}}
	pod.Labels = map[string]string{"c": "3"}
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := f.files(t, pluginConfigMap, "cm"); !equalMaps(got, map[string]string{"k": "2", "new": "x"}) {
		t.Fatalf("configMap files after update = %v", got)
	}
	if got := f.files(t, pluginDownwardAPI, "dw"); got["labels"] != `c="3"` {
		t.Fatalf("labels after update = %q", got["labels"])
	}
	// The ConfigMap goes away: the volume set up before keeps its files and
	// the pod is not blocked.
	delete(f.objects.configMaps, "ns/cm")
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatalf("refresh failure of a set-up volume blocked the pod: %v", err)
	}
	if got := f.files(t, pluginConfigMap, "cm"); got["k"] != "2" {
		t.Fatalf("files after the object went away = %v", got)
	}
}

func TestTokenRefresh(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.Volume{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "vault", ExpirationSeconds: ptr(int64(600))}},
	}}}})
	ctx := context.Background()
	steps := []struct {
		advance    time.Duration
		wantTokens int
	}{
		{0, 1},
		{time.Minute, 1},      // fresh
		{6 * time.Minute, 1},  // 7 min of 10: below 80%
		{70 * time.Second, 2}, // 8m10s: past 80%, renewed
		{7 * time.Minute, 2},  // 7 min into the new one
		{2 * time.Minute, 3},  // 9 min: renewed
	}
	for i, s := range steps {
		f.clock.Step(s.advance)
		if err := f.m.MountPod(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if f.objects.tokens != s.wantTokens {
			t.Fatalf("step %d: %d token requests, want %d", i, f.objects.tokens, s.wantTokens)
		}
		if got := f.files(t, pluginProjected, "tok")["token"]; got != "ns/sa/"+strings.Repeat("t", s.wantTokens) {
			t.Fatalf("step %d: token file %q", i, got)
		}
	}
	req := f.objects.lastReq
	if len(req.Spec.Audiences) != 1 || req.Spec.Audiences[0] != "vault" || *req.Spec.ExpirationSeconds != 600 ||
		req.Spec.BoundObjectRef == nil || req.Spec.BoundObjectRef.Kind != "Pod" || req.Spec.BoundObjectRef.UID != "uid-1" {
		t.Fatalf("token request %+v", req.Spec)
	}
	// A day-long token is renewed after 24 h at the latest.
	if !needsRefresh(&cachedToken{issued: f.clock.Now(), tr: &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
		ExpirationTimestamp: metav1.NewTime(f.clock.Now().Add(365 * 24 * time.Hour))}}}, f.clock.Now().Add(24*time.Hour)) {
		t.Fatal("a one-year token is not renewed after 24 h")
	}
}

// TestServiceAccountToken: the credential providers' tokens come from
// the same cache as the projected volumes' (the kubelet's one token
// manager): reused while fresh, renewed past 80% of their life, forgotten
// with the pod's volumes; a token not bound to a pod is refused.
func TestServiceAccountToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	req := func() *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"registry"},
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-1"}}}
	}
	get := func() string {
		t.Helper()
		tr, err := f.m.ServiceAccountToken(ctx, "ns", "sa", req())
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	first := get()
	f.clock.Step(40 * time.Minute)
	if got := get(); got != first || f.objects.tokens != 1 {
		t.Errorf("token %q after 40 min of 60, %d requests; want the first, 1", got, f.objects.tokens)
	}
	f.clock.Step(10 * time.Minute)
	if got := get(); got == first || f.objects.tokens != 2 {
		t.Errorf("token %q after 50 min of 60, %d requests; want a new one", got, f.objects.tokens)
	}
	if err := f.m.UnmountPod(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1"}}); err != nil {
		t.Fatal(err)
	}
	get()
	if f.objects.tokens != 3 {
		t.Errorf("%d requests, want a new token once the pod's volumes are gone", f.objects.tokens)
	}
	unbound := req()
	unbound.Spec.BoundObjectRef = nil
	if _, err := f.m.ServiceAccountToken(ctx, "ns", "sa", unbound); err == nil {
		t.Error("a token bound to no pod was requested")
	}
}

func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path    string
		typ     v1.HostPathType
		wantErr string
	}{
		{dir, v1.HostPathDirectory, ""},
		{file, v1.HostPathDirectory, "is not a directory"},
		{filepath.Join(dir, "new/dir"), v1.HostPathDirectoryOrCreate, ""},
		{file, v1.HostPathDirectoryOrCreate, "is not a directory"},
		{file, v1.HostPathFile, ""},
		{dir, v1.HostPathFile, "is not a file"},
		{filepath.Join(dir, "nope"), v1.HostPathFile, "is not a file"},
		{filepath.Join(dir, "sub/new-file"), v1.HostPathFileOrCreate, ""},
		{file, v1.HostPathSocket, "is not a socket file"},
		{file, v1.HostPathCharDev, "is not a character device"},
		{"/dev/null", v1.HostPathCharDev, ""},
		{"/dev/null", v1.HostPathBlockDev, "is not a block device"},
		{filepath.Join(dir, "anything"), v1.HostPathUnset, ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.typ)+" "+tt.path, func(t *testing.T) {
			err := checkHostPath(&v1.HostPathVolumeSource{Path: tt.path, Type: ptr(tt.typ)})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tt.typ == v1.HostPathDirectoryOrCreate || tt.typ == v1.HostPathFileOrCreate {
					if _, err := os.Stat(tt.path); err != nil {
						t.Fatalf("not created: %v", err)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "hostPath type check failed: "+tt.path+" "+tt.wantErr) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestMountsAndSubPaths(t *testing.T) {
	f := newFixture(t)
	f.objects.configMaps["ns/cm"] = &v1.ConfigMap{Data: map[string]string{"k": "1"}}
	outside := t.TempDir()
	pod := testPod(
		v1.Volume{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("1Mi"))}}},
		v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: outside}}},
	)
	ctx := context.Background()
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if size := f.mounter.mounted[f.m.volumeDir("uid-1", pluginEmptyDir, "mem")]; size != 1<<20 {
		t.Fatalf("memory emptyDir tmpfs size %d, want 1Mi", size)
	}
	c := &pod.Spec.Containers[0]
	env := map[string]string{"POD": pod.Name} // resolved by the engine
	c.VolumeMounts = []v1.VolumeMount{
		{Name: "ed", MountPath: "/ed"},
		{Name: "ed", MountPath: "/sub", SubPathExpr: "$(POD)/data"},
		{Name: "cm", MountPath: "/cm", ReadOnly: false},
		{Name: "cm", MountPath: "/k", SubPath: "k"},
		{Name: "host", MountPath: "/host", ReadOnly: true, MountPropagation: ptr(v1.MountPropagationHostToContainer)},
	}
	got, err := f.m.Mounts(pod, c, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	ed := f.m.volumeDir("uid-1", pluginEmptyDir, "ed")
	realCM, _ := filepath.EvalSymlinks(filepath.Join(f.m.volumeDir("uid-1", pluginConfigMap, "cm"), "k"))
	realEd, _ := filepath.EvalSymlinks(ed)
	want := []*runtimeapi.Mount{
		{ContainerPath: "/ed", HostPath: ed, SelinuxRelabel: true},
		{ContainerPath: "/sub", HostPath: filepath.Join(realEd, "p/data"), SelinuxRelabel: true},
		{ContainerPath: "/cm", HostPath: f.m.volumeDir("uid-1", pluginConfigMap, "cm"), Readonly: true, SelinuxRelabel: true},
		{ContainerPath: "/k", HostPath: realCM, Readonly: true, SelinuxRelabel: true},
		{ContainerPath: "/host", HostPath: outside, Readonly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mounts, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].String() != want[i].String() {
			t.Errorf("mount %d = %v, want %v", i, got[i], want[i])
		}
	}
	if _, err := os.Stat(filepath.Join(ed, "p/data")); err != nil {
		t.Fatalf("subPath directory not created: %v", err)
	}

	// A subPath that a symlink leads out of the volume is refused.
	if err := os.Symlink(outside, filepath.Join(ed, "escape")); err != nil {
		t.Fatal(err)
	}
	for name, vm := range map[string]v1.VolumeMount{
		"symlink out":   {Name: "ed", MountPath: "/x", SubPath: "escape"},
		"dot dot":       {Name: "ed", MountPath: "/x", SubPath: "../x"},
		"absolute":      {Name: "ed", MountPath: "/x", SubPath: "/etc"},
		"unknown var":   {Name: "ed", MountPath: "/x", SubPathExpr: "$(NOPE)"},
		"bidirectional": {Name: "ed", MountPath: "/x", MountPropagation: ptr(v1.MountPropagationBidirectional)},
	} {
		t.Run(name, func(t *testing.T) {
			c2 := c.DeepCopy()
			c2.VolumeMounts = []v1.VolumeMount{vm}
			if _, err := f.m.Mounts(pod, c2, env, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestMountsSELinuxRelabel: which mounts ask the runtime for SELinux
// relabelling (the runtime manager keeps the ask only on a host with
// SELinux): every mount of an emptyDir (disk or memory), configMap,
// secret, downwardAPI or projected volume, the kubelet's plugins whose
// GetAttributes() are Managed and SELinuxRelabel; never a hostPath one
// (Managed and SELinuxRelabel false). Read-only, subPath and repeated
// mounts ask too, in every container: the kubelet's makeMounts sets
// SELinuxLabeled on a per-container copy of the volume's VolumeMap
// entry, so it never stops a later mount from asking.
func TestMountsSELinuxRelabel(t *testing.T) {
	f := newFixture(t)
	f.objects.configMaps["ns/cm"] = &v1.ConfigMap{Data: map[string]string{"k": "1"}}
	f.objects.secrets["ns/s"] = &v1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	pod := testPod(
		v1.Volume{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
		v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
		v1.Volume{Name: "dapi", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
		v1.Volume{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}}}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: t.TempDir()}}},
	)
	if err := f.m.MountPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	mount := func(name, path string) v1.VolumeMount { return v1.VolumeMount{Name: name, MountPath: path} }
	first := []v1.VolumeMount{
		mount("ed", "/ed"), mount("mem", "/mem"), mount("cm", "/cm"), mount("s", "/s"),
		mount("dapi", "/dapi"), mount("proj", "/proj"), mount("host", "/host"),
		{Name: "ed", MountPath: "/ed-ro", ReadOnly: true},
		{Name: "ed", MountPath: "/ed-sub", SubPath: "sub"},
		{Name: "host", MountPath: "/host-ro", ReadOnly: true},
	}
	second := []v1.VolumeMount{mount("ed", "/ed"), mount("cm", "/cm"), mount("host", "/host")}
	for _, tc := range []struct {
		name   string
		mounts []v1.VolumeMount
		want   map[string]bool // container path -> asks for relabelling
	}{
		{name: "first container", mounts: first, want: map[string]bool{
			"/ed": true, "/mem": true, "/cm": true, "/s": true, "/dapi": true, "/proj": true, "/host": false,
			"/ed-ro": true, "/ed-sub": true, "/host-ro": false}},
		{name: "second container mounting the same volumes", mounts: second, want: map[string]bool{
			"/ed": true, "/cm": true, "/host": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := pod.Spec.Containers[0].DeepCopy()
			c.VolumeMounts = tc.mounts
			got, err := f.m.Mounts(pod, c, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			relabel := map[string]bool{}
			for _, m := range got {
				relabel[m.ContainerPath] = m.SelinuxRelabel
			}
			if !reflect.DeepEqual(relabel, tc.want) {
				t.Errorf("selinux_relabel by container path %v, want %v", relabel, tc.want)
			}
		})
	}
}

func TestUnmountPodAndOrphans(t *testing.T) {
	f := newFixture(t)
	f.objects.secrets["ns/s"] = &v1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	pod := testPod(
		v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
		v1.Volume{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	)
	ctx := context.Background()
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// A symlink out of the pod directory must not be followed.
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.m.volumeDir("uid-1", pluginEmptyDir, "ed"), "link")); err != nil {
		t.Fatal(err)
	}
	if err := f.m.UnmountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.m.PodDir("uid-1")); !os.IsNotExist(err) {
		t.Fatalf("pod directory left: %v", err)
	}
	if len(f.mounter.mounted) != 0 {
		t.Fatalf("mounts left: %v", f.mounter.mounted)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a file outside the pod was removed: %v", err)
	}

	// Orphans: directories of pods nobody keeps go, with their mounts.
	for _, uid := range []string{"keep-me", "orphan"} {
		p := testPod(v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}})
		p.UID = types.UID(uid)
		if err := f.m.MountPod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.m.CleanupOrphans(ctx, func(uid types.UID) bool { return uid == "keep-me" }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.m.PodDir("orphan")); !os.IsNotExist(err) {
		t.Fatal("orphan directory left")
	}
	if _, err := os.Stat(f.m.PodDir("keep-me")); err != nil {
		t.Fatal("kept pod directory removed")
	}
}

func TestRemoveRefusesWhenAMountStays(t *testing.T) {
	f := newFixture(t)
	f.mounter = nil
	stuck := &stuckMounter{fakeMounter: fakeMounter{mounted: map[string]int64{}}}
	f.m.cfg.Mounter = stuck
	pod := testPod(v1.Volume{Name: "m", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
	if err := f.m.MountPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if err := f.m.UnmountPod(context.Background(), pod); err == nil {
		t.Fatal("pod directory removed while a mount stays below it")
	}
	if _, err := os.Stat(f.m.PodDir("uid-1")); err != nil {
		t.Fatalf("pod directory removed: %v", err)
	}
}

// stuckMounter cannot unmount.
type stuckMounter struct{ fakeMounter }

func (m *stuckMounter) Unmount(string) error { return errors.New("busy") }

func TestEmptyDirModes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		fsGroup *int64
		want    os.FileMode
	}{
		{"no fsGroup", nil, os.ModeDir | 0o777},
		{"fsGroup", ptr(int64(os.Getgid())), os.ModeDir | os.ModeSetgid | 0o777},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			pod := testPod(v1.Volume{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
			pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tt.fsGroup}
			if err := f.m.MountPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			dir := f.m.volumeDir("uid-1", pluginEmptyDir, "ed")
			info, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode() != tt.want {
				t.Fatalf("mode %v, want %v", info.Mode(), tt.want)
			}
			// A container changes the mode: the next sync leaves it.
			if err := os.Chmod(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := f.m.MountPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if info, _ := os.Stat(dir); info.Mode().Perm() != 0o700 {
				t.Fatalf("mode reset to %v by a later sync", info.Mode())
			}
		})
	}
}

func TestVolumePath(t *testing.T) {
	f := newFixture(t)
	pod := testPod(
		v1.Volume{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "hp", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}},
		v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}},
	)
	check := func(when, name, want string, wantOK bool) {
		t.Helper()
		if got, ok := f.m.VolumePath(pod, name); got != want || ok != wantOK {
			t.Errorf("%s: VolumePath(%q) = %q, %v; want %q, %v", when, name, got, ok, want, wantOK)
		}
	}
	dir := f.m.volumeDir("uid-1", pluginEmptyDir, "ed")
	check("before set-up", "ed", dir, false)
	pod.Spec.Volumes = pod.Spec.Volumes[:2] // MountPod refuses nfs
	if err := f.m.MountPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}})
	check("set up", "ed", dir, true)
	check("set up", "hp", "/srv", true)
	check("set up", "nfs", "", false)
	check("set up", "none", "", false)
}

// TestImageVolumes: an image volume (the kubelet's image plugin) sets up
// nothing on the node and leaves nothing for the orphan sweep; its mount
// is the CRI image mount with the spec the runtime manager pulled, the
// subPath (or expanded subPathExpr) as ImageSubPath, read-only whatever
// the volumeMount says and never relabelled (the kubelet's makeMounts).
// A mount without a pulled spec, and an absolute or ".." subPath, are
// refused in the kubelet's words.
func TestImageVolumes(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.Volume{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{
		Reference: "registry.example/tools:1", PullPolicy: v1.PullIfNotPresent}}})
	ctx := context.Background()
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatalf("MountPod: %v", err)
	}
	if _, err := os.Stat(f.m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod directory after MountPod of an image volume only: %v, want none", err)
	}
	if p, ok := f.m.VolumePath(pod, "tools"); p != "" || ok {
		t.Errorf("VolumePath = %q, %v; an image volume has no path on the node", p, ok)
	}

	spec := &runtimeapi.ImageSpec{Image: "sha256:abc", UserSpecifiedImage: "registry.example/tools:1"}
	images := map[string]*runtimeapi.ImageSpec{"tools": spec}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{
		{Name: "tools", MountPath: "/vol"},
		{Name: "tools", MountPath: "/bin-ro", SubPath: "bin", ReadOnly: true},
		{Name: "tools", MountPath: "/by-pod", SubPathExpr: "$(DIR)/x", MountPropagation: ptr(v1.MountPropagationHostToContainer)},
	}
	got, err := f.m.Mounts(pod, c, map[string]string{"DIR": "etc"}, images)
	if err != nil {
		t.Fatalf("Mounts: %v", err)
	}
	want := []*runtimeapi.Mount{
		{ContainerPath: "/vol", Image: spec, Readonly: true},
		{ContainerPath: "/bin-ro", Image: spec, ImageSubPath: "bin", Readonly: true},
		{ContainerPath: "/by-pod", Image: spec, ImageSubPath: "etc/x", Readonly: true,
			Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mounts, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].String() != want[i].String() {
			t.Errorf("mount %d = %v, want %v", i, got[i], want[i])
		}
	}

	for name, tc := range map[string]struct {
		vm      v1.VolumeMount
		images  map[string]*runtimeapi.ImageSpec
		wantErr string
	}{
		"no pulled image": {vm: v1.VolumeMount{Name: "tools", MountPath: "/x"}, images: nil,
			wantErr: `the image of image volume "tools" is not on the node`},
		"absolute subPath": {vm: v1.VolumeMount{Name: "tools", MountPath: "/x", SubPath: "/etc"}, images: images,
			wantErr: "error SubPath `/etc` must not be an absolute path"},
		"dot dot": {vm: v1.VolumeMount{Name: "tools", MountPath: "/x", SubPath: "a/../../b"}, images: images,
			wantErr: "unable to provision SubPath `a/../../b`: must not contain '..'"},
		"subPathExpr with an unknown variable": {vm: v1.VolumeMount{Name: "tools", MountPath: "/x", SubPathExpr: "$(NOPE)"}, images: images,
			wantErr: "references an unknown variable"},
	} {
		t.Run(name, func(t *testing.T) {
			c2 := c.DeepCopy()
			c2.VolumeMounts = []v1.VolumeMount{tc.vm}
			if _, err := f.m.Mounts(pod, c2, nil, tc.images); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Mounts: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}

	// Nothing to remove: UnmountPod and the orphan sweep find no directory.
	if err := f.m.UnmountPod(ctx, pod); err != nil {
		t.Errorf("UnmountPod: %v", err)
	}
	if err := f.m.CleanupOrphans(ctx, func(types.UID) bool { return false }); err != nil {
		t.Errorf("CleanupOrphans: %v", err)
	}
}
