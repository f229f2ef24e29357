package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The streaming endpoints of the node API (exec, attach, portForward, run)
// work as the kubelet v1.35's with a CRI runtime that serves its own
// streams (pkg/kubelet/server/server.go getExec/getAttach/getPortForward,
// proxyStream):
//
//	client ──(API server: SPDY or WebSocket)──> crivk /exec/ns/pod/ctr?command=..
//	   1. the request is parsed (streamOptions, portForwardPorts): 400 on bad input
//	   2. the pod and its running container (or sandbox) are found: 404 if not
//	   3. the runtime is asked for a stream URL (CRI Exec/Attach/PortForward);
//	      its gRPC code maps to the HTTP status (NotFound 404,
//	      ResourceExhausted 429 with Retry-After, others 500)
//	   4. the upgraded connection is proxied to containerd's stream server
//	      (k8s.io/apimachinery's UpgradeAwareHandler), which speaks SPDY
//	      v1-v4 and the legacy WebSocket channel protocols itself.
//
// crivk never terminates the stream protocol: stdin, tty, resize and the
// exit status travel between the client and the runtime untouched.

// Query parameters of the streaming endpoints as the API server sends them
// to a node: input/output/error/tty, not the stdin/stdout/stderr of the
// user-facing PodExecOptions; port for portForward over WebSockets.
const (
	queryStdin   = v1.ExecStdinParam
	queryStdout  = v1.ExecStdoutParam
	queryStderr  = v1.ExecStderrParam
	queryTTY     = v1.ExecTTYParam
	queryCommand = v1.ExecCommandParam
	queryPort    = v1.PortHeader
	// queryRunCmd is /run's command, split on spaces (a legacy of the
	// kubelet's run endpoint).
	queryRunCmd = "cmd"
)

// streamRetryAfter is the Retry-After of a 429: the kubelet waits its stream
// cache's TTL (1 minute) before a runtime's request slots free up.
const streamRetryAfter = time.Minute

// StreamRuntime is what the streaming endpoints ask of the runtime
// (cri.RuntimeService implements it): a stream URL for exec, attach and
// port-forward, and ExecSync for /run (an error on a non-zero exit).
type StreamRuntime interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// streamTargets finds what a streaming request refers to. Both return
// errNotFound (wrapped, with a message for the client) when the pod, its
// container or its sandbox is not running on this node.
type streamTargets interface {
	// Container returns the runtime ID of the running container name of
	// the pod and its spec. uid, when not empty, must be the pod's UID.
	Container(ctx context.Context, namespace, pod string, uid types.UID, name string) (id string, spec *v1.Container, err error)
	// Sandbox returns the runtime ID of the pod's ready sandbox.
	Sandbox(ctx context.Context, namespace, pod string, uid types.UID) (id string, err error)
}

// errNotFound marks an unknown pod, container or sandbox: 404.
var errNotFound = errors.New("not found")

// errBadRequest marks undecodable or invalid query parameters: 400.
var errBadRequest = errors.New("bad request")

// streamOptions are the streams a client asks for (the kubelet's
// remotecommand.NewOptions): tty with stderr drops stderr (a terminal has
// one output stream); at least one stream is required.
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

func parseStreamOptions(r *http.Request) (streamOptions, error) {
	q := r.URL.Query()
	o := streamOptions{
		stdin:  q.Get(queryStdin) == "1",
		stdout: q.Get(queryStdout) == "1",
		stderr: q.Get(queryStderr) == "1",
		tty:    q.Get(queryTTY) == "1",
	}
	if o.tty && o.stderr {
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, fmt.Errorf("%w: you must specify at least 1 of stdin, stdout, stderr", errBadRequest)
	}
	return o, nil
}

// parsePorts returns the ports of a portForward request. Over SPDY the
// client names each port in its streams' headers, so the query may carry
// none; over WebSockets the query's "port" values (each possibly a comma
// list) are the ports, at least one, each in 1..65535.
func parsePorts(r *http.Request) ([]int32, error) {
	values := r.URL.Query()[queryPort]
	if len(values) == 0 {
		if isWebSocket(r) {
			return nil, fmt.Errorf("%w: query parameter %q is required", errBadRequest, queryPort)
		}
		return nil, nil
	}
	var ports []int32
	for _, v := range values {
		if v == "" {
			return nil, fmt.Errorf("%w: query parameter %q cannot be empty", errBadRequest, queryPort)
		}
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("%w: unable to parse %q as a port", errBadRequest, v)
			}
			if n < 1 {
				return nil, fmt.Errorf("%w: port %q must be > 0", errBadRequest, v)
			}
			ports = append(ports, int32(n))
		}
	}
	return ports, nil
}

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// streamServer serves the streaming endpoints.
type streamServer struct {
	runtime StreamRuntime
	targets streamTargets
	// proxy hands the upgraded request to the runtime's stream URL;
	// proxyStream outside tests.
	proxy func(w http.ResponseWriter, r *http.Request, to *url.URL)
}

func (s *streamServer) register(mux *http.ServeMux) {
	for _, p := range []string{"/exec/{namespace}/{pod}/{container}", "/exec/{namespace}/{pod}/{uid}/{container}"} {
		mux.HandleFunc("GET "+p, s.serveExec)
		mux.HandleFunc("POST "+p, s.serveExec)
	}
	for _, p := range []string{"/attach/{namespace}/{pod}/{container}", "/attach/{namespace}/{pod}/{uid}/{container}"} {
		mux.HandleFunc("GET "+p, s.serveAttach)
		mux.HandleFunc("POST "+p, s.serveAttach)
	}
	for _, p := range []string{"/portForward/{namespace}/{pod}", "/portForward/{namespace}/{pod}/{uid}"} {
		mux.HandleFunc("GET "+p, s.servePortForward)
		mux.HandleFunc("POST "+p, s.servePortForward)
	}
	mux.HandleFunc("POST /run/{namespace}/{pod}/{container}", s.serveRun)
	mux.HandleFunc("POST /run/{namespace}/{pod}/{uid}/{container}", s.serveRun)
}

func (s *streamServer) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := parseStreamOptions(r)
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	cmd := r.URL.Query()[queryCommand]
	if len(cmd) == 0 {
		writeStreamError(w, r, fmt.Errorf("%w: query parameter %q is required", errBadRequest, queryCommand))
		return
	}
	id, _, err := s.container(r)
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	resp, err := s.runtime.Exec(r.Context(), &runtimeapi.ExecRequest{
		ContainerId: id, Cmd: cmd, Tty: opts.tty, Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr,
	})
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	s.proxyTo(w, r, resp.GetUrl())
}

func (s *streamServer) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := parseStreamOptions(r)
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	id, spec, err := s.container(r)
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	// Whether the process runs on a terminal was fixed when it started:
	// attach takes the container's tty, not the client's (the kubelet's
	// GetAttach).
	resp, err := s.runtime.Attach(r.Context(), &runtimeapi.AttachRequest{
		ContainerId: id, Tty: spec.TTY, Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr,
	})
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	s.proxyTo(w, r, resp.GetUrl())
}

func (s *streamServer) servePortForward(w http.ResponseWriter, r *http.Request) {
	ports, err := parsePorts(r)
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	id, err := s.targets.Sandbox(r.Context(), r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	resp, err := s.runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: id, Port: ports})
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	s.proxyTo(w, r, resp.GetUrl())
}

// serveRun runs cmd (split on spaces) to completion and answers its
// combined stdout and stderr, as the kubelet's /run.
func (s *streamServer) serveRun(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get(queryRunCmd)
	if strings.TrimSpace(raw) == "" {
		writeStreamError(w, r, fmt.Errorf("%w: query parameter %q is required", errBadRequest, queryRunCmd))
		return
	}
	id, _, err := s.container(r)
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	// A command that exits non-zero is an error (500), as on the kubelet.
	stdout, stderr, err := s.runtime.ExecSync(r.Context(), id, strings.Split(raw, " "), 0)
	if err != nil {
		writeStreamError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(stdout, stderr...))
}

func (s *streamServer) container(r *http.Request) (string, *v1.Container, error) {
	return s.targets.Container(r.Context(), r.PathValue("namespace"), r.PathValue("pod"),
		types.UID(r.PathValue("uid")), r.PathValue("container"))
}

func (s *streamServer) proxyTo(w http.ResponseWriter, r *http.Request, raw string) {
	to, err := url.Parse(raw)
	if err != nil || to.Host == "" {
		writeStreamError(w, r, fmt.Errorf("the runtime answered an invalid stream URL %q", raw))
		return
	}
	s.proxy(w, r, to)
}

// proxyStream proxies the upgraded connection to the runtime's stream URL,
// as the kubelet's proxyStream.
func proxyStream(w http.ResponseWriter, r *http.Request, to *url.URL) {
	h := proxy.NewUpgradeAwareHandler(to, nil, false, true, proxyResponder{})
	h.ServeHTTP(w, r)
}

type proxyResponder struct{}

func (proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	log.G(r.Context()).WithError(err).WithField("path", r.URL.Path).Warn("node API: proxying a stream")
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// writeStreamError answers err with the kubelet's status code: 400 for
// bad input, 404 for what does not exist, the runtime's gRPC code mapped
// as the kubelet's streaming.WriteError (NotFound 404, ResourceExhausted
// 429 with Retry-After), 500 otherwise.
func writeStreamError(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errBadRequest):
		code = http.StatusBadRequest
	case errors.Is(err, errNotFound):
		code = http.StatusNotFound
	default:
		// grpc's Code finds a status wrapped anywhere in err's chain
		// (cri's callError wraps it with the call's name).
		switch grpcstatus.Code(err) {
		case codes.NotFound:
			code = http.StatusNotFound
		case codes.ResourceExhausted:
			w.Header().Set("Retry-After", strconv.Itoa(int(streamRetryAfter.Seconds())))
			code = http.StatusTooManyRequests
		}
	}
	if code == http.StatusInternalServerError {
		log.G(r.Context()).WithError(err).WithField("path", r.URL.Path).Warn("node API: streaming request failed")
	}
	http.Error(w, err.Error(), code)
}

// runtimeTargets resolves streaming targets through the engine's pods and
// the runtime's view of them.
type runtimeTargets struct {
	pods   func(namespace, name string) *v1.Pod
	status func(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error)
}

func (t runtimeTargets) pod(namespace, name string, uid types.UID) (*v1.Pod, error) {
	pod := t.pods(namespace, name)
	if pod == nil || (uid != "" && pod.UID != uid) {
		return nil, fmt.Errorf("%w: pod %s/%s does not exist", errNotFound, namespace, name)
	}
	return pod, nil
}

func (t runtimeTargets) Container(ctx context.Context, namespace, name string, uid types.UID, container string) (string, *v1.Container, error) {
	pod, err := t.pod(namespace, name, uid)
	if err != nil {
		return "", nil, err
	}
	spec, typ := containerSpec(pod, container)
	if spec == nil {
		return "", nil, fmt.Errorf("%w: container %q not found in pod %s/%s", errNotFound, container, namespace, name)
	}
	st, err := t.status(ctx, cri.RefOf(pod))
	if err != nil {
		return "", nil, fmt.Errorf("reading pod %s/%s from the runtime: %w", namespace, name, err)
	}
	c := st.Latest(container, typ)
	if c == nil || c.State != cri.StateRunning {
		return "", nil, fmt.Errorf("%w: container %q in pod %s/%s is not running", errNotFound, container, namespace, name)
	}
	return c.ID, spec, nil
}

func (t runtimeTargets) Sandbox(ctx context.Context, namespace, name string, uid types.UID) (string, error) {
	pod, err := t.pod(namespace, name, uid)
	if err != nil {
		return "", err
	}
	st, err := t.status(ctx, cri.RefOf(pod))
	if err != nil {
		return "", fmt.Errorf("reading pod %s/%s from the runtime: %w", namespace, name, err)
	}
	for _, sb := range st.Sandboxes {
		if sb.Ready {
			return sb.ID, nil
		}
	}
	return "", fmt.Errorf("%w: pod %s/%s has no running sandbox", errNotFound, namespace, name)
}

// containerSpec returns the spec of the pod's container (regular or init)
// called name and its runtime type, or nil.
func containerSpec(pod *v1.Pod, name string) (*v1.Container, cri.ContainerType) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], cri.ContainerTypeRegular
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], cri.ContainerTypeInit
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon), cri.ContainerTypeEphemeral
		}
	}
	return nil, ""
}
