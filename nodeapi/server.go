package nodeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/cri/crilog"
	"github.com/crivk/crivk/lifecycle"
	"github.com/crivk/crivk/nodeapi/stats"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// Config is what the node API reads. Every field but Clock and
// KubeletConfig is required.
type Config struct {
	// Engine holds the pods the node runs: the targets of logs and streams,
	// and /runningpods/.
	Engine Engine
	// APIPods lists the API's pods bound to this node (/pods).
	APIPods func() ([]*v1.Pod, error)
	// PodStatus reads a pod's sandboxes and containers from the runtime.
	PodStatus PodStatusReader
	// Streams opens the runtime's exec, attach and port-forward streams
	// and runs /run's command.
	Streams StreamRuntime
	// LogFollow tells a followed log's reader whether its container still
	// runs.
	LogFollow crilog.StatusGetter
	// Stats is the node's statistics (package stats): /stats/summary,
	// /metrics/resource and /metrics/cadvisor. The node has one, whose
	// Summarize the eviction manager observes too: one set of volume
	// walks and CPU-rate samples per node.
	Stats stats.Handlers
	// Metrics serves GET /metrics (the agent's kubelet-named metrics) and
	// ProbeMetrics /metrics/probes (the prober's prober_probe_total); nil:
	// not served. Their scrapes are not logged.
	Metrics      http.Handler
	ProbeMetrics *ProbeMetrics
	// Clock dates the answers; nil: the real clock.
	Clock clock.PassiveClock
	// KubeletConfig is the effective configuration /configz serves
	// (configz.go); nil: /configz is not served.
	KubeletConfig func() *kubeletv1beta1.KubeletConfiguration
}

// Engine is what the node API reads of the pod engine.
type Engine interface {
	// PodByName returns the pod the engine runs under that name, with the
	// status it last generated, or nil.
	PodByName(namespace, name string) *v1.Pod
	// Pods returns every pod the engine runs.
	Pods() []*v1.Pod
}

// PodStatusReader reads a pod's state from the runtime.
type PodStatusReader interface {
	GetPodStatus(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error)
}

var (
	_ Engine              = (*lifecycle.Engine)(nil)
	_ PodStatusReader     = (*cri.Runtime)(nil)
	_ StreamRuntime       = cri.RuntimeService(nil)
	_ crilog.StatusGetter = cri.RuntimeService(nil)
)

// New returns the node API's handler (the routes of the package's doc):
// the kubelet's container logs, /pods, /runningpods/, /healthz, the
// streaming endpoints (streaming.go), /stats/summary, /metrics/resource
// and /metrics/cadvisor (package stats), /metrics and /metrics/probes, with the kubelet's query parameters, status codes and
// messages (pkg/kubelet/server). The other /stats/ paths answer 501 Not
// Implemented. It does not authenticate: the caller wraps it (Auth.Wrap).
func New(cfg Config) (http.Handler, error) {
	if cfg.Engine == nil || cfg.APIPods == nil || cfg.PodStatus == nil || cfg.Streams == nil || cfg.LogFollow == nil || cfg.Stats.Summary == nil {
		return nil, errors.New("node API: the engine, the API's pods, the pod status reader, the stream runtime, the log follower and the statistics are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	st := cfg.Stats
	streams := &streamServer{
		runtime: cfg.Streams,
		targets: runtimeTargets{pods: cfg.Engine.PodByName, status: cfg.PodStatus.GetPodStatus},
		proxy:   proxyStream,
	}
	logs := containerLogs{pods: cfg.Engine.PodByName, status: cfg.PodStatus.GetPodStatus, follow: cfg.LogFollow, clock: cfg.Clock}
	h := nodeAPI(logs.write, cfg.APIPods, func() ([]*v1.Pod, error) { return cfg.Engine.Pods(), nil }, streams, st.ResourceMetrics, st.Cadvisor)
	mux := http.NewServeMux()
	mux.Handle("GET /stats/summary", st.Summary)
	if cfg.KubeletConfig != nil {
		mux.Handle("/configz", configz{config: cfg.KubeletConfig})
	}
	mux.Handle("/", h)
	all := http.NewServeMux()
	all.Handle("/", logRequests(mux))
	if cfg.ProbeMetrics != nil {
		all.Handle("/metrics/probes", cfg.ProbeMetrics.Handler())
	}
	if cfg.Metrics != nil {
		all.Handle("GET /metrics", cfg.Metrics)
	}
	return all, nil
}

// logRequests logs each node API request with its answer's status code
// at debug level (the kubelet logs its requests at V(3)); an upgraded
// stream logs 101 when the upgrade is answered, before the session ends.
func logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		h.ServeHTTP(rec, r)
		log.G(r.Context()).WithField("method", r.Method).WithField("path", r.URL.Path).WithField("code", rec.code).
			WithField("remote", r.RemoteAddr).WithField("duration", time.Since(start)).Debug("node API request")
	})
}

// statusRecorder remembers the status code written through it and keeps
// the writer's Hijacker and Flusher (the stream proxy needs both).
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("the node API's response writer %T cannot be hijacked", s.ResponseWriter)
	}
	if s.code == 0 {
		s.code = http.StatusSwitchingProtocols
	}
	return h.Hijack()
}

// nodeAPI serves logs, the API's pods of the node (/pods) and the pods the
// node runs as it sees them (/runningpods/, the kubelet's debugging
// endpoint: crivk's engine's pods with their current status).
func nodeAPI(logs logSource, apiPods, runningPods func() ([]*v1.Pod, error), streams *streamServer, resource, cadvisor http.Handler) http.Handler {
	mux := http.NewServeMux()
	streams.register(mux)
	notImplemented := []string{"/stats/"}
	for path, h := range map[string]http.Handler{"/metrics/resource": resource, "/metrics/cadvisor": cadvisor} {
		if h != nil {
			mux.Handle("GET "+path, h)
		} else {
			notImplemented = append(notImplemented, path)
		}
	}
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		serveContainerLogs(w, r, logs)
	})
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) { servePods(w, r, apiPods) })
	mux.HandleFunc("GET /pods/", func(w http.ResponseWriter, r *http.Request) { servePods(w, r, apiPods) })
	mux.HandleFunc("GET /runningpods/", func(w http.ResponseWriter, r *http.Request) { servePods(w, r, runningPods) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	for _, prefix := range notImplemented {
		mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, fmt.Sprintf("%s is not implemented by crivk yet", r.URL.Path), http.StatusNotImplemented)
		})
	}
	return mux
}

func servePods(w http.ResponseWriter, r *http.Request, apiPods func() ([]*v1.Pod, error)) {
	pods, err := apiPods()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&list); err != nil {
		log.G(r.Context()).WithError(err).Warn("node API: writing /pods")
	}
}
