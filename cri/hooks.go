package cri

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
)

// Lifecycle hooks (postStart, preStop), as the kubelet's handlerRunner
// runs them:
//
//   - exec: the command runs in the container through CRI ExecSync; a
//     non-zero exit is a failure;
//   - httpGet: a GET to host (default: the pod's IP) and port (a number or
//     a named container port); only a transport error is a failure (the
//     kubelet ignores the status code); https skips verification;
//   - sleep: waits the given seconds, or fails if cut short.
//
// postStart runs right after StartContainer (startContainer); a failure is
// a FailedPostStartHook event, the container is killed and the sync's
// waiting reason is PostStartHookError. preStop runs before StopContainer
// within the grace period (stopContainer); what it used is taken from the
// grace StopContainer gets, never below minGracePeriod. When several
// containers stop together (KillPod, the sidecars of a pod whose
// containers finished) their hooks run at once (stopContainers).

// ReasonPostStartHookError is the waiting reason of a container whose
// postStart hook failed.
const ReasonPostStartHookError = "PostStartHookError"

// hookUserAgent is the User-Agent of httpGet hooks, the kubelet v1.37's
// (kube-lifecycle/<major>.<minor> of its version).
const hookUserAgent = "kube-lifecycle/1.37"

// podName is the kubelet's format.Pod: name_namespace(uid).
func podName(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// runHook runs handler h of container c (runtime ID id) of pod. msg is the
// kubelet's text for a failure, for events and the waiting message.
func (r *Runtime) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, podIPs []string, h *v1.LifecycleHandler) (msg string, err error) {
	switch {
	case h.Exec != nil:
		stdout, stderr, err := r.rs.ExecSync(ctx, id, h.Exec.Command, 0)
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, c.Name, podName(pod), err, string(append(stdout, stderr...))), err
		}
		return "", nil
	case h.HTTPGet != nil:
		if err := r.httpHook(ctx, c, podIPs, h.HTTPGet); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c.Name, podName(pod), err), err
		}
		return "", nil
	case h.Sleep != nil:
		t := r.clock.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
			err := errors.New("container terminated before sleep hook finished")
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v", h.Sleep.Seconds, c.Name, podName(pod), err), err
		case <-t.C():
			return "", nil
		}
	default:
		err := fmt.Errorf("invalid handler: %v", h)
		return fmt.Sprintf("Cannot run handler: %v", err), err
	}
}

// hookClient is the HTTP client of httpGet hooks: no redirects followed
// beyond the default, certificates not verified (as the kubelet).
var hookClient = &http.Client{
	Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's behaviour for hooks
		DisableKeepAlives: true,
		Proxy:             nil,
	},
}

func (r *Runtime) httpHook(ctx context.Context, c *v1.Container, podIPs []string, g *v1.HTTPGetAction) error {
	host := g.Host
	if host == "" {
		if len(podIPs) == 0 {
			return errors.New("failed to find networking container: the pod has no IP")
		}
		host = podIPs[0]
	}
	u, err := podutil.HTTPGetURL(g, c, host)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", hookUserAgent)
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := hookClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10*1024))
	return resp.Body.Close()
}

// stopContainer is the kubelet's killContainer: the preStop hook within
// the grace period, then (order: when the pod stops with sidecars, else
// nil) the wait for its turn within what is left, then StopContainer with
// what is left after both (at least minGracePeriod: a hook or a wait that
// used the whole grace period leaves the container 2 s after SIGTERM
// before SIGKILL). pod and c may be nil (a container whose spec is gone):
// no hook runs then; nor does it for a container that is not running.
func (r *Runtime) stopContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, running bool, podIPs []string, grace int64, message string, order *termOrder) error {
	name := ""
	if pod != nil && c != nil {
		name = c.Name
		if message == "" {
			message = "Stopping container " + c.Name
		}
		r.containerEvent(pod, c, v1.EventTypeNormal, "Killing", message)
		if running && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
			grace -= r.preStop(ctx, pod, c, id, podIPs, grace)
		}
		if grace > 0 {
			// Whole seconds, truncated, as the kubelet counts them.
			grace -= int64(order.waitForTurn(ctx, name, grace).Seconds())
		}
	}
	if grace < minGracePeriod {
		grace = minGracePeriod
	}
	err := r.rs.StopContainer(ctx, id, grace)
	if err != nil && !isNotFound(err) {
		return err
	}
	if name != "" {
		order.stopped(name)
	}
	return nil
}

// preStop waits at most grace seconds for c's preStop hook and returns the
// whole seconds it waited. As the kubelet's executePreStopHook, a hook
// still running then is not cancelled: an exec hook goes on until the
// container's stop ends it (StopContainer's SIGKILL, at least
// minGracePeriod later), and then fails with FailedPreStopHook.
func (r *Runtime) preStop(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, podIPs []string, grace int64) int64 {
	start := r.clock.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := r.runHook(ctx, pod, c, id, podIPs, c.Lifecycle.PreStop); err != nil {
			// The kubelet leaves the hook's output out of the event so
			// that secrets do not leak.
			r.containerEvent(pod, c, v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
		}
	}()
	t := r.clock.NewTimer(time.Duration(grace) * time.Second)
	defer t.Stop()
	select {
	case <-t.C():
	case <-done:
	}
	return int64(r.clock.Since(start).Seconds())
}

// containerEvent records an event about container c of pod, referring to
// it as the kubelet does (field path spec.containers{c} or
// spec.initContainers{c}).
func (r *Runtime) containerEvent(pod *v1.Pod, c *v1.Container, typ, reason, message string) {
	if r.recorder == nil {
		return
	}
	path := "spec.containers{" + c.Name + "}"
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			path = "spec.initContainers{" + c.Name + "}"
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == c.Name {
			path = "spec.ephemeralContainers{" + c.Name + "}"
		}
	}
	ref := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: path}
	r.recorder.Eventf(ref, typ, reason, "%s", message)
}

// event records a kubelet-style event on pod if a recorder was set.
func (r *Runtime) event(pod *v1.Pod, typ, reason, message string) {
	if r.recorder != nil {
		r.recorder.Eventf(pod, typ, reason, "%s", message)
	}
}
