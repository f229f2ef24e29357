package crilog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// A log of four records at one-second intervals from t0; the second line
// is split in two partial records.
var (
	t0      = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	testLog = "2024-01-01T00:00:00Z stdout F one\n" +
		"2024-01-01T00:00:01Z stdout P tw\n" +
		"2024-01-01T00:00:01.5Z stdout F o\n" +
		"2024-01-01T00:00:02Z stderr F oops\n" +
		"2024-01-01T00:00:03Z stdout F four\n"
)

func TestReadLogs(t *testing.T) {
	tests := []struct {
		name       string
		log        string
		opts       Options
		wantOut    string
		wantErrOut string
		wantErr    string
	}{
		{name: "everything, partial lines joined", log: testLog, opts: Options{TailLines: -1, LimitBytes: -1},
			wantOut: "one\ntwo\nfour\n", wantErrOut: "oops\n"},
		{name: "tail counts records", log: testLog, opts: Options{TailLines: 2, LimitBytes: -1},
			wantOut: "four\n", wantErrOut: "oops\n"},
		{name: "tail zero", log: testLog, opts: Options{TailLines: 0, LimitBytes: -1}},
		{name: "tail beyond the start", log: testLog, opts: Options{TailLines: 100, LimitBytes: -1},
			wantOut: "one\ntwo\nfour\n", wantErrOut: "oops\n"},
		{name: "since skips older records", log: testLog, opts: Options{TailLines: -1, LimitBytes: -1, Since: t0.Add(2 * time.Second)},
			wantOut: "four\n", wantErrOut: "oops\n"},
		{name: "since after everything", log: testLog, opts: Options{TailLines: -1, LimitBytes: -1, Since: t0.Add(time.Hour)}},
		{name: "limit bytes cuts a record", log: testLog, opts: Options{TailLines: -1, LimitBytes: 6},
			wantOut: "one\ntw"},
		{name: "limit bytes counts both streams", log: testLog, opts: Options{TailLines: -1, LimitBytes: 10},
			wantOut: "one\ntwo\n", wantErrOut: "oo"},
		{name: "limit zero", log: testLog, opts: Options{TailLines: -1, LimitBytes: 0}},
		{name: "timestamps at line starts only", log: testLog, opts: Options{TailLines: -1, LimitBytes: -1, Timestamps: true},
			wantOut: "2024-01-01T00:00:00.000000000Z one\n" +
				"2024-01-01T00:00:01.000000000Z two\n" +
				"2024-01-01T00:00:03.000000000Z four\n",
			wantErrOut: "2024-01-01T00:00:02.000000000Z oops\n"},
		{name: "timestamps count towards the limit", log: testLog, opts: Options{TailLines: -1, LimitBytes: 33, Timestamps: true},
			wantOut: "2024-01-01T00:00:00.000000000Z on"},
		{name: "incomplete last line is written", log: "2024-01-01T00:00:00Z stdout F one\n2024-01-01T00:00:01Z stdout F tw",
			opts: Options{TailLines: -1, LimitBytes: -1}, wantOut: "one\ntw"},
		{name: "unparsable lines are skipped", log: "2024-01-01T00:00:00Z stdout F one\nnoise\n2024-01-01T00:00:01Z stdout F two\n",
			opts: Options{TailLines: -1, LimitBytes: -1}, wantOut: "one\ntwo\n"},
		{name: "docker json", log: `{"log":"one\n","stream":"stdout","time":"2024-01-01T00:00:00Z"}` + "\n" +
			`{"log":"err\n","stream":"stderr","time":"2024-01-01T00:00:01Z"}` + "\n",
			opts:    Options{TailLines: -1, LimitBytes: -1, Timestamps: true},
			wantOut: "2024-01-01T00:00:00.000000000Z one\n", wantErrOut: "2024-01-01T00:00:01.000000000Z err\n"},
		{name: "empty file", log: "", opts: Options{TailLines: 10, LimitBytes: -1}},
		{name: "unknown format", log: "plain text\n", opts: Options{TailLines: -1, LimitBytes: -1}, wantErr: "unsupported log format"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0.log")
			if err := os.WriteFile(path, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			err := Reader{}.ReadLogs(context.Background(), path, "", tc.opts, &out, &errOut)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.wantOut || errOut.String() != tc.wantErrOut {
				t.Errorf("stdout %q stderr %q, want %q and %q", out.String(), errOut.String(), tc.wantOut, tc.wantErrOut)
			}
		})
	}
}

func TestReadLogsNilStream(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(testLog), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := (Reader{}).ReadLogs(context.Background(), path, "", Options{TailLines: -1, LimitBytes: 8}, &out, nil); err != nil {
		t.Fatal(err)
	}
	if want := "one\ntwo\n"; out.String() != want { // stderr's bytes do not count
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
}

func TestNewOptions(t *testing.T) {
	now := t0.Add(time.Hour)
	i := func(v int64) *int64 { return &v }
	tests := []struct {
		name string
		in   v1.PodLogOptions
		want Options
	}{
		{name: "defaults", want: Options{TailLines: -1, LimitBytes: -1}},
		{name: "all set", in: v1.PodLogOptions{TailLines: i(5), LimitBytes: i(100), Follow: true, Timestamps: true, SinceSeconds: i(60)},
			want: Options{TailLines: 5, LimitBytes: 100, Follow: true, Timestamps: true, Since: now.Add(-time.Minute)}},
		{name: "since time", in: v1.PodLogOptions{SinceTime: &metav1.Time{Time: t0}},
			want: Options{TailLines: -1, LimitBytes: -1, Since: t0}},
		{name: "the later of since seconds and time", in: v1.PodLogOptions{SinceSeconds: i(60), SinceTime: &metav1.Time{Time: t0}},
			want: Options{TailLines: -1, LimitBytes: -1, Since: now.Add(-time.Minute)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewOptions(&tc.in, now); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// fakeRuntime reports one container's state and counts the questions.
type fakeRuntime struct {
	running atomic.Bool
	err     atomic.Value // error, if set
	calls   atomic.Int32
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.calls.Add(1)
	if err, _ := f.err.Load().(error); err != nil {
		return nil, err
	}
	state := runtimeapi.ContainerState_CONTAINER_EXITED
	if f.running.Load() {
		state = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: state}}, nil
}

// syncBuffer is a bytes.Buffer the test reads while the reader writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// follow starts ReadLogs with Follow on path and returns its output and
// its result.
func follow(t *testing.T, path string, rt *fakeRuntime, clk *clocktesting.FakeClock, opts Options) (*syncBuffer, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := &syncBuffer{}
	done := make(chan error, 1)
	opts.Follow = true
	go func() {
		done <- Reader{Runtime: rt, Clock: clk}.ReadLogs(ctx, path, "c1", opts, out, out)
	}()
	return out, done
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond, stepping the fake clock so that a reader that waits
// for its periodic check goes on.
func waitFor(t *testing.T, what string, clk *clocktesting.FakeClock, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		if clk.HasWaiters() {
			clk.Step(forceCheckPeriod)
		}
		time.Sleep(time.Millisecond) // polling a condition, not waiting for time to pass
	}
}

func returned(done <-chan error, err *error) func() bool {
	return func() bool {
		select {
		case *err = <-done:
			return true
		default:
			return false
		}
	}
}

// TestFollow follows a log through a write, a partial line written in two
// steps, a rotation (rename, a last write to the old file, the new file)
// and the container's exit, after which what was written is still read.
func TestFollow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	appendTo(t, path, "2024-01-01T00:00:00Z stdout F one\n")
	rt := &fakeRuntime{}
	rt.running.Store(true)
	clk := clocktesting.NewFakeClock(t0)
	out, done := follow(t, path, rt, clk, Options{TailLines: -1, LimitBytes: -1})

	expect := func(want string) {
		t.Helper()
		waitFor(t, "output "+want, clk, func() bool { return out.String() == want })
	}
	expect("one\n")

	appendTo(t, path, "2024-01-01T00:00:01Z stdout F two\n")
	expect("one\ntwo\n")

	// A line written in two steps is read once it is whole: the reader
	// sees its first half at the end of the file (it asks about the
	// container twice after that) and keeps it.
	calls := rt.calls.Load()
	appendTo(t, path, "2024-01-01T00:00:02Z stdout P thr")
	waitFor(t, "the reader to see half a line", clk, func() bool { return rt.calls.Load() >= calls+2 })
	if got := out.String(); got != "one\ntwo\n" {
		t.Fatalf("output %q after half a line", got)
	}
	appendTo(t, path, "ee-\n2024-01-01T00:00:02Z stdout F end\n")
	expect("one\ntwo\nthree-end\n")

	// Rotation, as cri.RotateLogs does it: rename, the runtime's last
	// write to the old file, then the new file.
	rotated := path + ".20240101-000003"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	appendTo(t, rotated, "2024-01-01T00:00:03Z stdout F last of old\n")
	appendTo(t, path, "2024-01-01T00:00:04Z stdout F first of new\n")
	expect("one\ntwo\nthree-end\nlast of old\nfirst of new\n")

	appendTo(t, path, "2024-01-01T00:00:05Z stderr F more\n")
	expect("one\ntwo\nthree-end\nlast of old\nfirst of new\nmore\n")

	// The container exits after a last write: the write is read, then the
	// reader returns.
	appendTo(t, path, "2024-01-01T00:00:06Z stdout F bye\n")
	rt.running.Store(false)
	var err error
	waitFor(t, "the reader to return", clk, returned(done, &err))
	if err != nil {
		t.Fatal(err)
	}
	if want := "one\ntwo\nthree-end\nlast of old\nfirst of new\nmore\nbye\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestFollowStops(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(rt *fakeRuntime, cancel context.CancelFunc)
		wantErr error
	}{
		{name: "container exits without writing", setup: func(rt *fakeRuntime, _ context.CancelFunc) { rt.running.Store(false) }},
		{name: "container is gone", setup: func(rt *fakeRuntime, _ context.CancelFunc) {
			rt.err.Store(status.Error(codes.NotFound, "no such container"))
		}},
		{name: "caller goes away", setup: func(_ *fakeRuntime, cancel context.CancelFunc) { cancel() }, wantErr: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0.log")
			appendTo(t, path, "2024-01-01T00:00:00Z stdout F one\n")
			rt := &fakeRuntime{}
			rt.running.Store(true)
			clk := clocktesting.NewFakeClock(t0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := &syncBuffer{}
			done := make(chan error, 1)
			go func() {
				done <- Reader{Runtime: rt, Clock: clk}.ReadLogs(ctx, path, "c1", Options{TailLines: -1, LimitBytes: -1, Follow: true}, out, out)
			}()
			// Wait until the reader has asked about the container once,
			// so that it is past the first end of the file.
			waitFor(t, "the reader to follow", clk, func() bool { return rt.calls.Load() > 0 })
			tc.setup(rt, cancel)
			var err error
			waitFor(t, "the reader to return", clk, returned(done, &err))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if out.String() != "one\n" {
				t.Errorf("output %q", out.String())
			}
		})
	}
}

// TestFollowRuntimeUnavailable: a runtime that does not answer is taken to
// still run the container.
func TestFollowRuntimeUnavailable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendTo(t, path, "2024-01-01T00:00:00Z stdout F one\n")
	rt := &fakeRuntime{}
	rt.err.Store(status.Error(codes.Unavailable, "containerd restarting"))
	clk := clocktesting.NewFakeClock(t0)
	out, done := follow(t, path, rt, clk, Options{TailLines: -1, LimitBytes: -1})
	waitFor(t, "several checks", clk, func() bool { return rt.calls.Load() >= 3 })
	appendTo(t, path, "2024-01-01T00:00:01Z stdout F two\n")
	waitFor(t, "output", clk, func() bool { return out.String() == "one\ntwo\n" })
	select {
	case err := <-done:
		t.Fatalf("reader returned %v while the runtime was unavailable", err)
	default:
	}
}

func TestFollowTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendTo(t, path, testLog)
	rt := &fakeRuntime{}
	rt.running.Store(true)
	clk := clocktesting.NewFakeClock(t0)
	out, done := follow(t, path, rt, clk, Options{TailLines: 1, LimitBytes: -1})
	waitFor(t, "the tail", clk, func() bool { return out.String() == "four\n" })
	appendTo(t, path, "2024-01-01T00:00:04Z stdout F five\n")
	waitFor(t, "the new line", clk, func() bool { return out.String() == "four\nfive\n" })
	rt.running.Store(false)
	var err error
	waitFor(t, "the reader to return", clk, returned(done, &err))
	if err != nil {
		t.Fatal(err)
	}
}

func TestFollowNeedsRuntime(t *testing.T) {
	err := Reader{}.ReadLogs(context.Background(), "/nonexistent", "c1", Options{Follow: true}, nil, nil)
	if err == nil {
		t.Fatal("following without a runtime succeeded")
	}
}
