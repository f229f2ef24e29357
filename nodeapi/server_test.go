package nodeapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/nodeapi/stats"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeEngine holds the engine's pods by namespace/name.
type fakeEngine map[string]*v1.Pod

func (e fakeEngine) PodByName(namespace, name string) *v1.Pod { return e[namespace+"/"+name] }
func (e fakeEngine) Pods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range e {
		out = append(out, p)
	}
	return out
}

// fakePodStatus answers every pod with st (or err).
type fakePodStatus struct {
	st  *cri.PodStatus
	err error
}

func (f fakePodStatus) GetPodStatus(context.Context, cri.PodRef) (*cri.PodStatus, error) {
	return f.st, f.err
}

// fakeRuntime is the runtime's service as the log follower and the
// statistics see it: no container runs, no stats.
type fakeRuntime struct{}

func (fakeRuntime) ContainerStatus(context.Context, string, bool) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED}}, nil
}

func (fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return nil, nil
}

func (fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return nil, nil
}

func (fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, nil
}

func (fakeRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func testConfig(t *testing.T) Config {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	st, err := stats.New(stats.Config{NodeName: "n1", RootDir: t.TempDir(), Runtime: fakeRuntime{}, ImageFs: fakeRuntime{},
		MemoryCapacity: func() (int64, error) { return 1 << 30, nil }, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Engine:    fakeEngine{"ns/p": pod},
		APIPods:   func() ([]*v1.Pod, error) { return []*v1.Pod{pod}, nil },
		PodStatus: fakePodStatus{st: &cri.PodStatus{}}, Streams: newFakeStreams(), LogFollow: fakeRuntime{},
		Stats: st, Clock: clk,
	}
}

// TestNewRequiresItsInputs: a Config without one of the required fields
// is refused with an error, not a handler that panics at its first request.
func TestNewRequiresItsInputs(t *testing.T) {
	for name, drop := range map[string]func(*Config){
		"engine":       func(c *Config) { c.Engine = nil },
		"API pods":     func(c *Config) { c.APIPods = nil },
		"pod status":   func(c *Config) { c.PodStatus = nil },
		"streams":      func(c *Config) { c.Streams = nil },
		"log follower": func(c *Config) { c.LogFollow = nil },
		"stats":        func(c *Config) { c.Stats = stats.Handlers{} },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			drop(&cfg)
			if h, err := New(cfg); err == nil || h != nil {
				t.Errorf("New without the %s: %v, %v; want an error", name, h, err)
			}
		})
	}
}

// TestNewRoutes: the handler New builds serves every route of the
// package's doc with the stats of package stats; other /stats/ paths are
// 501 and unknown paths 404.
func TestNewRoutes(t *testing.T) {
	h, err := New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		code         int
		body         string // a part of the answer
	}{
		{"GET", "/healthz", http.StatusOK, "ok"},
		{"GET", "/pods", http.StatusOK, `"kind":"PodList"`},
		{"GET", "/runningpods/", http.StatusOK, `"uid":"u"`},
		{"GET", "/stats/summary", http.StatusOK, `"nodeName":"n1"`},
		{"GET", "/metrics/resource", http.StatusOK, "resource_scrape_error 0"},
		{"GET", "/stats/container", http.StatusNotImplemented, "not implemented by crivk yet"},
		{"POST", "/stats/summary", http.StatusNotImplemented, "not implemented by crivk yet"},
		{"GET", "/containerLogs/ns/p/nope", http.StatusNotFound, `container "nope" not found in pod "p"`},
		{"GET", "/containerLogs/ns/p/c", http.StatusBadRequest, "waiting to start"},
		{"POST", "/exec/ns/p/c?command=ls&output=1", http.StatusNotFound, `container "c" in pod ns/p is not running`},
		{"GET", "/run/ns/p/c?cmd=ls", http.StatusMethodNotAllowed, ""},
		{"GET", "/nothing", http.StatusNotFound, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("%d %q, want %d with %q", w.Code, w.Body.String(), tc.code, tc.body)
			}
		})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/stats/summary", nil))
	var s statsapi.Summary
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil || !s.Node.StartTime.Equal(&metav1.Time{Time: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}) {
		t.Errorf("summary %+v (%v): want the node started at the clock's time", s.Node, err)
	}
}

func TestHandlerRoutes(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	running := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "running"}}
	h := nodeAPI(nil, func() ([]*v1.Pod, error) { return []*v1.Pod{pod}, nil }, func() ([]*v1.Pod, error) { return []*v1.Pod{running}, nil }, newFakeStreams().server(), nil, nil)
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body := get("/pods")
	var list v1.PodList
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || list.Kind != "PodList" ||
		len(list.Items) != 1 || list.Items[0].UID != "u" {
		t.Errorf("/pods: %d %q", code, body)
	}
	code, body = get("/runningpods/")
	list = v1.PodList{}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 1 || list.Items[0].UID != "running" {
		t.Errorf("/runningpods/: %d %q", code, body)
	}
	for _, path := range []string{"/stats/summary", "/metrics/resource"} {
		if code, body := get(path); code != http.StatusNotImplemented || !strings.Contains(body, "not implemented by crivk yet") {
			t.Errorf("%s: %d %q, want 501", path, code, body)
		}
	}
	if code, body := get("/containerLogs/ns/p/c?tailLines=-2"); code != http.StatusUnprocessableEntity {
		t.Errorf("invalid log options: %d %q, want 422", code, body)
	}
	if code, _ := get("/nothing"); code != http.StatusNotFound {
		t.Errorf("/nothing: %d, want 404", code)
	}
}

// TestNewServesMetrics: the node API's mux has /metrics and
// /metrics/probes too, when given.
func TestNewServesMetrics(t *testing.T) {
	cfg := testConfig(t)
	cfg.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("agent_metric 1\n")) })
	cfg.ProbeMetrics = NewProbeMetrics()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/metrics": http.StatusOK, "/metrics/probes": http.StatusOK} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
		if path == "/metrics" && !strings.Contains(rec.Body.String(), "agent_metric 1") {
			t.Errorf("GET /metrics: %q, want the agent's metrics", rec.Body.String())
		}
	}
}
