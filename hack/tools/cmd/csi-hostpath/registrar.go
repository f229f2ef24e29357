package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registrarConfig is the registrar subcommand's command line.
type registrarConfig struct {
	CSIAddress              string // the driver's socket, as this process reaches it
	KubeletRegistrationPath string // the driver's socket, as the kubelet reaches it
	PluginRegistrationDir   string // the kubelet's plugins_registry
	Timeout                 time.Duration
}

func (c *registrarConfig) validate() error {
	if c.KubeletRegistrationPath == "" {
		return errors.New("--kubelet-registration-path is required")
	}
	if c.PluginRegistrationDir == "" {
		return errors.New("--plugin-registration-dir is required")
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("--timeout %v: must be positive", c.Timeout)
	}
	_, err := socketPath(c.CSIAddress)
	return err
}

// errNotRegistered is what runRegistrar returns when the kubelet reports it
// did not register the driver.
var errNotRegistered = errors.New("kubelet did not register the plugin")

// errNoDriver is what runRegistrar returns when the driver does not tell its
// name within the timeout.
var errNoDriver = errors.New("driver did not answer GetPluginInfo")

// runRegistrar learns the driver's name, then serves the registration
// service until ctx is done (nil) or the kubelet reports a failed
// registration (errNotRegistered).
func runRegistrar(ctx context.Context, cfg registrarConfig, stderr io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	csiSock, _ := socketPath(cfg.CSIAddress) // validated
	name, err := driverName(ctx, csiSock, cfg.Timeout, stderr)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	reg := &registration{
		info: &registerapi.PluginInfo{
			Type:              registerapi.CSIPlugin,
			Name:              name,
			Endpoint:          cfg.KubeletRegistrationPath,
			SupportedVersions: []string{"1.0.0"},
		},
		stderr: stderr,
		failed: func(err error) { cancel(err) },
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, reg)
	sock := filepath.Join(cfg.PluginRegistrationDir, name+"-reg.sock")
	fmt.Fprintf(stderr, "csi-hostpath: registrar for %s (endpoint %s) serving %s\n", name, cfg.KubeletRegistrationPath, sock)
	if err := serveUnix(ctx, srv, sock); err != nil {
		return err
	}
	if cause := context.Cause(ctx); errors.Is(cause, errNotRegistered) {
		return cause
	}
	return nil
}

// driverName asks the driver at sock for its name until it answers or
// timeout passes: the driver may start after the registrar.
func driverName(ctx context.Context, sock string, timeout time.Duration, stderr io.Writer) (string, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", fmt.Errorf("csi address %s: %w", sock, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := csi.NewIdentityClient(conn)
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		// WaitForReady: a socket not there yet, or not accepting, is waited
		// for (with gRPC's reconnect backoff) rather than failed at once.
		resp, err := client.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
		if err == nil && resp.GetName() != "" {
			return resp.GetName(), nil
		}
		if err == nil {
			err = errors.New("GetPluginInfo answered an empty name")
		}
		fmt.Fprintf(stderr, "csi-hostpath: registrar: driver at %s: %v\n", sock, err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w at %s within %v: %v", errNoDriver, sock, timeout, err)
		case <-retry.C:
		}
	}
}

// registration is the kubelet's plugin registration service for one driver.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	info   *registerapi.PluginInfo
	stderr io.Writer
	failed func(error) // ends runRegistrar with the error
}

var _ registerapi.RegistrationServer = (*registration)(nil)

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	fmt.Fprintf(r.stderr, "csi-hostpath: registrar: GetInfo\n")
	return r.info, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !st.GetPluginRegistered() {
		err := fmt.Errorf("%w %s: %s", errNotRegistered, r.info.GetName(), st.GetError())
		fmt.Fprintf(r.stderr, "csi-hostpath: registrar: %v\n", err)
		r.failed(err)
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	fmt.Fprintf(r.stderr, "csi-hostpath: registrar: %s registered\n", r.info.GetName())
	return &registerapi.RegistrationStatusResponse{}, nil
}
