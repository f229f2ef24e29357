package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/crivk/crivk/nodestatus"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Handler is the node API (port 10250) that crivk serves: the kubelet's
// container logs, /pods, /runningpods/, /healthz and the streaming
// endpoints (exec, attach, portForward, run: streaming.go), with the
// kubelet's query parameters, status codes and messages
// (pkg/kubelet/server). apiPods lists the API's pods bound to this node
// (the informer's view, as the kubelet's /pods shows its pod manager's).
//
// /metrics/resource serves the kubelet's resource metrics
// (resourcemetrics.go) and /stats/summary its summary (summary.go); the
// other /stats/ paths answer 501 Not Implemented. virtual-kubelet's node/api is not used (it
// brings most of k8s.io/apiserver's HTTP stack into the binary).
func (p *Provider) Handler(apiPods func() ([]*v1.Pod, error)) http.Handler {
	streams := &streamServer{
		runtime: p.runtime.Services(),
		targets: runtimeTargets{pods: p.engine.PodByName, status: p.runtime.GetPodStatus},
		proxy:   proxyStream,
	}
	node := func() nodeUsage { return readNodeUsage(cgroupV1Root, time.Now()) }
	metrics := resourceMetrics{runtime: p.runtime.Services(), node: node}
	h := nodeAPI(p.GetContainerLogs, apiPods, func() ([]*v1.Pod, error) { return p.engine.Pods(), nil }, streams, metrics)
	mux := http.NewServeMux()
	mux.Handle("GET /stats/summary", summary{runtime: p.runtime.Services(), sandboxes: p.runtime.Services().ListPodSandboxStats, imageFs: p.runtime.ImageFsInfo, node: node, nodeName: p.nodeName,
		rootDir: p.rootDir, memCapacity: nodestatus.MemoryCapacity, started: time.Now(), volumes: newVolumeStats(p.rootDir)})
	mux.Handle("/", h)
	return logRequests(mux)
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

// logSource writes a container's log (Provider.GetContainerLogs).
type logSource func(ctx context.Context, namespace, pod, container string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error

// nodeAPI serves logs, the API's pods of the node (/pods) and the pods the
// node runs as it sees them (/runningpods/, the kubelet's debugging
// endpoint: crivk's engine's pods with their current status).
func nodeAPI(logs logSource, apiPods, runningPods func() ([]*v1.Pod, error), streams *streamServer, resource http.Handler) http.Handler {
	mux := http.NewServeMux()
	streams.register(mux)
	notImplemented := []string{"/stats/"}
	if resource != nil {
		mux.Handle("GET /metrics/resource", resource)
	} else {
		notImplemented = append(notImplemented, "/metrics/resource")
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

// logOptions decodes and validates the query of a container logs request
// as the kubelet does: "tail" is the old name of tailLines ("all": every
// line); undecodable queries are 400, invalid options 422.
func logOptions(r *http.Request) (*v1.PodLogOptions, int, error) {
	query := r.URL.Query()
	if tail := query.Get("tail"); tail != "" {
		query["tailLines"] = []string{tail}
		if tail == "all" {
			delete(query, "tailLines")
		}
	}
	opts, err := decodeLogOptions(query)
	if err != nil {
		return nil, http.StatusBadRequest, errors.New(`{"message": "Unable to decode query."}`)
	}
	invalid := (opts.TailLines != nil && *opts.TailLines < 0) ||
		(opts.LimitBytes != nil && *opts.LimitBytes < 1) ||
		(opts.SinceSeconds != nil && *opts.SinceSeconds < 1) ||
		(opts.SinceSeconds != nil && opts.SinceTime != nil)
	if opts.Stream != nil && *opts.Stream != v1.LogStreamAll && *opts.Stream != v1.LogStreamStdout && *opts.Stream != v1.LogStreamStderr {
		invalid = true
	}
	if invalid {
		return nil, http.StatusUnprocessableEntity, errors.New(`{"message": "Invalid request."}`)
	}
	return opts, 0, nil
}

func serveContainerLogs(w http.ResponseWriter, r *http.Request, logs logSource) {
	namespace, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, code, err := logOptions(r)
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	// One writer for both streams: it records whether anything was
	// written, after which an error can no longer change the status code.
	fw := &flushWriter{w: w}
	fw.f, _ = w.(http.Flusher)
	var stdout, stderr io.Writer = fw, fw
	if opts.Stream != nil {
		switch *opts.Stream {
		case v1.LogStreamStdout:
			stderr = nil
		case v1.LogStreamStderr:
			stdout = nil
		}
	}
	if err := logs(r.Context(), namespace, pod, container, opts, stdout, stderr); err != nil {
		if fw.started {
			// Part of the log is out: the status line is gone.
			log.G(r.Context()).WithError(err).WithField("pod", namespace+"/"+pod).WithField("container", container).Warn("node API: log stream ended with an error")
			return
		}
		code := http.StatusBadRequest
		if errdefs.IsNotFound(err) {
			code = http.StatusNotFound
		}
		http.Error(w, err.Error(), code)
	}
}

// flushWriter flushes after every write so that followed logs arrive line
// by line, as the kubelet's flushwriter.
type flushWriter struct {
	w       io.Writer
	f       http.Flusher
	started bool
}

func (fw *flushWriter) Write(b []byte) (int, error) {
	fw.started = true
	n, err := fw.w.Write(b)
	if fw.f != nil {
		fw.f.Flush()
	}
	return n, err
}

// decodeLogOptions reads PodLogOptions from a query as the API's parameter
// codec does (client-go's scheme has no url.Values conversion for it):
// booleans and integers by strconv, sinceTime as RFC 3339.
func decodeLogOptions(q url.Values) (*v1.PodLogOptions, error) {
	opts := &v1.PodLogOptions{Container: q.Get("container")}
	var err error
	boolean := func(name string, dst *bool) {
		if v := q.Get(name); v != "" && err == nil {
			*dst, err = strconv.ParseBool(v)
		}
	}
	integer := func(name string) *int64 {
		v := q.Get(name)
		if v == "" || err != nil {
			return nil
		}
		var n int64
		n, err = strconv.ParseInt(v, 10, 64)
		return &n
	}
	boolean("follow", &opts.Follow)
	boolean("previous", &opts.Previous)
	boolean("timestamps", &opts.Timestamps)
	boolean("insecureSkipTLSVerifyBackend", &opts.InsecureSkipTLSVerifyBackend)
	opts.SinceSeconds = integer("sinceSeconds")
	opts.TailLines = integer("tailLines")
	opts.LimitBytes = integer("limitBytes")
	if v := q.Get("sinceTime"); v != "" && err == nil {
		var t time.Time
		if t, err = time.Parse(time.RFC3339, v); err == nil {
			opts.SinceTime = &metav1.Time{Time: t}
		}
	}
	if v := q.Get("stream"); v != "" {
		opts.Stream = &v
	}
	return opts, err
}
