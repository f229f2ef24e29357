package cri

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

func TestRotateLogs(t *testing.T) {
	tests := map[string]struct {
		size        int
		oldRotated  int // rotated files there before
		reopenErr   error
		wantRotated int
		wantErr     bool
		wantCurrent int // size of the current file after the pass
	}{
		"small log: nothing happens":                  {size: 10, wantRotated: 0, wantCurrent: 10},
		"big log: rotated and reopened":               {size: 200, wantRotated: 1, wantCurrent: 0},
		"old rotated files beyond the limit go":       {size: 200, oldRotated: 6, wantRotated: 2, wantCurrent: 0},
		"reopen fails: the file is put back":          {size: 200, reopenErr: errors.New("boom"), wantErr: true, wantCurrent: 200},
		"exactly at the limit of files, small log":    {size: 10, oldRotated: 2, wantRotated: 2, wantCurrent: 10},
		"too many rotated files even for a small log": {size: 10, oldRotated: 4, wantRotated: 2, wantCurrent: 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			log := filepath.Join(f.dir, "a", "0.log")
			if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(log, []byte(strings.Repeat("x", tc.size)), 0o640); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.oldRotated; i++ {
				name := log + "." + time.Date(2020, 1, 1, 0, 0, i, 0, time.UTC).Format(rotatedTimeFormat)
				if err := os.WriteFile(name, nil, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", LogPath: log,
				State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{LabelManagedBy: managedByValue}}})
			// An exited container is never rotated.
			f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: "c2", LogPath: log + "-exited",
				State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: map[string]string{LabelManagedBy: managedByValue}}})
			if tc.reopenErr != nil {
				f.rs.InjectError("ReopenContainerLog", tc.reopenErr)
			}
			err := f.rt.RotateLogs(context.Background(), LogRotation{MaxSize: 100, MaxFiles: 3})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			rotated, _ := filepath.Glob(log + ".*")
			sort.Strings(rotated)
			if len(rotated) != tc.wantRotated {
				t.Errorf("rotated files %v, want %d", rotated, tc.wantRotated)
			}
			if tc.wantRotated > 0 && tc.size > 100 && !tc.wantErr {
				// The newest rotated file holds what the log had.
				b, _ := os.ReadFile(rotated[len(rotated)-1])
				if len(b) != tc.size {
					t.Errorf("newest rotated file has %d bytes, want %d", len(b), tc.size)
				}
			}
			fi, err := os.Stat(log)
			if err != nil || fi.Size() != int64(tc.wantCurrent) {
				t.Errorf("current log %v (%v), want %d bytes", fi, err, tc.wantCurrent)
			}
		})
	}
}

// TestRotateLogsCompresses: at a rotation, as the kubelet's rotateLog, the
// leftovers of an interrupted compression go, the rotated files beyond
// MaxFiles-2 go (oldest first), the others are gzipped to <rotated>.gz
// with their mode and content, and the newest rotated file (the one made
// now) stays uncompressed. A pass that does not rotate compresses nothing.
func TestRotateLogsCompresses(t *testing.T) {
	ts := func(sec int) string {
		return "." + time.Date(2020, 1, 1, 0, 0, sec, 0, time.UTC).Format(rotatedTimeFormat)
	}
	const now = "NOW" // the rotation's own timestamp
	tests := map[string]struct {
		size     int
		maxFiles int
		before   []string // files beside 0.log (suffixes), each holding its own name
		want     []string // files beside 0.log after the pass
	}{
		"first rotation: nothing to compress": {size: 200, maxFiles: 5,
			want: []string{now}},
		"older rotated files compressed, the new one not": {size: 200, maxFiles: 5,
			before: []string{ts(1), ts(2) + ".gz"},
			want:   []string{ts(1) + ".gz", ts(2) + ".gz", now}},
		"beyond MaxFiles-2 removed before compressing": {size: 200, maxFiles: 3,
			before: []string{ts(1), ts(2), ts(3)},
			want:   []string{ts(3) + ".gz", now}},
		"MaxFiles 1: no rotated file kept but the new one": {size: 200, maxFiles: 1,
			before: []string{ts(1) + ".gz"},
			want:   []string{now}},
		"an interrupted compression's leftovers go": {size: 200, maxFiles: 5,
			before: []string{ts(1), ts(1) + ".gz", ts(2) + ".tmp", ts(3)},
			want:   []string{ts(1) + ".gz", ts(3) + ".gz", now}},
		"files that are not rotated logs are left alone": {size: 200, maxFiles: 5,
			before: []string{".old", ts(1)},
			want:   []string{".old", ts(1) + ".gz", now}},
		"small log: nothing compressed": {size: 10, maxFiles: 5,
			before: []string{ts(1), ts(2)},
			want:   []string{ts(1), ts(2)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			log := filepath.Join(f.dir, "a", "0.log")
			if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(log, []byte(strings.Repeat("x", tc.size)), 0o640); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.before {
				content := []byte(s)
				if strings.HasSuffix(s, ".gz") {
					content = gzipped(t, s)
				}
				if err := os.WriteFile(log+s, content, 0o604); err != nil {
					t.Fatal(err)
				}
			}
			f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", LogPath: log,
				State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{LabelManagedBy: managedByValue}}})
			// The new file's stamp is a second of the rotation: the
			// clock may tick to the next second during it.
			before := "." + f.rt.clock.Now().UTC().Format(rotatedTimeFormat)
			if err := f.rt.RotateLogs(context.Background(), LogRotation{MaxSize: 100, MaxFiles: tc.maxFiles}); err != nil {
				t.Fatal(err)
			}
			after := "." + f.rt.clock.Now().UTC().Format(rotatedTimeFormat)
			matches, _ := filepath.Glob(log + ".*")
			var got []string
			for _, m := range matches {
				got = append(got, strings.TrimPrefix(m, log))
			}
			stamp := after
			for i, s := range got {
				if s == before || s == after {
					stamp = s
					got[i] = now
				}
			}
			want := append([]string{}, tc.want...)
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("files %v, want %v", got, want)
			}
			for _, s := range got {
				name := log + s
				if s == now {
					name = log + stamp
				}
				b, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case s == now:
					if len(b) != tc.size {
						t.Errorf("the new rotated file has %d bytes, want %d (uncompressed)", len(b), tc.size)
					}
				case strings.HasSuffix(s, ".gz"):
					zr, err := gzip.NewReader(bytes.NewReader(b))
					if err != nil {
						t.Fatalf("%s: %v", s, err)
					}
					plain, err := io.ReadAll(zr)
					if err != nil || (string(plain) != s && string(plain) != strings.TrimSuffix(s, ".gz")) {
						t.Errorf("%s holds %q (%v), want its original content", s, plain, err)
					}
					if fi, _ := os.Stat(log + s); fi.Mode().Perm() != 0o604 {
						t.Errorf("%s mode %v, want the original's 0604", s, fi.Mode().Perm())
					}
				}
			}
		})
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// logRotationFixture is a runtime with n running containers, each with its
// own log of size bytes ("c0" ... "c<n-1>", logs <dir>/c<i>/0.log).
func logRotationFixture(t *testing.T, n, size int) (*syncFixture, []string) {
	t.Helper()
	f := newSyncFixture(t)
	var logs []string
	for i := range n {
		id := "c" + strconv.Itoa(i)
		log := filepath.Join(f.dir, id, "0.log")
		if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(log, []byte(strings.Repeat("x", size)), 0o640); err != nil {
			t.Fatal(err)
		}
		f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: id, LogPath: log,
			State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{LabelManagedBy: managedByValue}}})
		logs = append(logs, log)
	}
	return f, logs
}

// rotatedCount is how many rotated files each log has, in logs' order.
func rotatedCount(logs []string) []int {
	var out []int
	for _, l := range logs {
		m, _ := filepath.Glob(l + ".*")
		out = append(out, len(m))
	}
	return out
}

// TestRotateLogsWorkers: a pass rotates every due container's log, up to
// Workers at once and no more (the kubelet's containerLogMaxWorkers), each
// exactly once. The fake runtime's ReopenContainerLog holds every caller
// until min(Workers, containers) of them are in it together, so a pass
// that ran fewer at once would not get past it (and fail on its deadline).
func TestRotateLogsWorkers(t *testing.T) {
	const containers = 6
	for name, workers := range map[string]int{
		"one worker, as the kubelet's default": 1,
		"three workers":                        3,
		"more workers than containers":         8,
		"zero is the default, one":             0,
	} {
		t.Run(name, func(t *testing.T) {
			f, logs := logRotationFixture(t, containers, 200)
			want := min(max(workers, 1), containers)
			var (
				mu              sync.Mutex
				inFlight, most  int
				reopens         = map[string]int{}
				full            = make(chan struct{})
				closeFull       sync.Once
				deadlineReached bool
			)
			// Every caller past the deadline goes on, so that a pass with
			// too few workers ends (and fails) rather than hangs.
			deadline, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			f.rs.reopening = func(id string) {
				mu.Lock()
				inFlight++
				most = max(most, inFlight)
				reopens[id]++
				if inFlight == want {
					closeFull.Do(func() { close(full) })
				}
				mu.Unlock()
				select {
				case <-full:
				case <-deadline.Done():
					mu.Lock()
					deadlineReached = true
					mu.Unlock()
				}
				mu.Lock()
				inFlight--
				mu.Unlock()
			}
			if err := f.rt.RotateLogs(context.Background(), LogRotation{MaxSize: 100, MaxFiles: 3, Workers: workers}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if deadlineReached {
				t.Fatalf("never %d ReopenContainerLog calls at once with %d workers (at most %d)", want, workers, most)
			}
			if most != want {
				t.Errorf("at most %d containers rotated at once, want %d", most, want)
			}
			for i, n := range rotatedCount(logs) {
				id := "c" + strconv.Itoa(i)
				if n != 1 || reopens[id] != 1 {
					t.Errorf("container %s: %d rotated files, %d reopens; want 1 and 1", id, n, reopens[id])
				}
				if fi, err := os.Stat(logs[i]); err != nil || fi.Size() != 0 {
					t.Errorf("container %s: current log %v (%v), want a new empty one", id, fi, err)
				}
			}
		})
	}
}

// TestRotateLogsWorkersErrors: with several workers, one container's
// failure neither stops the pass nor hides another's: every error is
// returned, each naming its container.
func TestRotateLogsWorkersErrors(t *testing.T) {
	f, logs := logRotationFixture(t, 6, 200)
	f.rs.InjectError("ContainerStatus", errors.New("status boom"))
	f.rs.InjectError("ReopenContainerLog", errors.New("reopen boom"))
	err := f.rt.RotateLogs(context.Background(), LogRotation{MaxSize: 100, MaxFiles: 3, Workers: 3})
	if err == nil {
		t.Fatal("no error, want both injected ones")
	}
	for _, want := range []string{"status of container c", "status boom", "rotating log of container c", "reopen boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	rotated := 0
	for _, n := range rotatedCount(logs) {
		rotated += n
	}
	if rotated != 4 {
		t.Errorf("%d logs rotated, want the 4 of the containers without an error (%v)", rotated, rotatedCount(logs))
	}
}

// TestRotateLogsContext: a pass stops handing out containers when its
// context ends, and says how many it did not check.
func TestRotateLogsContext(t *testing.T) {
	t.Run("ended before the pass", func(t *testing.T) {
		f, logs := logRotationFixture(t, 6, 200)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := f.rt.RotateLogs(ctx, LogRotation{MaxSize: 100, MaxFiles: 3, Workers: 3})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "6 of 6 containers not checked") {
			t.Errorf("error %v, want context.Canceled with 6 of 6 containers not checked", err)
		}
		if got := rotatedCount(logs); slices.Max(got) != 0 {
			t.Errorf("rotated files %v, want none", got)
		}
	})
	t.Run("ended during the pass", func(t *testing.T) {
		f, logs := logRotationFixture(t, 6, 200)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f.rs.reopening = func(string) { cancel() } // the first rotation ends the pass
		err := f.rt.RotateLogs(ctx, LogRotation{MaxSize: 100, MaxFiles: 3, Workers: 1})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "5 of 6 containers not checked") {
			t.Errorf("error %v, want context.Canceled with 5 of 6 containers not checked", err)
		}
		total := 0
		for _, n := range rotatedCount(logs) {
			total += n
		}
		if total != 1 {
			t.Errorf("rotated files %v, want the first container's only", rotatedCount(logs))
		}
	})
}

// TestRunLogRotationInterval: passes come every Interval (the kubelet's
// containerLogMonitorInterval), not at a fixed period.
func TestRunLogRotationInterval(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	f, logs := logRotationFixture(t, 2, 200)
	rt, err := New(Config{PodLogDir: f.dir, Clock: clk}, f.rs, f.is)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rt.RunLogRotation(ctx, LogRotation{MaxSize: 100, MaxFiles: 3, Workers: 2, Interval: 3 * time.Second})
	}()
	defer func() { cancel(); <-done }()
	waitFor(t, "the rotation ticker", clk.HasWaiters)
	clk.Step(2 * time.Second)
	if f.rs.count("ListContainers") != 0 {
		t.Fatalf("a pass before the interval: %v", f.rs.GetCalls())
	}
	clk.Step(time.Second)
	waitFor(t, "both logs rotated at 3s", func() bool { return slices.Equal(rotatedCount(logs), []int{1, 1}) })
}
