package cri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fakeRecorder keeps events as "type reason message".
type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *fakeRecorder) Eventf(_ runtime.Object, typ, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, typ+" "+reason+" "+fmt.Sprintf(format, args...))
}

func (r *fakeRecorder) has(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func hookFixture(t *testing.T) (*syncFixture, *fakeRecorder) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	f.rt.clock = f.clock
	rec := &fakeRecorder{}
	f.rt.recorder = rec
	return f, rec
}

// startKill runs kill (a KillPod, or a SyncPod that stops containers) in a
// goroutine, so that the test can step the fake clock its timers wait on,
// and returns killed, which waits for it: killed fails the test with kill's
// error, or with notKilled when kill has not returned within 5 s of real
// time after the steps.
func startKill(t *testing.T, kill func() error) (killed func(notKilled string)) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- kill() }()
	return func(notKilled string) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal(notKilled)
		}
	}
}

func execHandler(cmd ...string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func TestPostStartHook(t *testing.T) {
	tests := map[string]struct {
		execErr     error
		wantStarted bool
	}{
		"success: the container runs":                    {wantStarted: true},
		"failure: the container is killed with a reason": {execErr: errors.New("command 'false' exited with 1: oops")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, rec := hookFixture(t)
			f.rs.exec = func(string, []string) ([]byte, []byte, error) { return []byte("out"), nil, tc.execErr }
			c := image("a", "busybox:1.36")
			c.ImagePullPolicy = v1.PullIfNotPresent
			c.Lifecycle = &v1.Lifecycle{PostStart: execHandler("false")}
			pod := syncPod(v1.RestartPolicyAlways, c)
			res, _ := f.sync(t, pod)
			if len(f.rs.execs) != 1 || f.rs.execs[0][0] != "false" {
				t.Fatalf("exec calls %v, want the hook's command once", f.rs.execs)
			}
			started := len(res.Started) == 1
			if started != tc.wantStarted {
				t.Fatalf("started %v, want %v (result %+v)", res.Started, tc.wantStarted, res)
			}
			if !rec.has("Normal Created Created container: a") || !rec.has("Normal Started Started container a") {
				t.Errorf("events %v lack Created/Started", rec.events)
			}
			stops := f.rs.stopTimeouts()
			if tc.wantStarted {
				if len(stops) != 0 || res.Error() != nil {
					t.Errorf("stops %v, error %v; want none", stops, res.Error())
				}
				return
			}
			w := res.Waiting["a"]
			wantMsg := `Exec lifecycle hook ([false]) for Container "a" in Pod "web_prod(uid-1)" failed - error: command 'false' exited with 1: oops, message: "out"`
			if w.Reason != ReasonPostStartHookError || w.Message != wantMsg {
				t.Errorf("waiting %+v, want %s %q", w, ReasonPostStartHookError, wantMsg)
			}
			if len(stops) != 1 {
				t.Errorf("stops %v, want the container stopped", stops)
			}
			if !rec.has("Warning FailedPostStartHook "+wantMsg) || !rec.has("Normal Killing FailedPostStartHook") {
				t.Errorf("events %v lack FailedPostStartHook and Killing", rec.events)
			}
		})
	}
}

func TestPreStopHook(t *testing.T) {
	tests := map[string]struct {
		hook      *v1.LifecycleHandler
		step      time.Duration // fake time that passes while the hook runs
		wantGrace int64
		wantEvent string
	}{
		"exec hook then the full grace":     {hook: execHandler("sh", "-c", "sleep 1"), wantGrace: 30},
		"sleep hook uses part of the grace": {hook: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 5}}, step: 5 * time.Second, wantGrace: 25},
		// As the kubelet's executePreStopHook, the hook is not cancelled at
		// the end of the grace: the sleep goes on (no failure), an exec
		// hook until the stop kills its container.
		"a hook longer than the grace leaves the minimum": {hook: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 100}}, step: 30 * time.Second, wantGrace: minGracePeriod},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, rec := hookFixture(t)
			c := image("a", "busybox:1.36")
			c.ImagePullPolicy = v1.PullIfNotPresent
			c.Lifecycle = &v1.Lifecycle{PreStop: tc.hook}
			pod := syncPod(v1.RestartPolicyAlways, c)
			if res, _ := f.sync(t, pod); res.Error() != nil {
				t.Fatal(res.Error())
			}
			st := f.status(t, pod)
			killed := startKill(t, func() error { return f.rt.KillPod(context.Background(), pod, st, 30) })
			if tc.step > 0 {
				// The hook's timer and the grace timer.
				waitFor(t, "the hook's and the grace timers", func() bool { return f.clock.Waiters() >= 2 })
				f.clock.Step(tc.step)
			}
			killed("KillPod did not return")
			for id, g := range f.rs.stopTimeouts() {
				if g != tc.wantGrace {
					t.Errorf("container %s stopped with grace %d, want %d", id, g, tc.wantGrace)
				}
			}
			if !rec.has("Normal Killing Stopping container a") {
				t.Errorf("events %v lack Killing", rec.events)
			}
			if tc.wantEvent != "" {
				waitFor(t, "event "+tc.wantEvent, func() bool { return rec.has(tc.wantEvent) })
			}
			if tc.wantGrace == minGracePeriod {
				// The hook outlived the grace and still runs: it was not
				// cut short, so it did not fail; it ends on its own.
				if rec.has("Warning FailedPreStopHook PreStopHook failed") {
					t.Errorf("events %v: the hook was cancelled at the end of the grace", rec.events)
				}
				waitFor(t, "the hook's own timer", func() bool { return f.clock.Waiters() >= 1 })
				f.clock.Step(70 * time.Second)
			}
		})
	}
}

// An exec preStop hook that outlives the grace fails when the container's
// stop ends it, with the kubelet's event.
func TestPreStopExecHookOutlivesTheGrace(t *testing.T) {
	f, rec := hookFixture(t)
	release := make(chan struct{})
	hookCtx := make(chan context.Context, 1)
	f.rs.execCtx = func(ctx context.Context) { hookCtx <- ctx }
	f.rs.exec = func(string, []string) ([]byte, []byte, error) {
		<-release
		return nil, nil, errors.New("command terminated with exit code 137")
	}
	c := image("a", "busybox:1.36")
	c.ImagePullPolicy = v1.PullIfNotPresent
	c.Lifecycle = &v1.Lifecycle{PreStop: execHandler("sh", "-c", "while true; do sleep 1; done")}
	pod := syncPod(v1.RestartPolicyAlways, c)
	if res, _ := f.sync(t, pod); res.Error() != nil {
		t.Fatal(res.Error())
	}
	st := f.status(t, pod)
	killed := startKill(t, func() error { return f.rt.KillPod(context.Background(), pod, st, 30) })
	waitFor(t, "the grace timer", func() bool { return f.clock.Waiters() >= 1 })
	f.clock.Step(30 * time.Second)
	killed("KillPod did not return")
	for id, g := range f.rs.stopTimeouts() {
		if g != minGracePeriod {
			t.Errorf("container %s stopped with grace %d, want %d", id, g, minGracePeriod)
		}
	}
	if err := (<-hookCtx).Err(); err != nil {
		t.Errorf("the hook's exec was cancelled (%v) at the end of the grace: it must run until the stop ends it", err)
	}
	if rec.has("Warning FailedPreStopHook PreStopHook failed") {
		t.Errorf("events %v: FailedPreStopHook before the hook ended", rec.events)
	}
	close(release) // the stop killed the container: its exec ends
	waitFor(t, "FailedPreStopHook", func() bool { return rec.has("Warning FailedPreStopHook PreStopHook failed") })
}

func TestHTTPHook(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.Header.Get("X-Test")+" "+r.UserAgent())
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError) // the status code is not checked
	}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	f, _ := hookFixture(t)
	c := &v1.Container{Name: "a", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	pod := syncPod(v1.RestartPolicyAlways, *c)
	tests := map[string]struct {
		get     v1.HTTPGetAction
		podIPs  []string
		wantErr string
	}{
		"named port, pod IP as host": {get: v1.HTTPGetAction{Path: "/start", Port: intstr.FromString("web"),
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Test", Value: "yes"}}}, podIPs: []string{host}},
		"explicit host and numeric port": {get: v1.HTTPGetAction{Host: host, Path: "stop", Port: intstr.FromInt32(int32(port))}},
		"unknown named port":             {get: v1.HTTPGetAction{Port: intstr.FromString("nope")}, podIPs: []string{host}, wantErr: "couldn't find port"},
		"nothing listening":              {get: v1.HTTPGetAction{Host: host, Port: intstr.FromInt32(1)}, wantErr: "connection refused"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			msg, err := f.rt.runHook(context.Background(), pod, c, "id", tc.podIPs, &v1.LifecycleHandler{HTTPGet: &tc.get})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(msg, "HTTP lifecycle hook (") {
					t.Errorf("error %v, message %q; want %q", err, msg, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/start yes " + hookUserAgent, "/stop  " + hookUserAgent}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests %q, want %q", got, want)
	}
}
