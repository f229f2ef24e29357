package cri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/podutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// criServer is a CRI server on a unix socket whose handlers record the
// deadline each call arrived with and answer what the test put in resp
// and errs, by method name.
type criServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	mu        sync.Mutex
	deadlines map[string]time.Duration // time left at arrival; -1: none
	resp      map[string]any
	errs      map[string]error
	block     map[string]bool // wait for the caller's deadline
}

// startCRIServer serves on a fresh socket and returns its path.
func startCRIServer(t *testing.T, s *criServer) string {
	return serveCRI(t, func(srv *grpc.Server) {
		runtimeapi.RegisterRuntimeServiceServer(srv, s)
		runtimeapi.RegisterImageServiceServer(srv, s)
	})
}

// serveCRI serves a fake CRI, whose services register adds, on a unix
// socket in a temporary directory until the test ends, and returns the
// socket's path.
func serveCRI(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMsgSize), grpc.MaxSendMsgSize(maxMsgSize))
	register(srv)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return sock
}

func newCRIServer() *criServer {
	return &criServer{
		deadlines: map[string]time.Duration{},
		resp:      map[string]any{},
		errs:      map[string]error{},
		block:     map[string]bool{},
	}
}

func (s *criServer) set(method string, resp any, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resp[method], s.errs[method] = resp, err
}

func (s *criServer) deadline(method string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deadlines[method]
	return d, ok
}

func reply[R any](s *criServer, ctx context.Context, method string, def R) (R, error) {
	s.mu.Lock()
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	s.deadlines[method] = left
	resp, hasResp := s.resp[method]
	err, block := s.errs[method], s.block[method]
	s.mu.Unlock()
	if block {
		<-ctx.Done()
		var zero R
		return zero, status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		var zero R
		return zero, err
	}
	if hasResp {
		return resp.(R), nil
	}
	return def, nil
}

var testVersion = &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "containerd", RuntimeVersion: "v1.7", RuntimeApiVersion: "v1"}

func (s *criServer) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return reply(s, ctx, "Version", testVersion)
}

func (s *criServer) RunPodSandbox(ctx context.Context, _ *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	return reply(s, ctx, "RunPodSandbox", &runtimeapi.RunPodSandboxResponse{PodSandboxId: "sb1"})
}

func (s *criServer) StopContainer(ctx context.Context, _ *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return reply(s, ctx, "StopContainer", &runtimeapi.StopContainerResponse{})
}

func (s *criServer) StartContainer(ctx context.Context, _ *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	return reply(s, ctx, "StartContainer", &runtimeapi.StartContainerResponse{})
}

func (s *criServer) ContainerStatus(ctx context.Context, _ *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return reply(s, ctx, "ContainerStatus", &runtimeapi.ContainerStatusResponse{})
}

func (s *criServer) ListContainers(ctx context.Context, _ *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return reply(s, ctx, "ListContainers", &runtimeapi.ListContainersResponse{})
}

func (s *criServer) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	s.mu.Lock()
	s.resp["ExecSync.timeout"] = req.Timeout
	s.mu.Unlock()
	return reply(s, ctx, "ExecSync", &runtimeapi.ExecSyncResponse{Stdout: []byte("out")})
}

func (s *criServer) Exec(ctx context.Context, _ *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return reply(s, ctx, "Exec", &runtimeapi.ExecResponse{Url: "http://x"})
}

func (s *criServer) Status(ctx context.Context, _ *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return reply(s, ctx, "Status", &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true},
	}}})
}

func (s *criServer) PullImage(ctx context.Context, _ *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	return reply(s, ctx, "PullImage", &runtimeapi.PullImageResponse{ImageRef: "sha256:abc"})
}

func (s *criServer) ImageStatus(ctx context.Context, _ *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	return reply(s, ctx, "ImageStatus", &runtimeapi.ImageStatusResponse{})
}

func dialTest(t *testing.T, s *criServer, requestTimeout time.Duration) *remoteService {
	t.Helper()
	sock := startCRIServer(t, s)
	c, err := dialRemote(context.Background(), "unix://"+sock, 5*time.Second, requestTimeout, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGRPCTarget(t *testing.T) {
	tests := []struct {
		endpoint, want, wantErr string
	}{
		{endpoint: "unix:///run/containerd/containerd.sock", want: "unix:///run/containerd/containerd.sock"},
		{endpoint: "/run/containerd/containerd.sock", want: "unix:///run/containerd/containerd.sock"},
		{endpoint: "tcp://127.0.0.1:2375", wantErr: "only unix sockets"},
		{endpoint: "unix://", wantErr: "no socket path"},
	}
	for _, tc := range tests {
		t.Run(tc.endpoint, func(t *testing.T) {
			got, err := grpcTarget(tc.endpoint)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestConnect(t *testing.T) {
	logDir := t.TempDir()
	t.Run("bare path, defaults", func(t *testing.T) {
		sock := startCRIServer(t, newCRIServer())
		rt, err := Connect(context.Background(), Config{Endpoint: sock, PodLogDir: logDir})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		if rt.cfg.RequestTimeout != 2*time.Minute || rt.cfg.ConnectTimeout != 10*time.Second {
			t.Errorf("timeouts %s, %s; want the kubelet's defaults", rt.cfg.ConnectTimeout, rt.cfg.RequestTimeout)
		}
		if v, err := rt.Version(context.Background()); err != nil || v.RuntimeName != "containerd" {
			t.Errorf("Version: %+v, %v", v, err)
		}
		if err := rt.Close(); err != nil { // the second Close of the shared connection
			t.Errorf("second Close: %v", err)
		}
	})
	t.Run("nothing listens", func(t *testing.T) {
		_, err := Connect(context.Background(), Config{Endpoint: "unix:///nonexistent/cri.sock", PodLogDir: logDir, ConnectTimeout: time.Second})
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("error %v, want ErrUnreachable", err)
		}
	})
	t.Run("incomplete version", func(t *testing.T) {
		s := newCRIServer()
		s.set("Version", &runtimeapi.VersionResponse{RuntimeName: "x"}, nil)
		_, err := Connect(context.Background(), Config{Endpoint: startCRIServer(t, s), PodLogDir: logDir})
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "missing Version, RuntimeApiVersion, RuntimeVersion") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("negative timeout", func(t *testing.T) {
		if _, err := Connect(context.Background(), Config{Endpoint: "/x.sock", PodLogDir: logDir, RequestTimeout: -1}); err == nil {
			t.Fatal("negative request timeout accepted")
		}
	})
}

// TestRemoteDeadlines checks the deadline each call reaches the runtime
// with: the request timeout, with the kubelet's exceptions.
func TestRemoteDeadlines(t *testing.T) {
	const timeout = time.Minute
	s := newCRIServer()
	c := dialTest(t, s, timeout)
	ctx := context.Background()
	tests := []struct {
		method string
		call   func() error
		want   time.Duration // -1: none
	}{
		{method: "RunPodSandbox", want: 2 * timeout, call: func() error {
			_, err := c.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{}, "")
			return err
		}},
		{method: "StartContainer", want: timeout, call: func() error { return c.StartContainer(ctx, "c1") }},
		{method: "StopContainer", want: timeout + 30*time.Second, call: func() error { return c.StopContainer(ctx, "c1", 30) }},
		{method: "ExecSync", want: timeout + 5*time.Second, call: func() error {
			_, _, err := c.ExecSync(ctx, "c1", []string{"true"}, 5*time.Second)
			return err
		}},
		{method: "Status", want: timeout, call: func() error { _, err := c.Status(ctx, false); return err }},
		{method: "Version", want: timeout, call: func() error { _, err := c.Version(ctx, "v1"); return err }},
		{method: "PullImage", want: -1, call: func() error {
			_, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
			got, ok := s.deadline(tc.method)
			if !ok {
				t.Fatal("call did not reach the server")
			}
			if tc.want < 0 {
				if got >= 0 {
					t.Errorf("deadline in %s, want none", got)
				}
				return
			}
			if got > tc.want || got < tc.want-5*time.Second {
				t.Errorf("deadline in %s, want %s", got, tc.want)
			}
		})
	}
	t.Run("ExecSync without timeout", func(t *testing.T) {
		if _, _, err := c.ExecSync(ctx, "c1", []string{"true"}, 0); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.deadline("ExecSync"); got >= 0 {
			t.Errorf("deadline in %s, want none", got)
		}
	})
}

func TestRemoteExecSync(t *testing.T) {
	s := newCRIServer()
	c := dialTest(t, s, 200*time.Millisecond)
	ctx := context.Background()

	stdout, _, err := c.ExecSync(ctx, "c1", []string{"true"}, 3*time.Second)
	if err != nil || string(stdout) != "out" {
		t.Fatalf("ExecSync: %q, %v", stdout, err)
	}
	s.mu.Lock()
	got := s.resp["ExecSync.timeout"]
	s.mu.Unlock()
	if got != int64(3) {
		t.Errorf("runtime got timeout %v, want 3 (seconds)", got)
	}

	s.set("ExecSync", &runtimeapi.ExecSyncResponse{ExitCode: 3, Stderr: []byte("bad")}, nil)
	_, stderr, err := c.ExecSync(ctx, "c1", []string{"false"}, time.Second)
	var exit utilexec.CodeExitError
	if !errors.As(err, &exit) || exit.Code != 3 || string(stderr) != "bad" {
		t.Errorf("non-zero exit: %v (%T), stderr %q", err, err, stderr)
	}

	// The runtime's own timeout, and ours when the runtime never answers.
	s.set("ExecSync", nil, status.Error(codes.DeadlineExceeded, "timeout 1s exceeded"))
	if _, _, err := c.ExecSync(ctx, "c1", []string{"sleep", "9"}, time.Second); !errors.Is(err, podutil.ErrExecTimedOut) ||
		!strings.Contains(err.Error(), `"sleep 9" timed out after 1s`) {
		t.Errorf("runtime timeout: %v", err)
	}
	s.set("ExecSync", nil, nil)
	s.mu.Lock()
	s.block["ExecSync"] = true
	s.mu.Unlock()
	if _, _, err := c.ExecSync(ctx, "c1", []string{"sleep", "9"}, time.Millisecond); !errors.Is(err, podutil.ErrExecTimedOut) {
		t.Errorf("client timeout: %v", err)
	}
}

func TestRemoteErrors(t *testing.T) {
	s := newCRIServer()
	c := dialTest(t, s, time.Minute)
	ctx := context.Background()
	goodStatus := &runtimeapi.ContainerStatus{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, CreatedAt: 1,
		Image: &runtimeapi.ImageSpec{Image: "busybox"}, ImageRef: "sha256:abc"}
	tests := []struct {
		name     string
		method   string
		resp     any
		err      error
		call     func() error
		wantErr  string // "" means success
		wantCode codes.Code
	}{
		{name: "not found keeps its code and names the call", method: "StartContainer", err: status.Error(codes.NotFound, "no such container"),
			call: func() error { return c.StartContainer(ctx, "c1") }, wantErr: "StartContainer c1: rpc error: code = NotFound", wantCode: codes.NotFound},
		{name: "sandbox without ID", method: "RunPodSandbox", resp: &runtimeapi.RunPodSandboxResponse{},
			call: func() error {
				_, err := c.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}}, "")
				return err
			}, wantErr: "RunPodSandbox ns/p u: PodSandboxId is not set"},
		{name: "valid container status", method: "ContainerStatus", resp: &runtimeapi.ContainerStatusResponse{Status: goodStatus},
			call: func() error { _, err := c.ContainerStatus(ctx, "c1", false); return err }},
		{name: "nil container status passes", method: "ContainerStatus", resp: &runtimeapi.ContainerStatusResponse{},
			call: func() error { _, err := c.ContainerStatus(ctx, "c1", false); return err }},
		{name: "container status without image ref", method: "ContainerStatus",
			resp: &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "c1", Metadata: goodStatus.Metadata, CreatedAt: 1, Image: goodStatus.Image}},
			call: func() error { _, err := c.ContainerStatus(ctx, "c1", false); return err }, wantErr: "ContainerStatus c1: status.ImageRef is not set"},
		{name: "status without conditions", method: "Status", resp: &runtimeapi.StatusResponse{},
			call: func() error { _, err := c.Status(ctx, false); return err }, wantErr: "Status: RuntimeReady or NetworkReady condition are not set"},
		{name: "exec without URL", method: "Exec", resp: &runtimeapi.ExecResponse{},
			call: func() error { _, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "c1"}); return err }, wantErr: "Exec c1: URL is not set"},
		{name: "image without size", method: "ImageStatus", resp: &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:abc"}},
			call:    func() error { _, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, false); return err },
			wantErr: `ImageStatus busybox: Id or size of image "busybox" is not set`},
		{name: "pull: unknown code stripped, call not named", method: "PullImage", err: status.Error(codes.Unknown, "failed to pull and unpack image"),
			call: func() error {
				_, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil)
				return err
			},
			wantErr: "failed to pull and unpack image", wantCode: codes.Unknown},
		{name: "pull: other codes kept", method: "PullImage", err: status.Error(codes.NotFound, "not found"),
			call: func() error {
				_, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil)
				return err
			},
			wantErr: "rpc error: code = NotFound desc = not found", wantCode: codes.NotFound},
		{name: "pull without ref", method: "PullImage", resp: &runtimeapi.PullImageResponse{},
			call: func() error {
				_, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil)
				return err
			},
			wantErr: `imageRef of image "busybox" is not set`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.set(tc.method, tc.resp, tc.err)
			err := tc.call()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one starting with %q", err, tc.wantErr)
			}
			if tc.wantCode != codes.OK && status.Code(err) != tc.wantCode {
				t.Errorf("code %s, want %s", status.Code(err), tc.wantCode)
			}
		})
	}
}

func TestRemoteCanceled(t *testing.T) {
	s := newCRIServer()
	s.block["PullImage"], s.block["StartContainer"] = true, true
	c := dialTest(t, s, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, ok := s.deadline("PullImage"); ok {
				if _, ok := s.deadline("StartContainer"); ok {
					cancel()
					return
				}
			}
			time.Sleep(time.Millisecond) // polling a condition
		}
	}()
	errs := make(chan error, 2)
	go func() { _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil); errs <- err }()
	go func() { errs <- c.StartContainer(ctx, "c1") }()
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
			t.Errorf("error %v (code %s), want one that is context.Canceled and codes.Canceled", err, status.Code(err))
		}
	}
}

// TestRemoteLargeMessages: a response beyond gRPC's default 4 MiB passes.
func TestRemoteLargeMessages(t *testing.T) {
	s := newCRIServer()
	var cs []*runtimeapi.Container
	for i := range 20000 {
		cs = append(cs, &runtimeapi.Container{Id: strings.Repeat("x", 250) + string(rune('a'+i%26))})
	}
	s.set("ListContainers", &runtimeapi.ListContainersResponse{Containers: cs}, nil)
	c := dialTest(t, s, time.Minute)
	got, err := c.ListContainers(context.Background(), nil)
	if err != nil || len(got) != len(cs) {
		t.Fatalf("ListContainers: %d containers, %v", len(got), err)
	}
}

func TestOperationType(t *testing.T) {
	for method, want := range map[string]string{
		"/runtime.v1.RuntimeService/RunPodSandbox":       "run_podsandbox",
		"/runtime.v1.RuntimeService/PodSandboxStatus":    "podsandbox_status",
		"/runtime.v1.RuntimeService/ListPodSandboxStats": "list_podsandbox_stats",
		"/runtime.v1.RuntimeService/CreateContainer":     "create_container",
		"/runtime.v1.RuntimeService/ListContainerStats":  "list_container_stats",
		"/runtime.v1.RuntimeService/ExecSync":            "exec_sync",
		"/runtime.v1.RuntimeService/Version":             "version",
		"/runtime.v1.ImageService/ImageFsInfo":           "image_fs_info",
		"/runtime.v1.ImageService/PullImage":             "pull_image",
		"/runtime.v1.RuntimeService/UpdateRuntimeConfig": "update_runtime_config",
	} {
		if got := OperationType(method); got != want {
			t.Errorf("OperationType(%q) = %q, want %q", method, got, want)
		}
	}
}

// TestObserveCalls: every call reaches the observer with its operation,
// a duration and its error.
func TestObserveCalls(t *testing.T) {
	type call struct {
		op  string
		err bool
	}
	var seen []call
	sock := startCRIServer(t, newCRIServer())
	c, err := dialRemote(context.Background(), "unix://"+sock, 5*time.Second, time.Minute, func(op string, took time.Duration, err error) {
		if took <= 0 {
			t.Errorf("%s: duration %v", op, took)
		}
		seen = append(seen, call{op, err != nil})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	want := []call{{"version", false}, {"status", false}}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("observed %v, want %v", seen, want)
	}
}
