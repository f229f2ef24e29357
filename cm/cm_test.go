package cm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	"github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func init() {
	// The library emulates cgroupfs writes on a plain directory tree.
	cgroups.TestMode = true
}

func pod(uid string, ctrs ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "ns"}}
	for i, r := range ctrs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return p
}

var (
	guaranteed = pod("g", v1.ResourceRequirements{Requests: testutil.Resources("500m", "64Mi"), Limits: testutil.Resources("500m", "64Mi")},
		v1.ResourceRequirements{Requests: testutil.Resources("250m", "32Mi"), Limits: testutil.Resources("250m", "32Mi")})
	burstable = pod("b", v1.ResourceRequirements{Requests: testutil.Resources("100m", "16Mi"), Limits: testutil.Resources("200m", "128Mi")},
		v1.ResourceRequirements{Requests: testutil.Resources("300m", "")})
	burstableAllLimits = pod("bl", v1.ResourceRequirements{Requests: testutil.Resources("100m", ""), Limits: testutil.Resources("1", "1Gi")})
	besteffort         = pod("be", v1.ResourceRequirements{})
)

// read returns a cgroup file's content, "" when it does not exist.
func read(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func v1Tree(t *testing.T) (map[string]string, *Manager) {
	t.Helper()
	base := t.TempDir()
	mounts := map[string]string{}
	for _, c := range []string{"cpu", "memory", "pids"} {
		mounts[c] = filepath.Join(base, c)
	}
	m, err := New(Config{Root: "/crivk", PodsCPUMilli: 2000, PodsMemory: 8 << 30, Host: NewHost(HostConfig{V1Mounts: mounts})})
	if err != nil {
		t.Fatal(err)
	}
	return mounts, m
}

// TestV1Values creates the tree on a temporary cgroup v1 layout and reads
// back each class's values, as the kubelet sets them.
func TestV1Values(t *testing.T) {
	mounts, m := v1Tree(t)
	if m.Version() != 1 {
		t.Fatalf("version %d", m.Version())
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	cpu, mem := mounts["cpu"], mounts["memory"]
	for _, p := range []*v1.Pod{guaranteed, burstable, burstableAllLimits, besteffort} {
		if err := m.EnsurePod(p); err != nil {
			t.Fatalf("EnsurePod %s: %v", p.Name, err)
		}
	}
	cases := []struct {
		dir, file, want string
	}{
		{cpu + "/crivk/kubepods", "cpu.shares", "2048"},
		{mem + "/crivk/kubepods", "memory.limit_in_bytes", "8589934592"},
		{cpu + "/crivk/kubepods/besteffort", "cpu.shares", "2"},
		// 100m+300m and 100m of the two Burstable pods.
		{cpu + "/crivk/kubepods/burstable", "cpu.shares", "512"},
		// Guaranteed: shares, quota and memory from the sums (750m, 96Mi).
		{cpu + "/crivk/kubepods/podg", "cpu.shares", "768"},
		{cpu + "/crivk/kubepods/podg", "cpu.cfs_quota_us", "75000"},
		{cpu + "/crivk/kubepods/podg", "cpu.cfs_period_us", "100000"},
		{mem + "/crivk/kubepods/podg", "memory.limit_in_bytes", "100663296"},
		// Burstable, one container without limits: shares only.
		{cpu + "/crivk/kubepods/burstable/podb", "cpu.shares", "409"},
		{cpu + "/crivk/kubepods/burstable/podb", "cpu.cfs_quota_us", ""},
		{mem + "/crivk/kubepods/burstable/podb", "memory.limit_in_bytes", ""},
		// Burstable with every limit: quota and memory too.
		{cpu + "/crivk/kubepods/burstable/podbl", "cpu.shares", "102"},
		{cpu + "/crivk/kubepods/burstable/podbl", "cpu.cfs_quota_us", "100000"},
		{mem + "/crivk/kubepods/burstable/podbl", "memory.limit_in_bytes", "1073741824"},
		// BestEffort: the minimum shares, nothing else.
		{cpu + "/crivk/kubepods/besteffort/podbe", "cpu.shares", "2"},
		{mem + "/crivk/kubepods/besteffort/podbe", "memory.limit_in_bytes", ""},
	}
	for _, c := range cases {
		if got := read(t, c.dir, c.file); got != c.want {
			t.Errorf("%s/%s = %q, want %q", c.dir, c.file, got, c.want)
		}
	}
	if got := m.PodCgroup(burstable); got != "/crivk/kubepods/burstable/podb" {
		t.Errorf("PodCgroup = %q", got)
	}
	uids, err := m.PodUIDs()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(uids)
	if want := []types.UID{"b", "be", "bl", "g"}; !slices.Equal(uids, want) {
		t.Errorf("PodUIDs = %v, want %v", uids, want)
	}

	// Removing a Burstable pod lowers the QoS cgroup's shares; its cgroup
	// is gone from every hierarchy; removing it again is no error.
	emptyFiles(t, mounts, "crivk/kubepods/burstable/podb")
	if err := m.RemovePod("b"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemovePod("b"); err != nil {
		t.Fatalf("second RemovePod: %v", err)
	}
	if got := read(t, cpu+"/crivk/kubepods/burstable", "cpu.shares"); got != "102" {
		t.Errorf("burstable shares after removal = %q, want 102", got)
	}
	for _, mount := range mounts {
		if _, err := os.Stat(filepath.Join(mount, "crivk/kubepods/burstable/podb")); !os.IsNotExist(err) {
			t.Errorf("pod cgroup still in %s: %v", mount, err)
		}
	}
	// An unknown pod's cgroup (left by a crashed agent) is removed by UID.
	if err := os.MkdirAll(filepath.Join(mem, "crivk/kubepods/besteffort/podorphan"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.RemovePod("orphan"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mem, "crivk/kubepods/besteffort/podorphan")); !os.IsNotExist(err) {
		t.Errorf("orphan cgroup not removed: %v", err)
	}
}

// emptyFiles removes the regular files of a cgroup's directories in every
// hierarchy: on cgroupfs its control files disappear with it, on a
// temporary tree they would keep rmdir from removing the directory.
func emptyFiles(t *testing.T, mounts map[string]string, name string) {
	t.Helper()
	for _, mount := range mounts {
		entries, _ := os.ReadDir(filepath.Join(mount, name))
		for _, e := range entries {
			if !e.IsDir() {
				if err := os.Remove(filepath.Join(mount, name, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestV2Values sets the same classes on a temporary cgroup v2 tree: CPU
// shares become cpu.weight (the kubelet's conversion), the quota cpu.max,
// the memory limit memory.max.
func TestV2Values(t *testing.T) {
	base := t.TempDir()
	// A cgroup2 tree lists its controllers in every directory.
	for _, d := range []string{"", "kubepods", "kubepods/burstable", "kubepods/besteffort", "kubepods/podg",
		"kubepods/burstable/podb", "kubepods/besteffort/podbe"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, d, "cgroup.controllers"), []byte("cpu memory pids"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(Config{PodsCPUMilli: 2000, PodsMemory: 8 << 30, Host: NewHost(HostConfig{V2Mount: base})})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != 2 {
		t.Fatalf("version %d", m.Version())
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{guaranteed, burstable, besteffort} {
		if err := m.EnsurePod(p); err != nil {
			t.Fatalf("EnsurePod %s: %v", p.Name, err)
		}
	}
	cases := []struct{ dir, file, want string }{
		{"kubepods", "cpu.weight", "79"}, // 2048 shares
		{"kubepods", "memory.max", "8589934592"},
		{"kubepods/besteffort", "cpu.weight", "1"},
		{"kubepods/burstable", "cpu.weight", "16"}, // 409 shares
		{"kubepods/podg", "cpu.weight", "30"},      // 768 shares
		{"kubepods/podg", "cpu.max", "75000 100000"},
		{"kubepods/podg", "memory.max", "100663296"},
		{"kubepods/burstable/podb", "cpu.weight", "16"},
		{"kubepods/burstable/podb", "memory.max", ""},
		{"kubepods/besteffort/podbe", "cpu.weight", "1"},
	}
	for _, c := range cases {
		if got := read(t, filepath.Join(base, c.dir), c.file); got != c.want {
			t.Errorf("%s/%s = %q, want %q", c.dir, c.file, got, c.want)
		}
	}
}

func TestNewRejectsRelativeRoot(t *testing.T) {
	if _, err := New(Config{Root: "crivk"}); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("New with a relative root: %v", err)
	}
}

// TestJoin puts a process into <root>/runtime in every hierarchy (the
// cgroup `crivk runtime` starts crivk's containerd in).
func TestJoin(t *testing.T) {
	// The devices hierarchy too: the kubelet kills what is left in any
	// hierarchy of a pod cgroup it removes.
	base := t.TempDir()
	mounts := map[string]string{}
	for _, c := range []string{"cpu", "memory", "pids", "devices"} {
		mounts[c] = filepath.Join(base, c)
	}
	m, err := New(Config{Root: "/crivk", Host: NewHost(HostConfig{V1Mounts: mounts})})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Join("runtime", 4242); err != nil {
		t.Fatal(err)
	}
	for c, mount := range mounts {
		if got := read(t, filepath.Join(mount, "crivk/runtime"), "cgroup.procs"); got != "4242" {
			t.Errorf("%s: cgroup.procs %q, want 4242", c, got)
		}
	}
	base2 := t.TempDir()
	m2, err := New(Config{Root: "/crivk", Host: NewHost(HostConfig{V2Mount: base2})})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Join("runtime", 4343); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(base2, "crivk/runtime"), "cgroup.procs"); got != "4343" {
		t.Errorf("v2: cgroup.procs %q, want 4343", got)
	}
}

// EnsurePod writes a pod's cgroup once: a second call leaves it alone (a
// value changed behind its back stays, as with the kubelet's EnsureExists);
// a missing directory makes it write again; new values (an in-place
// resize) are written by ResizePodCgroup, one at a time; RemovePod forgets
// it.
func TestEnsurePodWritesOnce(t *testing.T) {
	mounts, m := v1Tree(t)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	cpu := filepath.Join(mounts["cpu"], "crivk/kubepods/podg")
	shares := filepath.Join(cpu, "cpu.shares")
	if err := m.EnsurePod(guaranteed); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shares, []byte("1234"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsurePod(guaranteed); err != nil {
		t.Fatal(err)
	}
	if got := read(t, cpu, "cpu.shares"); got != "1234" {
		t.Errorf("cpu.shares %s: the cgroup was written again with unchanged values", got)
	}
	// A hierarchy's directory gone: made and written again.
	if err := os.RemoveAll(filepath.Join(mounts["memory"], "crivk/kubepods/podg")); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsurePod(guaranteed); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(mounts["memory"], "crivk/kubepods/podg"), "memory.limit_in_bytes"); got != "100663296" {
		t.Errorf("memory.limit_in_bytes %q after the directory was removed, want it written again", got)
	}
	if got := read(t, cpu, "cpu.shares"); got != "768" {
		t.Errorf("cpu.shares %s, want 768 written again with the rest", got)
	}
	// New values (an in-place resize): left to ResizePodCgroup, which
	// writes one value at a time.
	resized := guaranteed.DeepCopy()
	resized.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: testutil.Resources("750m", "128Mi"), Limits: testutil.Resources("750m", "128Mi")}
	if err := m.EnsurePod(resized); err != nil {
		t.Fatal(err)
	}
	if got := read(t, cpu, "cpu.shares"); got != "768" {
		t.Errorf("cpu.shares %s after EnsurePod of a resized pod, want 768 (unchanged)", got)
	}
	curLim, curReq, wantLim, wantReq, err := m.PodCgroupValues(resized, v1.ResourceCPU)
	if err != nil || curLim != 75000 || curReq != 768 || wantLim != 100000 || wantReq != 1024 {
		t.Errorf("PodCgroupValues(cpu) = %d %d %d %d %v, want 75000 768 100000 1024", curLim, curReq, wantLim, wantReq, err)
	}
	if err := m.ResizePodCgroup(resized, v1.ResourceCPU, true); err != nil {
		t.Fatal(err)
	}
	if got, shares := read(t, cpu, "cpu.cfs_quota_us"), read(t, cpu, "cpu.shares"); got != "100000" || shares != "768" {
		t.Errorf("after resizing the CPU limit: quota %s shares %s, want 100000 and 768 (the request is a step of its own)", got, shares)
	}
	if err := m.ResizePodCgroup(resized, v1.ResourceCPU, false); err != nil {
		t.Fatal(err)
	}
	if got := read(t, cpu, "cpu.shares"); got != "1024" {
		t.Errorf("cpu.shares %s after resizing the request to 1 CPU, want 1024", got)
	}
	if err := m.ResizePodCgroup(resized, v1.ResourceMemory, true); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(mounts["memory"], "crivk/kubepods/podg"), "memory.limit_in_bytes"); got != "167772160" {
		t.Errorf("memory.limit_in_bytes %s after the resize, want 167772160 (160Mi)", got)
	}
	if curLim, _, wantLim, _, _ := m.PodCgroupValues(resized, v1.ResourceMemory); curLim != wantLim {
		t.Errorf("PodCgroupValues(memory) after the resize: current %d, want %d", curLim, wantLim)
	}
	// On this fake tree (plain directories holding files) rmdir fails;
	// the record goes all the same.
	_ = m.RemovePod(guaranteed.UID)
	m.mu.Lock()
	left := len(m.applied)
	m.mu.Unlock()
	if left != 0 {
		t.Errorf("%d pods still recorded after RemovePod", left)
	}
}
