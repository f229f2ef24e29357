package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeStreams records what the streaming endpoints asked of the runtime
// and where they proxied.
type fakeStreams struct {
	execs    []*runtimeapi.ExecRequest
	attaches []*runtimeapi.AttachRequest
	forwards []*runtimeapi.PortForwardRequest
	runs     [][]string
	proxied  []string
	err      error  // returned by the runtime's stream calls
	url      string // the stream URL the runtime answers
	runOut   string
}

func newFakeStreams() *fakeStreams { return &fakeStreams{url: "http://127.0.0.1:4242/exec/token"} }

func (f *fakeStreams) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	f.execs = append(f.execs, req)
	return &runtimeapi.ExecResponse{Url: f.url}, f.err
}

func (f *fakeStreams) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	f.attaches = append(f.attaches, req)
	return &runtimeapi.AttachResponse{Url: f.url}, f.err
}

func (f *fakeStreams) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	f.forwards = append(f.forwards, req)
	return &runtimeapi.PortForwardResponse{Url: f.url}, f.err
}

func (f *fakeStreams) ExecSync(_ context.Context, _ string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	f.runs = append(f.runs, cmd)
	return []byte(f.runOut), nil, f.err
}

// fakeTargets knows pod ns/p (uid u) with container c running as cid,
// container tty (a terminal) running as tid, and sandbox sid.
type fakeTargets struct{}

func (fakeTargets) Container(_ context.Context, ns, pod string, uid types.UID, name string) (string, *v1.Container, error) {
	if ns != "ns" || pod != "p" || (uid != "" && uid != "u") {
		return "", nil, fmt.Errorf("%w: pod %s/%s does not exist", errNotFound, ns, pod)
	}
	switch name {
	case "c":
		return "cid", &v1.Container{Name: "c"}, nil
	case "tty":
		return "tid", &v1.Container{Name: "tty", TTY: true}, nil
	}
	return "", nil, fmt.Errorf("%w: container %q not found", errNotFound, name)
}

func (fakeTargets) Sandbox(_ context.Context, ns, pod string, uid types.UID) (string, error) {
	if ns != "ns" || pod != "p" || (uid != "" && uid != "u") {
		return "", fmt.Errorf("%w: pod %s/%s does not exist", errNotFound, ns, pod)
	}
	return "sid", nil
}

func (f *fakeStreams) server() *streamServer {
	return &streamServer{runtime: f, targets: fakeTargets{}, proxy: func(w http.ResponseWriter, _ *http.Request, to *url.URL) {
		f.proxied = append(f.proxied, to.String())
		w.WriteHeader(http.StatusSwitchingProtocols)
	}}
}

func TestStreamingEndpoints(t *testing.T) {
	wantExec := &runtimeapi.ExecRequest{ContainerId: "cid", Cmd: []string{"sh", "-c", "exit 3"}, Stdin: true, Stdout: true, Stderr: true}
	for _, tc := range []struct {
		name, method, path string
		runtimeErr         error
		code               int
		body               string // substring of the answer
		check              func(t *testing.T, f *fakeStreams)
	}{
		{name: "exec", method: "POST", path: "/exec/ns/p/c?command=sh&command=-c&command=exit+3&input=1&output=1&error=1", code: 101,
			check: func(t *testing.T, f *fakeStreams) {
				if len(f.execs) != 1 || !reflect.DeepEqual(f.execs[0], wantExec) {
					t.Errorf("exec request %v, want %v", f.execs, wantExec)
				}
			}},
		{name: "exec with uid", method: "GET", path: "/exec/ns/p/u/c?command=ls&output=1", code: 101},
		{name: "exec tty drops stderr", method: "POST", path: "/exec/ns/p/c?command=sh&input=1&output=1&error=1&tty=1", code: 101,
			check: func(t *testing.T, f *fakeStreams) {
				if r := f.execs[0]; !r.Tty || r.Stderr || !r.Stdout || !r.Stdin {
					t.Errorf("exec request %v, want tty without stderr", r)
				}
			}},
		{name: "exec without streams", method: "POST", path: "/exec/ns/p/c?command=ls", code: 400, body: "at least 1 of stdin, stdout, stderr"},
		{name: "exec without command", method: "POST", path: "/exec/ns/p/c?output=1", code: 400, body: `"command" is required`},
		{name: "exec unknown pod", method: "POST", path: "/exec/ns/nope/c?command=ls&output=1", code: 404, body: "does not exist"},
		{name: "exec wrong uid", method: "POST", path: "/exec/ns/p/other/c?command=ls&output=1", code: 404},
		{name: "exec unknown container", method: "POST", path: "/exec/ns/p/x?command=ls&output=1", code: 404, body: `container "x"`},
		{name: "exec runtime not found", method: "POST", path: "/exec/ns/p/c?command=ls&output=1",
			runtimeErr: fmt.Errorf("Exec cid: %w", grpcstatus.Error(codes.NotFound, "container gone")), code: 404, body: "container gone"},
		{name: "exec runtime exhausted", method: "POST", path: "/exec/ns/p/c?command=ls&output=1",
			runtimeErr: grpcstatus.Error(codes.ResourceExhausted, "maximum number of in-flight requests exceeded"), code: 429},
		{name: "exec runtime failure", method: "POST", path: "/exec/ns/p/c?command=ls&output=1", runtimeErr: errors.New("boom"), code: 500},
		{name: "attach takes the container's tty", method: "POST", path: "/attach/ns/p/tty?input=1&output=1", code: 101,
			check: func(t *testing.T, f *fakeStreams) {
				if r := f.attaches[0]; r.ContainerId != "tid" || !r.Tty || !r.Stdin || !r.Stdout {
					t.Errorf("attach request %v", r)
				}
			}},
		{name: "attach not a terminal", method: "GET", path: "/attach/ns/p/c?output=1&tty=1", code: 101,
			check: func(t *testing.T, f *fakeStreams) {
				if r := f.attaches[0]; r.Tty {
					t.Errorf("attach request %v: tty of a container without one", r)
				}
			}},
		{name: "portForward spdy", method: "POST", path: "/portForward/ns/p", code: 101,
			check: func(t *testing.T, f *fakeStreams) {
				if r := f.forwards[0]; r.PodSandboxId != "sid" || len(r.Port) != 0 {
					t.Errorf("port-forward request %v", r)
				}
			}},
		{name: "portForward ports", method: "GET", path: "/portForward/ns/p/u?port=80,8080&port=9000", code: 101,
			check: func(t *testing.T, f *fakeStreams) {
				if r := f.forwards[0]; !reflect.DeepEqual(r.Port, []int32{80, 8080, 9000}) {
					t.Errorf("ports %v", r.Port)
				}
			}},
		{name: "portForward bad port", method: "GET", path: "/portForward/ns/p?port=http", code: 400, body: "as a port"},
		{name: "portForward port 0", method: "GET", path: "/portForward/ns/p?port=0", code: 400, body: "must be > 0"},
		{name: "portForward port too big", method: "GET", path: "/portForward/ns/p?port=70000", code: 400},
		{name: "portForward unknown pod", method: "GET", path: "/portForward/ns/q", code: 404},
		{name: "run", method: "POST", path: "/run/ns/p/c?cmd=echo+hi", code: 200, body: "hi",
			check: func(t *testing.T, f *fakeStreams) {
				if !reflect.DeepEqual(f.runs, [][]string{{"echo", "hi"}}) {
					t.Errorf("run %v", f.runs)
				}
			}},
		{name: "run without cmd", method: "POST", path: "/run/ns/p/c", code: 400},
		{name: "run is POST only", method: "GET", path: "/run/ns/p/c?cmd=ls", code: 405},
		{name: "exec path without container", method: "POST", path: "/exec/ns/p", code: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeStreams()
			f.err, f.runOut = tc.runtimeErr, "hi\n"
			h := nodeAPI(nil, nil, nil, f.server(), nil, nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
			body, _ := io.ReadAll(w.Result().Body)
			if w.Code != tc.code || !strings.Contains(string(body), tc.body) {
				t.Fatalf("%s %s: %d %q, want %d containing %q", tc.method, tc.path, w.Code, body, tc.code, tc.body)
			}
			if tc.code == 101 && (len(f.proxied) != 1 || f.proxied[0] != f.url) {
				t.Errorf("proxied to %v, want %s", f.proxied, f.url)
			}
			if tc.code != 101 && len(f.proxied) != 0 {
				t.Errorf("proxied %v on a failed request", f.proxied)
			}
			if tc.code == 429 && w.Header().Get("Retry-After") != "60" {
				t.Errorf("Retry-After %q", w.Header().Get("Retry-After"))
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func TestStreamingInvalidRuntimeURL(t *testing.T) {
	f := newFakeStreams()
	f.url = "not a url"
	w := httptest.NewRecorder()
	nodeAPI(nil, nil, nil, f.server(), nil, nil).ServeHTTP(w, httptest.NewRequest("POST", "/exec/ns/p/c?command=ls&output=1", nil))
	if w.Code != 500 || len(f.proxied) != 0 {
		t.Fatalf("%d, proxied %v", w.Code, f.proxied)
	}
}

func TestPortsOverWebSocket(t *testing.T) {
	r := httptest.NewRequest("GET", "/portForward/ns/p", nil)
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Connection", "Upgrade")
	if _, err := parsePorts(r); !errors.Is(err, errBadRequest) || !strings.Contains(err.Error(), `"port" is required`) {
		t.Fatalf("websocket without ports: %v", err)
	}
}

// TestRuntimeTargets resolves through the engine's pod and the runtime's
// view: only a running container and a ready sandbox are targets.
func TestRuntimeTargets(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"},
		Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "init"}}, Containers: []v1.Container{{Name: "c"}, {Name: "done"}}}}
	st := &cri.PodStatus{
		Sandboxes: []cri.SandboxStatus{{ID: "sb2", Ready: false}, {ID: "sb1", Ready: true}},
		Containers: []cri.ContainerStatus{
			{ID: "c2", Name: "c", Type: cri.ContainerTypeRegular, State: cri.StateRunning},
			{ID: "c1", Name: "c", Type: cri.ContainerTypeRegular, State: cri.StateExited},
			{ID: "d1", Name: "done", Type: cri.ContainerTypeRegular, State: cri.StateExited},
			{ID: "i1", Name: "init", Type: cri.ContainerTypeInit, State: cri.StateRunning},
		},
	}
	var statusErr error
	tg := runtimeTargets{
		pods: func(ns, name string) *v1.Pod {
			if ns == "ns" && name == "p" {
				return pod
			}
			return nil
		},
		status: func(context.Context, cri.PodRef) (*cri.PodStatus, error) { return st, statusErr },
	}
	ctx := context.Background()
	if id, _, err := tg.Container(ctx, "ns", "p", "", "c"); err != nil || id != "c2" {
		t.Errorf("running container: %q %v", id, err)
	}
	if id, _, err := tg.Container(ctx, "ns", "p", "u", "init"); err != nil || id != "i1" {
		t.Errorf("init container: %q %v", id, err)
	}
	for _, tc := range []struct{ pod, uid, ctr string }{{"p", "", "done"}, {"p", "", "nope"}, {"q", "", "c"}, {"p", "v", "c"}} {
		if _, _, err := tg.Container(ctx, "ns", tc.pod, types.UID(tc.uid), tc.ctr); !errors.Is(err, errNotFound) {
			t.Errorf("%+v: %v, want not found", tc, err)
		}
	}
	if id, err := tg.Sandbox(ctx, "ns", "p", "u"); err != nil || id != "sb1" {
		t.Errorf("sandbox: %q %v", id, err)
	}
	st.Sandboxes[1].Ready = false
	if _, err := tg.Sandbox(ctx, "ns", "p", ""); !errors.Is(err, errNotFound) {
		t.Errorf("no ready sandbox: %v", err)
	}
	statusErr = errors.New("runtime down")
	if _, _, err := tg.Container(ctx, "ns", "p", "", "c"); err == nil || errors.Is(err, errNotFound) {
		t.Errorf("runtime failure: %v, want a non-404 error", err)
	}
}

// FuzzStreamRequest feeds arbitrary paths and queries to the streaming
// endpoints: every answer is a status code, never a panic, and nothing is
// proxied unless the request named a known target.
func FuzzStreamRequest(f *testing.F) {
	for _, s := range []string{"/exec/ns/p/c?command=ls&output=1", "/portForward/ns/p?port=1,2", "/attach/ns/p/u/c?input=1",
		"/run/ns/p/c?cmd=%20", "/exec/ns/p/c?command=&tty=1&error=1", "/portForward/ns/p?port=,"} {
		f.Add("POST", s)
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(u.Path, "/") {
			return
		}
		req, err := http.NewRequest(method, "http://node"+u.RequestURI(), nil)
		if err != nil {
			return
		}
		fs := newFakeStreams()
		w := httptest.NewRecorder()
		nodeAPI(nil, nil, nil, fs.server(), nil, nil).ServeHTTP(w, req)
		if w.Code < 100 || w.Code > 599 {
			t.Fatalf("%s %s: status %d", method, target, w.Code)
		}
		if w.Code == 101 && len(fs.proxied) != 1 {
			t.Fatalf("%s %s: 101 without a proxy", method, target)
		}
	})
}
