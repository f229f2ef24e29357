package eviction

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cm"
	evictionapi "github.com/crivk/crivk/eviction/api"
	"github.com/crivk/crivk/lifecycle"
	"github.com/crivk/crivk/nodeapi/stats"
	"github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const mi = 1 << 20

func fixedSummary(s *statsapi.Summary) SummaryProvider {
	return func(context.Context) (*statsapi.Summary, error) {
		if s == nil {
			return &statsapi.Summary{}, nil
		}
		return s, nil
	}
}

// fakeNode is a node whose figures tests change between rounds; each
// Summary is dated by the clock.
type fakeNode struct {
	mu          sync.Mutex
	clock       *testingclock.FakeClock
	memCapacity uint64
	memAvail    uint64
	fsCapacity  uint64
	fsAvail     uint64
	imageAvail  uint64
	pods        []statsapi.PodStats
}

func (n *fakeNode) summary(context.Context) (*statsapi.Summary, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	at := metav1.NewTime(n.clock.Now())
	ws := n.memCapacity - n.memAvail
	avail, fsCap, fsAvail, imgAvail := n.memAvail, n.fsCapacity, n.fsAvail, n.imageAvail
	inodes, free := uint64(1000000), uint64(900000)
	imgCap := fsCap + 1 // another filesystem than the node's
	return &statsapi.Summary{
		Node: statsapi.NodeStats{
			Memory:  &statsapi.MemoryStats{Time: at, AvailableBytes: &avail, WorkingSetBytes: &ws},
			Fs:      &statsapi.FsStats{Time: at, CapacityBytes: &fsCap, AvailableBytes: &fsAvail, Inodes: &inodes, InodesFree: &free},
			Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{Time: at, CapacityBytes: &imgCap, AvailableBytes: &imgAvail, Inodes: &inodes, InodesFree: &free}},
		},
		Pods: append([]statsapi.PodStats(nil), n.pods...),
	}, nil
}

func (n *fakeNode) set(f func(*fakeNode)) {
	n.mu.Lock()
	f(n)
	n.mu.Unlock()
}

// fakePods records evictions; evicted pods leave the active ones.
type fakePods struct {
	mu      sync.Mutex
	active  []*v1.Pod
	evicted []evicted
}

type evicted struct {
	pod string
	ev  lifecycle.Eviction
}

func (f *fakePods) ActivePods() []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*v1.Pod(nil), f.active...)
}

func (f *fakePods) Evict(_ context.Context, pod *v1.Pod, ev lifecycle.Eviction) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evicted = append(f.evicted, evicted{pod.Name, ev})
	for i, p := range f.active {
		if p.UID == pod.UID {
			f.active = append(f.active[:i], f.active[i+1:]...)
			break
		}
	}
	return nil
}

func (f *fakePods) PodCleanedUp(types.UID) bool { return true }

func (f *fakePods) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.evicted {
		out = append(out, e.pod)
	}
	return out
}

// pod is a pod with one container "c" of the given memory request and
// limit ("" for none) and priority.
func pod(name string, prio int32, request, limit string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	c := v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}}
	if request != "" {
		c.Resources.Requests[v1.ResourceMemory] = resource.MustParse(request)
	}
	if limit != "" {
		c.Resources.Limits[v1.ResourceMemory] = resource.MustParse(limit)
		c.Resources.Limits[v1.ResourceCPU] = resource.MustParse("100m")
		c.Resources.Requests[v1.ResourceCPU] = resource.MustParse("100m")
	}
	p.Spec.Containers = []v1.Container{c}
	p.Spec.Priority = &prio
	return p
}

// podStats is pod's stats with container "c" using mem bytes of memory.
func podStats(p *v1.Pod, mem uint64) statsapi.PodStats {
	return statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
		Memory:     &statsapi.MemoryStats{WorkingSetBytes: &mem},
		Containers: []statsapi.ContainerStats{{Name: "c", Memory: &statsapi.MemoryStats{WorkingSetBytes: &mem}}},
	}
}

func TestRankMemory(t *testing.T) {
	type p struct {
		name          string
		prio          int32
		request       string
		usage         uint64
		withoutStatss bool
	}
	tests := map[string]struct {
		pods []p
		want string
	}{
		"above requests first, whatever the priority": {
			pods: []p{{"within", 0, "500Mi", 100 * mi, false}, {"above-high-prio", 1000, "10Mi", 50 * mi, false}},
			want: "[above-high-prio within]",
		},
		"then the lower priority": {
			pods: []p{{"high", 1000, "10Mi", 900 * mi, false}, {"low", 0, "10Mi", 20 * mi, false}},
			want: "[low high]",
		},
		"then more above the request": {
			pods: []p{{"little", 0, "10Mi", 20 * mi, false}, {"hog", 0, "100Mi", 800 * mi, false}, {"mid", 0, "0", 300 * mi, false}},
			want: "[hog mid little]",
		},
		"no stats first": {
			pods: []p{{"hog", 0, "", 800 * mi, false}, {"unmeasured", 0, "", 0, true}},
			want: "[unmeasured hog]",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var pods []*v1.Pod
			s := &statsapi.Summary{}
			for _, x := range tc.pods {
				req := x.request
				if req == "0" {
					req = ""
				}
				pp := pod(x.name, x.prio, req, "")
				pods = append(pods, pp)
				if !x.withoutStatss {
					s.Pods = append(s.Pods, podStats(pp, x.usage))
				}
			}
			rankFor(evictionapi.SignalMemoryAvailable, false, podStatsOf(s))(pods)
			var got []string
			for _, pp := range pods {
				got = append(got, pp.Name)
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("order %v, want %s", got, tc.want)
			}
		})
	}
}

func TestRankDisk(t *testing.T) {
	used := func(n uint64) *statsapi.FsStats { return &statsapi.FsStats{UsedBytes: &n} }
	mk := func(name string, rootfs, logs, volume uint64, request string) (*v1.Pod, statsapi.PodStats) {
		p := pod(name, 0, "", "")
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		if request != "" {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse(request)
		}
		return p, statsapi.PodStats{PodRef: statsapi.PodReference{UID: string(p.UID)},
			Containers:  []statsapi.ContainerStats{{Name: "c", Rootfs: used(rootfs), Logs: used(logs)}},
			VolumeStats: []statsapi.VolumeStats{{Name: "scratch", FsStats: *used(volume)}}}
	}
	a, as := mk("layers", 500*mi, 0, 0, "")
	b, bs := mk("volume", 0, 10*mi, 300*mi, "")
	c, cs := mk("requested", 0, 0, 900*mi, "1Gi")
	s := &statsapi.Summary{Pods: []statsapi.PodStats{as, bs, cs}}
	for _, tc := range []struct {
		signal    evictionapi.Signal
		dedicated bool
		want      string
	}{
		{evictionapi.SignalNodeFsAvailable, false, "[layers volume requested]"},
		// With an image filesystem apart, nodefs counts logs and volumes,
		// imagefs the writable layers.
		{evictionapi.SignalNodeFsAvailable, true, "[volume layers requested]"},
		{evictionapi.SignalImageFsAvailable, true, "[layers volume requested]"},
	} {
		pods := []*v1.Pod{c, b, a}
		rankFor(tc.signal, tc.dedicated, podStatsOf(s))(pods)
		got := []string{pods[0].Name, pods[1].Name, pods[2].Name}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("%s dedicated=%v: order %v, want %s", tc.signal, tc.dedicated, got, tc.want)
		}
	}
}

func newTestManager(t *testing.T, n *fakeNode, cfg Config) *Manager {
	t.Helper()
	cfg.Summary = n.summary
	cfg.Clock = n.clock
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newFakeNode() *fakeNode {
	return &fakeNode{clock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		memCapacity: 4096 * mi, memAvail: 2048 * mi, fsCapacity: 100 << 30, fsAvail: 50 << 30, imageAvail: 50 << 30}
}

// TestMemoryPressure: a hard memory threshold met makes MemoryPressure at
// once and evicts the top-ranked pod (one per round) with the kubelet's
// message; the condition stays for the transition period after the
// threshold was last met; a BestEffort pod is refused meanwhile.
func TestMemoryPressure(t *testing.T) {
	n := newFakeNode()
	hog, guaranteed := pod("hog", 0, "64Mi", ""), pod("guaranteed", 0, "256Mi", "256Mi")
	n.pods = []statsapi.PodStats{podStats(hog, 900*mi), podStats(guaranteed, 100*mi)}
	th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi"})
	m := newTestManager(t, n, Config{Thresholds: th, PressureTransitionPeriod: 30 * time.Second})
	pods := &fakePods{active: []*v1.Pod{guaranteed, hog}}
	ctx := context.Background()

	if p, err := m.synchronize(ctx, pods); p != nil || err != nil || m.IsUnderMemoryPressure() {
		t.Fatalf("no pressure: evicted %v, %v, pressure %v", p, err, m.IsUnderMemoryPressure())
	}
	n.set(func(n *fakeNode) { n.memAvail = 50 * mi })
	n.clock.Step(10 * time.Second)
	p, err := m.synchronize(ctx, pods)
	if err != nil || p == nil || p.Name != "hog" {
		t.Fatalf("evicted %v, %v, want the hog", p, err)
	}
	if !m.IsUnderMemoryPressure() || m.IsUnderDiskPressure() || m.IsUnderPIDPressure() {
		t.Error("want memory pressure only")
	}
	ev := pods.evicted[0].ev
	wantMsg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 900Mi, request is 64Mi, has larger consumption of memory. "
	if ev.Message != wantMsg || ev.GracePeriod != 1 || !ev.DisruptionTarget {
		t.Errorf("eviction %+v, want message %q, grace 1, DisruptionTarget", ev, wantMsg)
	}
	if a := ev.EventAnnotations; a[OffendingContainersKey] != "c" || a[OffendingContainersUsageKey] != "900Mi" || a[StarvedResourceKey] != "memory" {
		t.Errorf("event annotations %v", a)
	}
	// Same stats again (no new measure): nothing more is evicted.
	if p, _ := m.synchronize(ctx, pods); p != nil {
		t.Errorf("evicted %s on stale stats", p.Name)
	}
	if r := m.Admit(pod("besteffort", 0, "", "")); r.Admit || r.Reason != "Evicted" || r.Message != "The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort under memory pressure: %+v", r)
	}
	if r := m.Admit(pod("burstable", 0, "10Mi", "")); !r.Admit {
		t.Errorf("Burstable refused under memory pressure: %+v", r)
	}

	// Relieved: the condition stays until 30 s after it was last met.
	n.set(func(n *fakeNode) { n.memAvail = 2048 * mi })
	for _, step := range []struct {
		d    time.Duration
		want bool
	}{{10 * time.Second, true}, {19 * time.Second, true}, {time.Second, false}} {
		n.clock.Step(step.d)
		if p, _ := m.synchronize(ctx, pods); p != nil {
			t.Errorf("evicted %s without pressure", p.Name)
		}
		if got := m.IsUnderMemoryPressure(); got != step.want {
			t.Errorf("after %v more: memory pressure %v, want %v", step.d, got, step.want)
		}
	}
	if fmt.Sprint(pods.names()) != "[hog]" {
		t.Errorf("evicted %v, want the hog alone", pods.names())
	}
}

// TestSoftThreshold: a soft threshold reports pressure at once but evicts
// only after its grace period, with the shorter of the maximum and the
// pod's grace period.
func TestSoftThreshold(t *testing.T) {
	n := newFakeNode()
	hog := pod("hog", 0, "", "")
	hog.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	n.pods = []statsapi.PodStats{podStats(hog, 900*mi)}
	n.memAvail = 500 * mi
	th, err := evictionapi.ParseThresholds(evictionapi.Flags{Soft: "memory.available<1Gi", SoftGracePeriod: "memory.available=1m"})
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, n, Config{Thresholds: th, PressureTransitionPeriod: time.Minute, MaxPodGracePeriodSeconds: 30})
	pods := &fakePods{active: []*v1.Pod{hog}}
	if p, _ := m.synchronize(context.Background(), pods); p != nil || !m.IsUnderMemoryPressure() {
		t.Fatalf("at once: evicted %v, pressure %v; want pressure, no eviction", p, m.IsUnderMemoryPressure())
	}
	n.clock.Step(59 * time.Second)
	if p, _ := m.synchronize(context.Background(), pods); p != nil {
		t.Fatal("evicted before the grace period")
	}
	n.clock.Step(time.Second)
	if p, _ := m.synchronize(context.Background(), pods); p == nil || pods.evicted[0].ev.GracePeriod != 5 {
		t.Fatalf("after the grace period: evicted %v %+v, want the hog with grace 5", p, pods.evicted)
	}
}

type fakeImageGC struct {
	n     *fakeNode
	frees uint64
	calls int
}

func (g *fakeImageGC) DeleteUnusedImages(context.Context) (int64, error) {
	g.calls++
	g.n.set(func(n *fakeNode) { n.imageAvail += g.frees })
	return int64(g.frees), nil
}

// TestDiskPressureReclaimsFirst: under imagefs pressure the unused images
// go first; pods only when that was not enough.
func TestDiskPressureReclaimsFirst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		frees     uint64
		wantEvict bool
	}{{"images enough", 40 << 30, false}, {"images not enough", 1 << 20, true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode()
			n.imageAvail = 1 << 30 // 1% of 100Gi
			p := pod("writer", 0, "", "")
			n.pods = []statsapi.PodStats{podStats(p, mi)}
			th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "imagefs.available<15%"})
			gc := &fakeImageGC{n: n, frees: tc.frees}
			m := newTestManager(t, n, Config{Thresholds: th, PressureTransitionPeriod: time.Minute, ImageGC: gc})
			pods := &fakePods{active: []*v1.Pod{p}}
			got, _ := m.synchronize(context.Background(), pods)
			if gc.calls != 1 || (got != nil) != tc.wantEvict || !m.IsUnderDiskPressure() {
				t.Errorf("image GC calls %d, evicted %v (want eviction %v), disk pressure %v", gc.calls, got, tc.wantEvict, m.IsUnderDiskPressure())
			}
			if r := m.Admit(pod("guaranteed", 0, "1Gi", "1Gi")); r.Admit || r.Message != "The node had condition: [DiskPressure]. " {
				t.Errorf("admission under disk pressure: %+v", r)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	critical := pod("critical", 2000000000, "", "")
	tolerant := pod("tolerant", 0, "", "")
	tolerant.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	mirror := pod("mirror", 0, "", "")
	mirror.Annotations = map[string]string{"kubernetes.io/config.mirror": "x"}
	for _, tc := range []struct {
		conds []v1.NodeConditionType
		pod   *v1.Pod
		admit bool
	}{
		{nil, pod("besteffort", 0, "", ""), true},
		{[]v1.NodeConditionType{v1.NodeMemoryPressure}, pod("besteffort", 0, "", ""), false},
		{[]v1.NodeConditionType{v1.NodeMemoryPressure}, pod("burstable", 0, "1Mi", ""), true},
		{[]v1.NodeConditionType{v1.NodeMemoryPressure}, tolerant, true},
		{[]v1.NodeConditionType{v1.NodeMemoryPressure}, critical, true},
		{[]v1.NodeConditionType{v1.NodeMemoryPressure}, mirror, true},
		{[]v1.NodeConditionType{v1.NodeDiskPressure}, pod("guaranteed", 0, "1Gi", "1Gi"), false},
		{[]v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodePIDPressure}, tolerant, false},
		{[]v1.NodeConditionType{v1.NodeDiskPressure}, critical, true},
	} {
		m := &Manager{conditions: tc.conds}
		if r := m.Admit(tc.pod); r.Admit != tc.admit {
			t.Errorf("%v, pod %s: %+v, want admit %v", tc.conds, tc.pod.Name, r, tc.admit)
		}
	}
}

func TestLocalStorageViolation(t *testing.T) {
	n := func(v uint64) *uint64 { return &v }
	withLimit := func(l string) *v1.Pod {
		p := pod("p", 0, "", "")
		p.Spec.Containers[0].Resources.Limits[v1.ResourceEphemeralStorage] = resource.MustParse(l)
		return p
	}
	sidecarWithLimit := func(l string, policy *v1.ContainerRestartPolicy) *v1.Pod {
		p := pod("p", 0, "", "")
		p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: policy,
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(l)}}}}
		return p
	}
	sideStats := statsapi.PodStats{EphemeralStorage: &statsapi.FsStats{UsedBytes: n(40 * mi)},
		Containers: []statsapi.ContainerStats{{Name: "side", Rootfs: &statsapi.FsStats{UsedBytes: n(45 * mi)}, Logs: &statsapi.FsStats{UsedBytes: n(10 * mi)}}}}
	emptyDir := pod("p", 0, "", "")
	emptyDir.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("10Mi"))}}}}
	for name, tc := range map[string]struct {
		pod       *v1.Pod
		stats     statsapi.PodStats
		dedicated bool
		want      string
		signal    string
	}{
		"emptyDir past its sizeLimit": {emptyDir, statsapi.PodStats{VolumeStats: []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: n(20 * mi)}}}}, false,
			`Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". `, "emptydirfs.limit"},
		"emptyDir within": {emptyDir, statsapi.PodStats{VolumeStats: []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: n(5 * mi)}}}}, false, "", ""},
		"pod past the containers' limits": {withLimit("50Mi"), statsapi.PodStats{EphemeralStorage: &statsapi.FsStats{UsedBytes: n(60 * mi)}}, false,
			"Pod ephemeral local storage usage exceeds the total limit of containers 50Mi. ", "ephemeralpodfs.limit"},
		"container past its limit": {withLimit("50Mi"), statsapi.PodStats{EphemeralStorage: &statsapi.FsStats{UsedBytes: n(40 * mi)},
			Containers: []statsapi.ContainerStats{{Name: "c", Rootfs: &statsapi.FsStats{UsedBytes: n(45 * mi)}, Logs: &statsapi.FsStats{UsedBytes: n(10 * mi)}}}}, false,
			`Container c exceeded its local ephemeral storage limit "50Mi". `, "ephemeralcontainerfs.limit"},
		// Since v1.37 (#138462) the sidecars' limits too; a plain init
		// container's are not.
		"sidecar past its limit": {sidecarWithLimit("50Mi", ptr.To(v1.ContainerRestartPolicyAlways)), sideStats, false,
			`Container side exceeded its local ephemeral storage limit "50Mi". `, "ephemeralcontainerfs.limit"},
		"init container past its limit": {sidecarWithLimit("50Mi", nil), sideStats, false, "", ""},
		"container's layer on an image filesystem apart": {withLimit("50Mi"), statsapi.PodStats{EphemeralStorage: &statsapi.FsStats{UsedBytes: n(40 * mi)},
			Containers: []statsapi.ContainerStats{{Name: "c", Rootfs: &statsapi.FsStats{UsedBytes: n(45 * mi)}, Logs: &statsapi.FsStats{UsedBytes: n(10 * mi)}}}}, true, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			msg, sig := localStorageViolation(tc.pod, tc.stats, tc.dedicated)
			if msg != tc.want || sig != tc.signal {
				t.Errorf("got %q %q, want %q %q", msg, sig, tc.want, tc.signal)
			}
		})
	}
}

// TestLocalStorageEvictionWithoutPressure: a pod past its emptyDir
// sizeLimit is evicted with grace 1 and no DisruptionTarget, counted
// under emptydirfs.limit, though no threshold is met.
func TestLocalStorageEvictionWithoutPressure(t *testing.T) {
	n := newFakeNode()
	p := pod("filler", 0, "", "")
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("10Mi"))}}}}
	used := uint64(20 * mi)
	ps := podStats(p, mi)
	ps.VolumeStats = []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: &used}}}
	n.pods = []statsapi.PodStats{ps}
	var counted []string
	m := newTestManager(t, n, Config{LocalStorageCapacityIsolation: true, ObserveEviction: func(s string) { counted = append(counted, s) }})
	pods := &fakePods{active: []*v1.Pod{p}}
	if got, _ := m.synchronize(context.Background(), pods); got == nil {
		t.Fatal("not evicted")
	}
	ev := pods.evicted[0].ev
	if ev.Message != `Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". ` || ev.GracePeriod != 1 || ev.DisruptionTarget {
		t.Errorf("eviction %+v", ev)
	}
	if fmt.Sprint(counted) != "[emptydirfs.limit]" || m.IsUnderDiskPressure() {
		t.Errorf("counted %v, disk pressure %v", counted, m.IsUnderDiskPressure())
	}
}

type fakeRuntime struct{}

func (fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return nil, nil
}
func (fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return nil, nil
}
func (fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, nil
}

type fakeImageFs struct{ dir string }

func (f fakeImageFs) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.dir}}}}, nil
}

// TestSignalsFromFixtures: the signals as the kubelet computes them, from
// cgroup v1 or v2 and /proc fixture files read by nodeapi/stats through
// package cm: memory.available = MemTotal - working set, the working set
// being on v1 usage_in_bytes - total_inactive_file and on v2, where the
// root cgroup has no memory.current, anon + file - inactive_file of the
// root's memory.stat (opencontainers/cgroups' root statistics, cAdvisor's
// and so the kubelet's); pid.available = min(pid_max, threads-max) -
// tasks; the filesystems from statfs.
func TestSignalsFromFixtures(t *testing.T) {
	// The cgroup library reads a plain directory tree as cgroupfs.
	cgroups.TestMode = true
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprintf("cgroup v%d", v), func(t *testing.T) { signalsFromFixtures(t, v) })
	}
}

func signalsFromFixtures(t *testing.T, version int) {
	root := t.TempDir()
	files := map[string]string{
		"proc/sys/kernel/pid_max":     "32768\n",
		"proc/sys/kernel/threads-max": "192731\n",
		"proc/loadavg":                "0.50 0.40 0.30 3/1234 99999\n",
	}
	host := cm.NewHost(cm.HostConfig{V1Mounts: map[string]string{"memory": filepath.Join(root, "cgroup", "memory"), "cpuacct": filepath.Join(root, "cgroup", "cpuacct")}})
	if version == 1 {
		files["cgroup/memory/memory.usage_in_bytes"] = "3221225472\n"                           // 3 GiB
		files["cgroup/memory/memory.stat"] = "cache 1\ntotal_inactive_file 1073741824\nrss 5\n" // 1 GiB
		files["cgroup/cpuacct/cpuacct.usage"] = "1\n"
	} else {
		host = cm.NewHost(cm.HostConfig{V2Mount: filepath.Join(root, "cgroup")})
		// 2.5 GiB anon + 0.5 GiB file, 1 GiB of it inactive (a page cache
		// larger than the file pages charged would floor at 0).
		files["cgroup/memory.stat"] = "anon 2684354560\nfile 536870912\ninactive_file 1073741824\nactive_file 0\n"
		files["cgroup/cpu.stat"] = "usage_usec 1\n"
	}
	for path, data := range files {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := stats.New(stats.Config{RootDir: root, Runtime: fakeRuntime{}, ImageFs: fakeImageFs{root},
		MemoryCapacity: func() (int64, error) { return 8 << 30, nil }, Node: host, ProcRoot: filepath.Join(root, "proc")})
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Summarize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	obs := observe(s, 0)
	for sig, want := range map[evictionapi.Signal][2]int64{
		evictionapi.SignalMemoryAvailable: {6 << 30, 8 << 30}, // 8 GiB - (3 - 1) GiB, on both versions
		evictionapi.SignalPIDAvailable:    {32768 - 1234, 32768},
	} {
		o, ok := obs[sig]
		if !ok || o.available.Value() != want[0] || o.capacity.Value() != want[1] {
			t.Errorf("%s: %v of %v, want %d of %d", sig, o.available, o.capacity, want[0], want[1])
		}
	}
	for _, sig := range []evictionapi.Signal{evictionapi.SignalNodeFsAvailable, evictionapi.SignalNodeFsInodesFree, evictionapi.SignalImageFsAvailable, evictionapi.SignalImageFsInodesFree} {
		if o, ok := obs[sig]; !ok || o.capacity.Sign() <= 0 {
			t.Errorf("%s: no observation from statfs", sig)
		}
	}
	if dedicatedImageFs(s) {
		t.Error("one directory taken for two filesystems")
	}
	if strings.Contains(fmt.Sprint(obs), "allocatable") {
		t.Error("allocatableMemory.available observed without a pods system container (no Config.PodsCgroup)")
	}
}
