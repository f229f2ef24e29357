package nodeapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestLogOptions(t *testing.T) {
	for _, tc := range []struct {
		query    string
		code     int
		tail     int64 // -1: nil
		limit    int64 // -1: nil
		follow   bool
		previous bool
	}{
		{query: "", tail: -1, limit: -1},
		{query: "tailLines=0", tail: 0, limit: -1},
		{query: "tail=7", tail: 7, limit: -1},
		{query: "tail=all&tailLines=3", tail: -1, limit: -1},
		{query: "follow=true&previous=true&limitBytes=10", tail: -1, limit: 10, follow: true, previous: true},
		{query: "tailLines=abc", code: http.StatusBadRequest},
		{query: "follow=maybe", code: http.StatusBadRequest},
		{query: "sinceTime=yesterday", code: http.StatusBadRequest},
		{query: "sinceTime=2026-11-22T10:00:00Z&timestamps=true", tail: -1, limit: -1},
		{query: "tailLines=-1", code: http.StatusUnprocessableEntity},
		{query: "limitBytes=0", code: http.StatusUnprocessableEntity},
		{query: "sinceSeconds=0", code: http.StatusUnprocessableEntity},
		{query: "sinceSeconds=5&sinceTime=2026-11-22T10:00:00Z", code: http.StatusUnprocessableEntity},
		{query: "stream=both", code: http.StatusUnprocessableEntity},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/containerLogs/ns/p/c?"+tc.query, nil)
			opts, code, err := logOptions(r)
			if tc.code != 0 {
				if err == nil || code != tc.code {
					t.Fatalf("got code %d, err %v; want %d", code, err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ptr := func(p *int64) int64 {
				if p == nil {
					return -1
				}
				return *p
			}
			if ptr(opts.TailLines) != tc.tail || ptr(opts.LimitBytes) != tc.limit || opts.Follow != tc.follow || opts.Previous != tc.previous {
				t.Errorf("options %+v, want tail %d limit %d follow %v previous %v", opts, tc.tail, tc.limit, tc.follow, tc.previous)
			}
		})
	}
}

func TestHandlerContainerLogs(t *testing.T) {
	var gotOpts *v1.PodLogOptions
	var gotKey string
	logs := func(_ context.Context, ns, pod, container string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
		gotKey, gotOpts = ns+"/"+pod+"/"+container, opts
		switch pod {
		case "missing":
			return errdefs.NotFoundf("pod %q does not exist", pod)
		case "waiting":
			return errdefs.InvalidInputf("container %q in pod %q is waiting to start", container, pod)
		}
		if stdout != nil {
			if _, err := io.WriteString(stdout, "out\n"); err != nil {
				return err
			}
		}
		if stderr != nil {
			if _, err := io.WriteString(stderr, "err\n"); err != nil {
				return err
			}
		}
		if pod == "broken" {
			return errors.New("log file vanished")
		}
		return nil
	}
	h := nodeAPI(logs, nil, nil, newFakeStreams().server(), nil, nil)
	for _, tc := range []struct {
		path, body string
		code       int
		flushed    bool
	}{
		{"/containerLogs/ns/p/c?tailLines=2&follow=true", "out\nerr\n", http.StatusOK, true},
		{"/containerLogs/ns/p/c?stream=Stdout", "out\n", http.StatusOK, true},
		{"/containerLogs/ns/p/c?stream=Stderr", "err\n", http.StatusOK, true},
		{"/containerLogs/ns/missing/c", "pod \"missing\" does not exist\n", http.StatusNotFound, false},
		{"/containerLogs/ns/waiting/c", "container \"c\" in pod \"waiting\" is waiting to start\n", http.StatusBadRequest, false},
		// An error once the log has started cannot change the status.
		{"/containerLogs/ns/broken/c", "out\nerr\n", http.StatusOK, true},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if w.Code != tc.code || w.Body.String() != tc.body || w.Flushed != tc.flushed {
			t.Errorf("%s: %d %q flushed %v, want %d %q flushed %v", tc.path, w.Code, w.Body.String(), w.Flushed, tc.code, tc.body, tc.flushed)
		}
	}
	if gotKey != "ns/broken/c" || gotOpts == nil {
		t.Errorf("last call got %q %+v", gotKey, gotOpts)
	}
}

// TestContainerLogs finds a container's log file through the engine's pod
// and the runtime's instances: unknown pod or container 404 (NotFound), no
// instance (or no previous one) 400 (InvalidInput), else the file's lines.
func TestContainerLogs(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "c", "1.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, []byte("2026-11-27T10:00:00.000000000Z stdout F hello\n2026-11-27T10:00:01.000000000Z stderr F oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"},
		Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "init"}}, Containers: []v1.Container{{Name: "c"}}}}
	running := &cri.PodStatus{Containers: []cri.ContainerStatus{
		{ID: "c1", Name: "c", Type: cri.ContainerTypeRegular, State: cri.StateExited, LogPath: logPath},
	}}
	// In CrashLoopBackOff: the newest instance, c1, is the status'
	// lastState (the one before it was garbage-collected).
	crashing := pod.DeepCopy()
	crashing.Name = "crash"
	crashing.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c",
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, ContainerID: "containerd://c1"}}}}
	// Running again: lastState names an instance the runtime no longer has.
	gone := pod.DeepCopy()
	gone.Name = "gone"
	gone.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c",
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, ContainerID: "containerd://c0"}}}}
	for _, tc := range []struct {
		name, pod, container string
		previous             bool
		status               fakePodStatus
		check                func(error) bool
		stdout, stderr       string
	}{
		{name: "unknown pod", pod: "q", container: "c", status: fakePodStatus{st: running}, check: errdefs.IsNotFound},
		{name: "unknown container", pod: "p", container: "nope", status: fakePodStatus{st: running}, check: errdefs.IsNotFound},
		{name: "not started", pod: "p", container: "init", status: fakePodStatus{st: running}, check: errdefs.IsInvalidInput},
		{name: "no previous", pod: "p", container: "c", previous: true, status: fakePodStatus{st: running}, check: errdefs.IsInvalidInput},
		{name: "runtime down", pod: "p", container: "c", status: fakePodStatus{err: errors.New("runtime down")},
			check: func(err error) bool { return err != nil && !errdefs.IsNotFound(err) }},
		{name: "the file", pod: "p", container: "c", status: fakePodStatus{st: running}, check: func(err error) bool { return err == nil },
			stdout: "hello\n", stderr: "oops\n"},
		{name: "previous in CrashLoopBackOff: the newest instance, as lastState names it", pod: "crash", container: "c", previous: true,
			status: fakePodStatus{st: running}, check: func(err error) bool { return err == nil }, stdout: "hello\n", stderr: "oops\n"},
		{name: "previous gone from the runtime", pod: "gone", container: "c", previous: true,
			status: fakePodStatus{st: running}, check: errdefs.IsInvalidInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := containerLogs{pods: fakeEngine{"ns/p": pod, "ns/crash": crashing, "ns/gone": gone}.PodByName, status: tc.status.GetPodStatus, follow: fakeRuntime{},
				clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC))}
			var stdout, stderr strings.Builder
			err := l.write(context.Background(), "ns", tc.pod, tc.container, &v1.PodLogOptions{Previous: tc.previous}, &stdout, &stderr)
			if !tc.check(err) || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Errorf("err %v, stdout %q, stderr %q; want stdout %q, stderr %q", err, stdout.String(), stderr.String(), tc.stdout, tc.stderr)
			}
		})
	}
}
