package images

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeRuntime holds images, the images its containers use and a sandbox
// image; it records removals.
type fakeRuntime struct {
	mu      sync.Mutex
	images  map[string]*runtimeapi.Image // by ID
	used    []string                     // container image references
	sandbox string
	removed []string
	failing map[string]bool // RemoveImage fails for these IDs
	listErr error
	lists   int // ListImages calls
}

func (f *fakeRuntime) listCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

func newFakeRuntime(imgs ...*runtimeapi.Image) *fakeRuntime {
	f := &fakeRuntime{images: map[string]*runtimeapi.Image{}, failing: map[string]bool{}}
	for _, i := range imgs {
		f.images[i.Id] = i
	}
	return f
}

func img(id string, size uint64, tags ...string) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, Size: size, RepoTags: tags}
}

func (f *fakeRuntime) ListImages(context.Context) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*runtimeapi.Image
	for _, i := range f.images {
		out = append(out, i)
	}
	return out, nil
}

func (f *fakeRuntime) RemoveImage(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing[id] {
		return fmt.Errorf("image %s: read-only file system", id)
	}
	delete(f.images, id)
	f.removed = append(f.removed, id)
	return nil
}

func (f *fakeRuntime) ContainerImages(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.used...), nil
}

func (f *fakeRuntime) SandboxImage(context.Context) (string, error) { return f.sandbox, nil }

func (f *fakeRuntime) use(refs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used = refs
}

func (f *fakeRuntime) takeRemoved() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.removed
	f.removed = nil
	return out
}

// recorder records events as "reason: message".
type recorder struct {
	mu     sync.Mutex
	events []string
	// uids are the UIDs of the node references, by reason.
	uids map[string]types.UID
}

func (r *recorder) Eventf(obj runtime.Object, _, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, ok := obj.(*v1.ObjectReference)
	if !ok || ref.Kind != "Node" {
		r.events = append(r.events, "not on the node: "+reason)
		return
	}
	if r.uids == nil {
		r.uids = map[string]types.UID{}
	}
	r.uids[reason] = ref.UID
	r.events = append(r.events, reason+": "+fmt.Sprintf(format, args...))
}

func (r *recorder) uid(reason string) types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.uids[reason]
}

func (r *recorder) reasons() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, strings.SplitN(e, ":", 2)[0])
	}
	return out
}

// fs is an image filesystem of capacity bytes with used bytes in use.
type fs struct {
	mu             sync.Mutex
	capacity, used uint64
}

func (f *fs) stats(context.Context) (*statsapi.FsStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	avail := f.capacity - f.used
	return &statsapi.FsStats{CapacityBytes: &f.capacity, AvailableBytes: &avail}, nil
}

type fixture struct {
	m       *Manager
	rt      *fakeRuntime
	fs      *fs
	clock   *testingclock.FakeClock
	rec     *recorder
	reasons map[string]int // ObserveRemoved
	mu      sync.Mutex
}

func newFixture(t *testing.T, p Policy, rt *fakeRuntime, capacity, used uint64) *fixture {
	t.Helper()
	f := &fixture{rt: rt, fs: &fs{capacity: capacity, used: used}, rec: &recorder{}, reasons: map[string]int{},
		clock: testingclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))}
	m, err := New(Config{Policy: p, Runtime: rt, FsStats: f.fs.stats, Recorder: f.rec, Clock: f.clock,
		NodeRef: &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "n1"},
		NodeRefWithUID: func() *v1.ObjectReference {
			return &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-n1"}
		},
		ObserveRemoved: func(reason string) {
			f.mu.Lock()
			f.reasons[reason]++
			f.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

// noMinAge is a policy that removes what is unused at once, past 90%.
var noMinAge = Policy{HighThresholdPercent: 90, LowThresholdPercent: 80}

func TestGarbageCollectRemovesLeastRecentlyUsedFirst(t *testing.T) {
	rt := newFakeRuntime(img("sha256:old", 10, "old:1"), img("sha256:recent", 10, "recent:1"),
		img("sha256:never", 10, "never:1"), img("sha256:running", 10, "running:1"))
	f := newFixture(t, noMinAge, rt, 100, 50)
	ctx := context.Background()
	// "old" is used, then "recent", then only "running" is.
	rt.use("sha256:old")
	if err := f.m.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Minute)
	rt.use("recent:1") // by name: the container was created from the tag
	if err := f.m.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Minute)
	rt.use("sha256:running")
	f.fs.used = 95 // 95%: free down to 80%, 15 bytes, two images
	if err := f.m.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := rt.takeRemoved(), []string{"sha256:never", "sha256:old"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v (never used, then least recently used)", got, want)
	}
	if f.reasons[ReasonSpace] != 2 {
		t.Errorf("image_garbage_collected_total{reason=space} = %d, want 2", f.reasons[ReasonSpace])
	}
}

func TestNeverRemovedInUsePinnedOrSandbox(t *testing.T) {
	pinned := img("sha256:pinned", 10, "pinned:1")
	pinned.Pinned = true
	pause := img("sha256:pause", 10, "registry.k8s.io/pause:3.10.1")
	used := img("sha256:used", 10, "busybox:1")
	used.RepoDigests = []string{"busybox@sha256:abc"}
	rt := newFakeRuntime(pinned, pause, used, img("sha256:unused", 10, "unused:1"))
	rt.sandbox = "registry.k8s.io/pause:3.10.1"
	rt.use("busybox@sha256:abc") // a container created by digest
	f := newFixture(t, noMinAge, rt, 100, 99)
	freed, err := f.m.DeleteUnusedImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.takeRemoved(); !reflect.DeepEqual(got, []string{"sha256:unused"}) || freed != 10 {
		t.Errorf("removed %v (%d bytes), want only the unused image (10 bytes)", got, freed)
	}
	// The collection cannot reach the low threshold: the kubelet's event.
	err = f.m.GarbageCollect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Failed to free sufficient space by deleting unused images (freed 0 bytes)") {
		t.Fatalf("GarbageCollect = %v, want the FreeDiskSpaceFailed message", err)
	}
	if got := rt.takeRemoved(); len(got) != 0 {
		t.Errorf("removed %v: an image in use, pinned or the sandbox image", got)
	}
	want := "FreeDiskSpaceFailed: Insufficient free disk space on the node's image filesystem (99% of 100 B used). " +
		"Failed to free sufficient space by deleting unused images (freed 0 bytes). " +
		"Investigate disk usage, as it could be used by active images, logs, volumes, or other data."
	if len(f.rec.events) != 1 || f.rec.events[0] != want {
		t.Errorf("events %q, want [%q]", f.rec.events, want)
	}
	// On the Node without a UID, as the kubelet's image manager's nodeRef.
	if uid := f.rec.uid(EventFreeDiskSpaceFailed); uid != "" {
		t.Errorf("FreeDiskSpaceFailed on UID %q, want none", uid)
	}
}

func TestThresholds(t *testing.T) {
	for name, tc := range map[string]struct {
		used        uint64
		pinC        bool
		wantRemoved int
		wantErr     bool
	}{
		"below the high threshold: nothing":            {used: 89, wantRemoved: 0},
		"at the high threshold: down to the low one":   {used: 90, wantRemoved: 1}, // 10 bytes to free
		"far above: as many as needed":                 {used: 100, wantRemoved: 2},
		"not enough unused: all of them, and an error": {used: 100, pinC: true, wantRemoved: 2, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			// Three images of 10 bytes; with pinC, c stays and b is 5
			// bytes: 15 of the 20 bytes to free.
			rt := newFakeRuntime(img("sha256:a", 10), img("sha256:b", 10), img("sha256:c", 10))
			if tc.pinC {
				rt.images["sha256:c"].Pinned = true
				rt.images["sha256:b"].Size = 5
			}
			f := newFixture(t, noMinAge, rt, 100, tc.used)
			err := f.m.GarbageCollect(context.Background())
			if (err != nil) != tc.wantErr {
				t.Errorf("GarbageCollect = %v, want error %v", err, tc.wantErr)
			}
			if got := rt.takeRemoved(); len(got) != tc.wantRemoved {
				t.Errorf("removed %v, want %d images", got, tc.wantRemoved)
			}
		})
	}
}

func TestMinimumAge(t *testing.T) {
	rt := newFakeRuntime(img("sha256:a", 10))
	f := newFixture(t, Policy{HighThresholdPercent: 90, LowThresholdPercent: 80, MinAge: 2 * time.Minute}, rt, 100, 90)
	ctx := context.Background()
	if err := f.m.GarbageCollect(ctx); err == nil {
		t.Error("a new image was removed, or nothing reported")
	}
	f.clock.Step(2*time.Minute - time.Second)
	if _, err := f.m.DeleteUnusedImages(ctx); err != nil || len(rt.takeRemoved()) != 0 {
		t.Fatalf("an image first detected less than the minimum age ago was removed (%v)", err)
	}
	f.clock.Step(time.Second)
	if err := f.m.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rt.takeRemoved(); !reflect.DeepEqual(got, []string{"sha256:a"}) {
		t.Errorf("removed %v once old enough, want sha256:a", got)
	}
}

func TestMaximumAge(t *testing.T) {
	rt := newFakeRuntime(img("sha256:stale", 10), img("sha256:fresh", 10))
	f := newFixture(t, Policy{HighThresholdPercent: 100, MaxAge: time.Hour}, rt, 100, 10)
	ctx := context.Background()
	rt.use("sha256:stale", "sha256:fresh")
	if err := f.m.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	rt.use("sha256:fresh")
	f.clock.Step(time.Hour)
	// Both were used an hour ago at most, and crivk has not run for
	// longer than the maximum age: nothing goes.
	if err := f.m.GarbageCollect(ctx); err != nil || len(rt.takeRemoved()) != 0 {
		t.Fatalf("removed before the maximum age passed (%v)", err)
	}
	f.clock.Step(time.Second)
	if err := f.m.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rt.takeRemoved(); !reflect.DeepEqual(got, []string{"sha256:stale"}) {
		t.Errorf("removed %v, want the image unused for longer than the maximum age", got)
	}
	if f.reasons[ReasonAge] != 1 {
		t.Errorf("image_garbage_collected_total{reason=age} = %d, want 1", f.reasons[ReasonAge])
	}
}

func TestInvalidCapacity(t *testing.T) {
	f := newFixture(t, noMinAge, newFakeRuntime(), 0, 0)
	if err := f.m.GarbageCollect(context.Background()); err == nil {
		t.Fatal("capacity 0 accepted")
	}
	if got := f.rec.reasons(); !reflect.DeepEqual(got, []string{EventInvalidDiskCapacity}) {
		t.Errorf("events %v", got)
	}
}

func TestRemovalErrorsAreReported(t *testing.T) {
	rt := newFakeRuntime(img("sha256:a", 10), img("sha256:b", 10))
	rt.failing["sha256:a"] = true
	f := newFixture(t, noMinAge, rt, 100, 100)
	err := f.m.GarbageCollect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "wanted to free 20 bytes, but freed 10 bytes space with errors in image deletion") {
		t.Errorf("GarbageCollect = %v", err)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, p := range []Policy{
		{HighThresholdPercent: 101, LowThresholdPercent: 80},
		{HighThresholdPercent: 85, LowThresholdPercent: -1},
		{HighThresholdPercent: 80, LowThresholdPercent: 85},
		{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: -time.Second},
		{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Hour, MaxAge: time.Hour},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if err := DefaultPolicy.Validate(); err != nil {
		t.Errorf("the default policy: %v", err)
	}
}

func TestImagesBiggestFirst(t *testing.T) {
	rt := newFakeRuntime(img("sha256:a", 10), img("sha256:b", 30), img("sha256:c", 10), img("sha256:d", 20))
	f := newFixture(t, noMinAge, rt, 100, 0)
	if err := f.m.refreshCache(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range f.m.Images() {
		got = append(got, i.Id)
	}
	if want := []string{"sha256:b", "sha256:d", "sha256:c", "sha256:a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("images %v, want %v", got, want)
	}
}

// TestRunDetectsImagesWithCollectionOff: with the periodic collection off
// (as hack/run-crivk.sh and hack/run-kubelet.sh run the agents), Run still
// detects images at start and every DetectPeriod, as the kubelet's image
// manager; a reclaim (DeleteUnusedImages) past MinAge then removes an
// unused image detected at start. Without the detection every image looked
// first detected at the reclaim, younger than MinAge, and none was freed.
func TestRunDetectsImagesWithCollectionOff(t *testing.T) {
	rt := newFakeRuntime(img("sha256:unused", 10, "unused:1"))
	off := Policy{HighThresholdPercent: 100, LowThresholdPercent: 80, MinAge: 2 * time.Minute}
	f := newFixture(t, off, rt, 100, 99)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testutil.WaitFor(t, "the detection at start", func() bool {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		return f.m.records["sha256:unused"] != nil
	})
	f.clock.Step(3 * time.Minute)
	freed, err := f.m.DeleteUnusedImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.takeRemoved(); !reflect.DeepEqual(got, []string{"sha256:unused"}) || freed != 10 {
		t.Errorf("reclaim 3m after the start removed %v (%d bytes), want the unused image detected at start (10 bytes)", got, freed)
	}
}

// TestRunRecordsImageGCFailedOnRepeatedFailure: the first failure is only
// logged (stats may not be ready), the second in a row is an event.
func TestRunRecordsImageGCFailedOnRepeatedFailure(t *testing.T) {
	rt := newFakeRuntime()
	rt.listErr = errors.New("runtime down")
	f := newFixture(t, noMinAge, rt, 100, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// The image list's loop and the collection have each listed once.
	testutil.WaitFor(t, "the first collection", func() bool { return rt.listCalls() >= 2 })
	if got := f.rec.reasons(); len(got) != 0 {
		t.Fatalf("events after one failure: %v", got)
	}
	f.clock.Step(GCPeriod)
	testutil.WaitFor(t, "ImageGCFailed", func() bool {
		r := f.rec.reasons()
		sort.Strings(r)
		return reflect.DeepEqual(r, []string{EventImageGCFailed})
	})
	// On the Node with its UID, as the kubelet's nodeRefWithUID (#139921).
	if uid := f.rec.uid(EventImageGCFailed); uid != "uid-n1" {
		t.Errorf("ImageGCFailed on UID %q, want uid-n1", uid)
	}
}
