package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/crivk/crivk/podutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
)

// outcome is what one probe run found, before thresholds (the kubelet's
// probe.Result).
type outcome int

const (
	outcomeSuccess outcome = iota
	// outcomeWarning is a success worth an event (ProbeWarning): an HTTP
	// redirect to another host was not followed.
	outcomeWarning
	outcomeFailure
)

// maxOutput bounds the output of a probe kept for the event, as the
// kubelet's 10 KiB.
const maxOutput = 10 * 1024

// userAgent is what the kubelet v1.37 sends with HTTP and gRPC probes
// (kube-probe/<major>.<minor> of its version).
const userAgent = "kube-probe/1.37"

// Execer runs a command in a container (cri.Runtime.ExecSync). An error
// that wraps podutil.ErrExecTimedOut means the command ran out of time: the
// probe then fails (the kubelet's ExecProbeTimeout).
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error)
}

// execProbe runs cmd: exit code 0 succeeds, any other fails with the
// command's output; a timeout fails; other errors are the prober's own.
func execProbe(ctx context.Context, ex Execer, containerID string, cmd []string, timeout time.Duration) (outcome, string, error) {
	stdout, stderr, code, err := ex.ExecSync(ctx, containerID, cmd, timeout)
	if err != nil {
		if errors.Is(err, podutil.ErrExecTimedOut) {
			return outcomeFailure, fmt.Sprintf("command %q timed out", strings.Join(cmd, " ")), nil
		}
		return outcomeFailure, "", err
	}
	out := limit(string(append(stdout, stderr...)))
	if code != 0 {
		return outcomeFailure, out, nil
	}
	return outcomeSuccess, out, nil
}

func limit(s string) string {
	if len(s) > maxOutput {
		return s[:maxOutput]
	}
	return s
}

// httpProbe GETs u. Statuses 200-399 succeed; redirects are followed to the
// same host (at most 10); a redirect to another host is not followed and
// counts as a success with a warning; anything else, including a
// connection error, fails.
func httpProbe(ctx context.Context, u *url.URL, headers http.Header, timeout time.Duration) (outcome, string, error) {
	tr := &http.Transport{
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet does not verify probe targets
		DisableKeepAlives:  true,
		DisableCompression: true,
		Proxy:              nil,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Timeout:   timeout,
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return outcomeFailure, "", err
	}
	req.Header = headers.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", userAgent)
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	}
	if h := req.Header.Get("Host"); h != "" {
		req.Host = h
	}
	res, err := client.Do(req)
	if err != nil {
		return outcomeFailure, err.Error(), nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxOutput))
	if err != nil {
		return outcomeFailure, err.Error(), nil
	}
	body := string(b)
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return outcomeWarning, fmt.Sprintf("Probe terminated redirects, Response body: %v", body), nil
		}
		return outcomeSuccess, body, nil
	}
	return outcomeFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// tcpProbe succeeds when a TCP connection to host:port opens in time.
func tcpProbe(ctx context.Context, host string, port int, timeout time.Duration) (outcome, string, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return outcomeFailure, err.Error(), nil
	}
	_ = conn.Close()
	return outcomeSuccess, "", nil
}

// grpcProbe asks the standard health service (grpc.health.v1.Health) of
// host:port about service; SERVING succeeds.
func grpcProbe(ctx context.Context, host string, port int, service string, timeout time.Duration) (outcome, string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(userAgent))
	if err != nil {
		return outcomeFailure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
	if err != nil {
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.Unimplemented:
				return outcomeFailure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message()), nil
			case codes.DeadlineExceeded:
				return outcomeFailure, fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err), nil
			}
		}
		return outcomeFailure, fmt.Sprintf("error: health rpc probe failed: %+v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return outcomeFailure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return outcomeSuccess, "service healthy", nil
}

// httpURL builds the URL of an httpGet probe: the host defaults to the pod
// IP, the path to "/".
func httpURL(h *v1.HTTPGetAction, c *v1.Container, podIP string) (*url.URL, http.Header, error) {
	u, err := podutil.HTTPGetURL(h, c, podIP)
	if err != nil {
		return nil, nil, err
	}
	headers := http.Header{}
	for _, hd := range h.HTTPHeaders {
		headers.Add(hd.Name, hd.Value)
	}
	return u, headers, nil
}
