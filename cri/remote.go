package cri

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/crivk/crivk/podutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// remoteService is crivk's CRI client: the runtime and the image service
// over one gRPC connection to a unix socket. It has the semantics of the
// kubelet's remote runtime (k8s.io/cri-client), without its tracing and
// logging machinery:
//
//   - every unary call gets the deadline timeout (the kubelet's
//     --runtime-request-timeout), with the kubelet's exceptions:
//     RunPodSandbox twice that, StopContainer that plus the grace period,
//     ExecSync that plus the command's timeout (none when the command has
//     none), CheckpointContainer the larger of that and its own timeout;
//   - PullImage and the GetContainerEvents stream have no deadline but the
//     caller's: a pull takes as long as the image needs;
//   - responses that lack what the API promises (an ID, a status's
//     metadata, the runtime conditions, a streaming URL) are errors;
//   - a non-zero ExecSync exit code is a utilexec.CodeExitError and a
//     timed-out ExecSync wraps podutil.ErrExecTimedOut.
//
// Errors name the call and the object, wrap the gRPC status (status.Code
// works on them) and, when the call's context ended, its error too
// (errors.Is(err, context.Canceled) works on them).
type remoteService struct {
	conn    *grpc.ClientConn
	rt      runtimeapi.RuntimeServiceClient
	img     runtimeapi.ImageServiceClient
	timeout time.Duration
	// guard orders crivk's calls that would crash an affected containerd
	// (storeguard.go); set by dialRemote from the runtime's Version, nil
	// (no ordering) for every other runtime.
	guard *storeGuard

	closeOnce sync.Once
	closeErr  error
}

var ()

const (
	// maxMsgSize is the kubelet's CRI message size limit, both ways (gRPC's
	// default of 4 MiB is too small for ListContainers on a full node).
	maxMsgSize = 16 * 1024 * 1024

	// The kubelet's reconnection parameters.
	baseBackoffDelay     = 100 * time.Millisecond
	maxBackoffDelay      = 3 * time.Second
	minConnectionTimeout = 5 * time.Second
)

// dialRemote connects to the CRI endpoint (unix:///path or a bare path)
// and checks, within connectTimeout, that it answers Version. Every later
// unary call gets requestTimeout.
func dialRemote(ctx context.Context, endpoint string, connectTimeout, requestTimeout time.Duration, observe func(string, time.Duration, error)) (*remoteService, error) {
	target, err := grpcTarget(endpoint)
	if err != nil {
		return nil, err
	}
	bo := backoff.DefaultConfig
	bo.BaseDelay = baseBackoffDelay
	bo.MaxDelay = maxBackoffDelay
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: minConnectionTimeout}),
		grpc.WithChainUnaryInterceptor(observeCalls(observe)),
	)
	if err != nil {
		return nil, err
	}
	c := &remoteService{
		conn:    conn,
		rt:      runtimeapi.NewRuntimeServiceClient(conn),
		img:     runtimeapi.NewImageServiceClient(conn),
		timeout: requestTimeout,
	}
	vctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	v, err := c.version(vctx, "")
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.guard = newStoreGuard(v.RuntimeName, v.RuntimeVersion)
	return c, nil
}

// observeCalls is a unary interceptor giving each call a span
// ("cri.<operation>", a child of the pod sync's when tracing is on) and
// telling observe (when set) its operation, duration and error.
func observeCalls(observe func(string, time.Duration, error)) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		op := OperationType(method)
		ctx, span := StartSpan(ctx, "cri."+op)
		defer span.End()
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		span.SetStatus(err)
		if observe != nil {
			observe(op, time.Since(start), err)
		}
		return err
	}
}

// OperationType is the kubelet's operation_type label of a CRI method
// ("/runtime.v1.RuntimeService/RunPodSandbox" -> "run_podsandbox",
// "ListContainerStats" -> "list_container_stats").
func OperationType(method string) string {
	if i := strings.LastIndexByte(method, '/'); i >= 0 {
		method = method[i+1:]
	}
	method = strings.ReplaceAll(method, "PodSandbox", "Podsandbox")
	var b strings.Builder
	for i, r := range method {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// grpcTarget turns a CRI endpoint into a gRPC target. Only unix sockets
// are supported, as by the kubelet on Linux.
func grpcTarget(endpoint string) (string, error) {
	path := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return "", fmt.Errorf("CRI endpoint %q: %w", endpoint, err)
		}
		if u.Scheme != "unix" {
			return "", fmt.Errorf("CRI endpoint %q: only unix sockets are supported", endpoint)
		}
		path = u.Path
	}
	if path == "" {
		return "", fmt.Errorf("CRI endpoint %q has no socket path", endpoint)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("CRI endpoint %q: %w", endpoint, err)
	}
	return "unix://" + abs, nil
}

// Close closes the connection; it is safe to call more than once (the
// Runtime closes its runtime and image service, here the same).
func (c *remoteService) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.conn.Close() })
	return c.closeErr
}

// callError is the error of one CRI call.
type callError struct {
	call   string // "StopContainer <id>"
	err    error  // the gRPC error or the validation failure
	ctxErr error  // the call context's error, if it had ended
}

func (e *callError) Error() string { return e.call + ": " + e.err.Error() }

func (e *callError) Unwrap() []error {
	if e.ctxErr != nil {
		return []error{e.err, e.ctxErr}
	}
	return []error{e.err}
}

// unary runs f under deadline d (none if d is 0) and names the call in its
// error. id identifies the object ("" if none).
func unary[R any](ctx context.Context, d time.Duration, call, id string, f func(context.Context) (R, error)) (R, error) {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	resp, err := f(ctx)
	if err != nil {
		var zero R
		return zero, newCallError(ctx, call, id, err)
	}
	return resp, nil
}

func newCallError(ctx context.Context, call, id string, err error) error {
	if id != "" {
		call += " " + id
	}
	return &callError{call: call, err: err, ctxErr: ctx.Err()}
}

// invalid is a response that lacks what the API promises.
func invalid(call, id string, format string, args ...any) error {
	if id != "" {
		call += " " + id
	}
	// An invalid response is not about the call's context.
	return &callError{call: call, err: fmt.Errorf(format, args...)}
}

// Version is the runtime's name and version; its fields must all be set.
func (c *remoteService) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.version(ctx, apiVersion)
}

func (c *remoteService) version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	v, err := unary(ctx, 0, "Version", "", func(ctx context.Context) (*runtimeapi.VersionResponse, error) {
		return c.rt.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion})
	})
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"Version", v.Version}, {"RuntimeName", v.RuntimeName},
		{"RuntimeApiVersion", v.RuntimeApiVersion}, {"RuntimeVersion", v.RuntimeVersion},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, invalid("Version", "", "not all fields are set in VersionResponse (missing %s)", strings.Join(missing, ", "))
	}
	return v, nil
}

// RunPodSandbox gets twice the request timeout, as in the kubelet.
func (c *remoteService) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	id := sandboxName(config)
	resp, err := unary(ctx, 2*c.timeout, "RunPodSandbox", id, func(ctx context.Context) (*runtimeapi.RunPodSandboxResponse, error) {
		return c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	})
	if err != nil {
		return "", err
	}
	if resp.PodSandboxId == "" {
		return "", invalid("RunPodSandbox", id, "PodSandboxId is not set")
	}
	return resp.PodSandboxId, nil
}

func sandboxName(config *runtimeapi.PodSandboxConfig) string {
	m := config.GetMetadata()
	return m.GetNamespace() + "/" + m.GetName() + " " + m.GetUid()
}

func (c *remoteService) StopPodSandbox(ctx context.Context, id string) error {
	_, err := unary(ctx, c.timeout, "StopPodSandbox", id, func(ctx context.Context) (*runtimeapi.StopPodSandboxResponse, error) {
		return c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	})
	return err
}

func (c *remoteService) RemovePodSandbox(ctx context.Context, id string) error {
	_, err := unary(ctx, c.timeout, "RemovePodSandbox", id, func(ctx context.Context) (*runtimeapi.RemovePodSandboxResponse, error) {
		return c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	})
	return err
}

// PodSandboxStatus validates the status when there is one (a nil status is
// returned as is, as by the kubelet's client).
func (c *remoteService) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	release, err := c.guard.enter(ctx, "PodSandboxStatus")
	if err != nil {
		return nil, newCallError(ctx, "PodSandboxStatus", id, err)
	}
	defer release()
	resp, err := unary(ctx, c.timeout, "PodSandboxStatus", id, func(ctx context.Context) (*runtimeapi.PodSandboxStatusResponse, error) {
		return c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose})
	})
	if err != nil {
		return nil, err
	}
	if s := resp.Status; s != nil {
		if err := verifySandboxStatus(s); err != nil {
			return nil, newCallError(ctx, "PodSandboxStatus", id, err)
		}
	}
	return resp, nil
}

func verifySandboxStatus(s *runtimeapi.PodSandboxStatus) error {
	switch m := s.Metadata; {
	case s.Id == "":
		return errors.New("status.Id is not set")
	case m == nil:
		return errors.New("status.Metadata is not set")
	case m.Name == "" || m.Namespace == "" || m.Uid == "":
		return fmt.Errorf("metadata.Name, metadata.Namespace or metadata.Uid is not in metadata %q", m)
	case s.CreatedAt == 0:
		return errors.New("status.CreatedAt is not set")
	}
	return nil
}

func (c *remoteService) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	release, err := c.guard.enter(ctx, "ListPodSandbox")
	if err != nil {
		return nil, newCallError(ctx, "ListPodSandbox", "", err)
	}
	defer release()
	resp, err := unary(ctx, c.timeout, "ListPodSandbox", "", func(ctx context.Context) (*runtimeapi.ListPodSandboxResponse, error) {
		return c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	})
	return resp.GetItems(), err
}

func (c *remoteService) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	id := fmt.Sprintf("%q in sandbox %s", config.GetMetadata().GetName(), sandboxID)
	resp, err := unary(ctx, c.timeout, "CreateContainer", id, func(ctx context.Context) (*runtimeapi.CreateContainerResponse, error) {
		return c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: config, SandboxConfig: sandboxConfig})
	})
	if err != nil {
		return "", err
	}
	if resp.ContainerId == "" {
		return "", invalid("CreateContainer", id, "ContainerId is not set")
	}
	return resp.ContainerId, nil
}

func (c *remoteService) StartContainer(ctx context.Context, id string) error {
	_, err := unary(ctx, c.timeout, "StartContainer", id, func(ctx context.Context) (*runtimeapi.StartContainerResponse, error) {
		return c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	})
	return err
}

func (c *remoteService) UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.ContainerResources) error {
	_, err := unary(ctx, c.timeout, "UpdateContainerResources", id, func(ctx context.Context) (*runtimeapi.UpdateContainerResourcesResponse, error) {
		return c.rt.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
			ContainerId: id, Linux: resources.GetLinux(), Windows: resources.GetWindows()})
	})
	return err
}

// StopContainer gets the request timeout on top of the grace period, for
// the SIGKILL and the call itself.
func (c *remoteService) StopContainer(ctx context.Context, id string, grace int64) error {
	d := c.timeout + time.Duration(grace)*time.Second
	_, err := unary(ctx, d, "StopContainer", id, func(ctx context.Context) (*runtimeapi.StopContainerResponse, error) {
		return c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace})
	})
	return err
}

func (c *remoteService) RemoveContainer(ctx context.Context, id string) error {
	_, err := unary(ctx, c.timeout, "RemoveContainer", id, func(ctx context.Context) (*runtimeapi.RemoveContainerResponse, error) {
		return c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	})
	return err
}

func (c *remoteService) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	release, err := c.guard.enter(ctx, "ListContainers")
	if err != nil {
		return nil, newCallError(ctx, "ListContainers", "", err)
	}
	defer release()
	resp, err := unary(ctx, c.timeout, "ListContainers", "", func(ctx context.Context) (*runtimeapi.ListContainersResponse, error) {
		return c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	})
	return resp.GetContainers(), err
}

// ContainerStatus validates the status when there is one (a nil status is
// returned as is, as by the kubelet's client).
func (c *remoteService) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := unary(ctx, c.timeout, "ContainerStatus", id, func(ctx context.Context) (*runtimeapi.ContainerStatusResponse, error) {
		return c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
	})
	if err != nil {
		return nil, err
	}
	if s := resp.Status; s != nil {
		if err := verifyContainerStatus(s); err != nil {
			return nil, newCallError(ctx, "ContainerStatus", id, err)
		}
	}
	return resp, nil
}

func verifyContainerStatus(s *runtimeapi.ContainerStatus) error {
	switch {
	case s.Id == "":
		return errors.New("status.Id is not set")
	case s.Metadata == nil:
		return errors.New("status.Metadata is not set")
	case s.Metadata.Name == "":
		return fmt.Errorf("metadata.Name is not in metadata %q", s.Metadata)
	case s.CreatedAt == 0:
		return errors.New("status.CreatedAt is not set")
	case s.Image.GetImage() == "":
		return errors.New("status.Image is not set")
	case s.ImageRef == "":
		return errors.New("status.ImageRef is not set")
	}
	return nil
}

// ExecSync runs cmd in the container; the runtime enforces timeout (whole
// seconds, 0 for none) and the call gets the request timeout on top for the
// runtime's clean-up. A command that exits non-zero returns a
// utilexec.CodeExitError; one that runs out of time wraps
// podutil.ErrExecTimedOut.
func (c *remoteService) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error) {
	var d time.Duration
	if timeout != 0 {
		d = c.timeout + timeout
	}
	resp, err := unary(ctx, d, "ExecSync", id, func(ctx context.Context) (*runtimeapi.ExecSyncResponse, error) {
		return c.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: int64(timeout.Seconds())})
	})
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded {
			err = fmt.Errorf("%w: %q timed out after %s: %w", podutil.ErrExecTimedOut, strings.Join(cmd, " "), timeout, err)
		}
		return nil, nil, err
	}
	if resp.ExitCode != 0 {
		err = utilexec.CodeExitError{
			Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), resp.ExitCode, resp.Stderr),
			Code: int(resp.ExitCode),
		}
	}
	return resp.Stdout, resp.Stderr, err
}

func (c *remoteService) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	resp, err := unary(ctx, c.timeout, "Exec", req.GetContainerId(), func(ctx context.Context) (*runtimeapi.ExecResponse, error) {
		return c.rt.Exec(ctx, req)
	})
	if err == nil && resp.Url == "" {
		return nil, invalid("Exec", req.GetContainerId(), "URL is not set")
	}
	return resp, err
}

func (c *remoteService) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	resp, err := unary(ctx, c.timeout, "Attach", req.GetContainerId(), func(ctx context.Context) (*runtimeapi.AttachResponse, error) {
		return c.rt.Attach(ctx, req)
	})
	if err == nil && resp.Url == "" {
		return nil, invalid("Attach", req.GetContainerId(), "URL is not set")
	}
	return resp, err
}

func (c *remoteService) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	resp, err := unary(ctx, c.timeout, "PortForward", req.GetPodSandboxId(), func(ctx context.Context) (*runtimeapi.PortForwardResponse, error) {
		return c.rt.PortForward(ctx, req)
	})
	if err == nil && resp.Url == "" {
		return nil, invalid("PortForward", req.GetPodSandboxId(), "URL is not set")
	}
	return resp, err
}

func (c *remoteService) ReopenContainerLog(ctx context.Context, id string) error {
	_, err := unary(ctx, c.timeout, "ReopenContainerLog", id, func(ctx context.Context) (*runtimeapi.ReopenContainerLogResponse, error) {
		return c.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	})
	return err
}

// Status requires the RuntimeReady and NetworkReady conditions.
func (c *remoteService) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	resp, err := unary(ctx, c.timeout, "Status", "", func(ctx context.Context) (*runtimeapi.StatusResponse, error) {
		return c.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	})
	if err != nil {
		return nil, err
	}
	if len(resp.Status.GetConditions()) < 2 {
		return nil, invalid("Status", "", "RuntimeReady or NetworkReady condition are not set")
	}
	return resp, nil
}

func (c *remoteService) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	release, err := c.guard.enter(ctx, "ListContainerStats")
	if err != nil {
		return nil, newCallError(ctx, "ListContainerStats", "", err)
	}
	defer release()
	resp, err := unary(ctx, c.timeout, "ListContainerStats", "", func(ctx context.Context) (*runtimeapi.ListContainerStatsResponse, error) {
		return c.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	})
	return resp.GetStats(), err
}

func (c *remoteService) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	release, err := c.guard.enter(ctx, "ListPodSandboxStats")
	if err != nil {
		return nil, newCallError(ctx, "ListPodSandboxStats", "", err)
	}
	defer release()
	resp, err := unary(ctx, c.timeout, "ListPodSandboxStats", "", func(ctx context.Context) (*runtimeapi.ListPodSandboxStatsResponse, error) {
		return c.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
	})
	return resp.GetStats(), err
}

// Image service.

// ImageStatus returns a nil Image when the image is not present; a present
// image must have an ID and a size.
func (c *remoteService) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	resp, err := unary(ctx, c.timeout, "ImageStatus", image.GetImage(), func(ctx context.Context) (*runtimeapi.ImageStatusResponse, error) {
		return c.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
	})
	if err != nil {
		return nil, err
	}
	if img := resp.Image; img != nil && (img.Id == "" || img.Size == 0) {
		return nil, invalid("ImageStatus", image.GetImage(), "Id or size of image %q is not set", image.GetImage())
	}
	return resp, nil
}

// PullImage has no deadline but ctx's. Its error is the runtime's message
// as the kubelet shows it to users (in the Failed event and the
// ErrImagePull status): an Unknown gRPC code is stripped (containerd's
// "failed to pull and unpack image ..." stays readable) and the call is not
// prefixed, as the caller says "Failed to pull image".
func (c *remoteService) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandbox})
	if err != nil {
		if s, ok := status.FromError(err); ok && s.Code() == codes.Unknown {
			err = errors.New(s.Message())
		}
		if cerr := ctx.Err(); cerr != nil {
			return "", &pullError{err: err, ctxErr: cerr}
		}
		return "", err
	}
	if resp.ImageRef == "" {
		return "", fmt.Errorf("imageRef of image %q is not set", image.GetImage())
	}
	return resp.ImageRef, nil
}

// pullError is a failed pull whose context ended: its message is the
// runtime's, and errors.Is sees the context's error.
type pullError struct{ err, ctxErr error }

func (e *pullError) Error() string   { return e.err.Error() }
func (e *pullError) Unwrap() []error { return []error{e.err, e.ctxErr} }

func (c *remoteService) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return unary(ctx, c.timeout, "ImageFsInfo", "", func(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
		return c.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	})
}

// ListImages returns every image the runtime holds; each must have an ID.
func (c *remoteService) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	resp, err := unary(ctx, c.timeout, "ListImages", "", func(ctx context.Context) (*runtimeapi.ListImagesResponse, error) {
		return c.img.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
	})
	if err != nil {
		return nil, err
	}
	for _, img := range resp.Images {
		if img.GetId() == "" {
			return nil, invalid("ListImages", "", "an image without Id: %v", img.GetRepoTags())
		}
	}
	return resp.Images, nil
}

// RemoveImage removes image (an ID or a name); removing an image that is
// not there is not an error (CRI's contract).
func (c *remoteService) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	_, err := unary(ctx, c.timeout, "RemoveImage", image.GetImage(), func(ctx context.Context) (*runtimeapi.RemoveImageResponse, error) {
		return c.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
	})
	return err
}
