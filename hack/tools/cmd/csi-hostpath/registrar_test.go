package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/testing/protocmp"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// fakeIdentity is a CSI driver that only has a name.
type fakeIdentity struct {
	csi.UnimplementedIdentityServer
	name string
}

func (f *fakeIdentity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: f.name, VendorVersion: "0"}, nil
}

// serveFakeDriver serves a fakeIdentity on sock until the test ends.
func serveFakeDriver(t *testing.T, sock, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, &fakeIdentity{name: name})
	done := make(chan error, 1)
	go func() { done <- serveUnix(ctx, srv, sock) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fake driver: %v", err)
		}
	})
}

func TestRegistrar(t *testing.T) {
	tests := map[string]struct {
		registered bool
		wantErr    error // what runRegistrar returns after NotifyRegistrationStatus
	}{
		"registered: serves until stopped": {registered: true},
		"refused: exits with the error":    {registered: false, wantErr: errNotRegistered},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			csiSock := filepath.Join(dir, "csi.sock")
			regDir := filepath.Join(dir, "plugins_registry")
			regSock := filepath.Join(regDir, "hostpath.test-reg.sock")

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- runRegistrar(ctx, registrarConfig{
					CSIAddress:              csiSock,
					KubeletRegistrationPath: "/var/lib/kubelet/plugins/hostpath.test/csi.sock",
					PluginRegistrationDir:   regDir,
					Timeout:                 time.Minute,
				}, io.Discard)
			}()
			// The driver may come after the registrar: it waits for it.
			serveFakeDriver(t, csiSock, "hostpath.test")

			conn, err := grpc.NewClient("unix://"+regSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			client := registerapi.NewRegistrationClient(conn)
			callCtx, callCancel := context.WithTimeout(ctx, 30*time.Second)
			defer callCancel()
			info, err := client.GetInfo(callCtx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
			if err != nil {
				t.Fatalf("GetInfo: %v", err)
			}
			want := &registerapi.PluginInfo{
				Type:              registerapi.CSIPlugin,
				Name:              "hostpath.test",
				Endpoint:          "/var/lib/kubelet/plugins/hostpath.test/csi.sock",
				SupportedVersions: []string{"1.0.0"},
			}
			if diff := cmp.Diff(want, info, protocmp.Transform()); diff != "" {
				t.Errorf("GetInfo (-want +got):\n%s", diff)
			}

			if _, err := client.NotifyRegistrationStatus(callCtx, &registerapi.RegistrationStatus{
				PluginRegistered: tc.registered, Error: "test refusal"}); err != nil && tc.registered {
				t.Fatalf("NotifyRegistrationStatus: %v", err)
			}
			if tc.registered {
				// Still serving: a second GetInfo answers; then stop it.
				if _, err := client.GetInfo(callCtx, &registerapi.InfoRequest{}); err != nil {
					t.Errorf("GetInfo after registration: %v", err)
				}
				cancel()
			}
			if err := <-done; !errors.Is(err, tc.wantErr) {
				t.Errorf("runRegistrar: %v, want %v", err, tc.wantErr)
			}
			if _, err := os.Stat(regSock); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("registration socket after exit: %v, want it removed", err)
			}
		})
	}
}

func TestRegistrarTimesOutWithoutDriver(t *testing.T) {
	dir := t.TempDir()
	err := runRegistrar(t.Context(), registrarConfig{
		CSIAddress:              filepath.Join(dir, "csi.sock"),
		KubeletRegistrationPath: "/x/csi.sock",
		PluginRegistrationDir:   dir,
		Timeout:                 200 * time.Millisecond,
	}, io.Discard)
	if !errors.Is(err, errNoDriver) {
		t.Fatalf("runRegistrar without a driver: %v, want a timeout", err)
	}
}

func TestRunFlags(t *testing.T) {
	tests := map[string][]string{
		"no subcommand":          nil,
		"unknown subcommand":     {"attach"},
		"driver without nodeid":  {"driver", "--endpoint", "unix:///tmp/x.sock", "--state-dir", "/tmp/x"},
		"driver relative socket": {"driver", "--endpoint", "unix://x.sock", "--nodeid", "n", "--state-dir", "/tmp/x"},
		"driver stray argument":  {"driver", "--nodeid", "n", "extra"},
		"registrar without path": {"registrar", "--csi-address", "/tmp/x.sock", "--plugin-registration-dir", "/tmp"},
		"registrar zero timeout": {"registrar", "--csi-address", "/tmp/x.sock", "--kubelet-registration-path", "/x", "--plugin-registration-dir", "/tmp", "--timeout", "0s"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			if err := run(t.Context(), args, io.Discard, io.Discard); err == nil {
				t.Errorf("run %q: no error", args)
			}
		})
	}
}
