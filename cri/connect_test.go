package cri

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestAwait: a runtime that is not up is waited for; whileWaiting runs
// once meanwhile and has returned, its context ended, when Await does.
func TestAwait(t *testing.T) {
	dir, err := os.MkdirTemp("", "cri") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "cri.sock")
	calls := 0
	done := false
	whileWaiting := func(ctx context.Context) {
		calls++
		// The runtime comes up only once the wait has begun.
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Error(err)
			return
		}
		srv := grpc.NewServer()
		runtimeapi.RegisterRuntimeServiceServer(srv, newCRIServer())
		runtimeapi.RegisterImageServiceServer(srv, newCRIServer())
		go srv.Serve(l)
		t.Cleanup(srv.Stop)
		<-ctx.Done()
		done = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, ver, _, err := Await(ctx, Config{Endpoint: sock, PodLogDir: t.TempDir(), ConnectTimeout: time.Second}, whileWaiting)
	if err != nil {
		t.Fatalf("Await: %v", err)
	}
	defer rt.Close()
	if ver.RuntimeName != "containerd" {
		t.Errorf("version %+v", ver)
	}
	if calls != 1 || !done {
		t.Errorf("whileWaiting ran %d times, returned %v; want once, returned before Await", calls, done)
	}

	// A canceled context ends the wait with its error.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, _, _, err := Await(cctx, Config{Endpoint: filepath.Join(dir, "none.sock"), PodLogDir: t.TempDir(), ConnectTimeout: time.Second}, nil); err == nil {
		t.Error("Await with a canceled context and no runtime: no error")
	}
}
