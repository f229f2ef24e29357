package nodeapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/cri/crilog"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// containerLogs finds a container's log file through the engine's pod and
// the runtime's view of it.
// previousInstance is the container "previous" means, as the kubelet's
// validateContainerLogStatus: the one the pod status' lastState.terminated
// names. That is the newest instance while it waits to be restarted (a
// CrashLoopBackOff), and the one before it while the newest runs or is
// final, so the newest instance's logs are not lost when the instances
// before it were garbage-collected. Before the engine generated a status
// of the container, the instance before the newest.
func previousInstance(pod *v1.Pod, name string, typ cri.ContainerType, st *cri.PodStatus) *cri.ContainerStatus {
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, cs := range statuses {
			if cs.Name != name {
				continue
			}
			t := cs.LastTerminationState.Terminated
			if t == nil || t.ContainerID == "" {
				return nil
			}
			id := t.ContainerID
			if i := strings.Index(id, "://"); i >= 0 {
				id = id[i+len("://"):]
			}
			for i := range st.Containers {
				if st.Containers[i].ID == id {
					return &st.Containers[i]
				}
			}
			return nil
		}
	}
	return st.Previous(name, typ)
}

type containerLogs struct {
	pods   func(namespace, name string) *v1.Pod
	status func(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error)
	// follow tells a followed log's reader whether its container runs.
	follow crilog.StatusGetter
	clock  clock.PassiveClock
}

// write writes a container's CRI log file to stdout and stderr (either may
// be nil to drop that stream) with the kubelet's options (tail,
// limitBytes, timestamps, since, follow, previous) and semantics (package
// cri/crilog: tailLines=0 is no line, as on the kubelet). It returns when
// the log is written, or with follow once the container has stopped and
// its log is drained, or when ctx ends. An unknown pod or container is
// errdefs.NotFound (404), a container without the instance asked for
// errdefs.InvalidInput (400).
func (l containerLogs) write(ctx context.Context, namespace, podName, containerName string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	pod := l.pods(namespace, podName)
	if pod == nil {
		return errdefs.NotFoundf("pod %q does not exist", podName)
	}
	spec, typ := containerSpec(pod, containerName)
	if spec == nil {
		return errdefs.NotFoundf("container %q not found in pod %q", containerName, podName)
	}
	st, err := l.status(ctx, cri.RefOf(pod))
	if err != nil {
		return err
	}
	c := st.Latest(containerName, typ)
	if opts.Previous {
		c = previousInstance(pod, containerName, typ, st)
		if c == nil {
			return errdefs.InvalidInputf("previous terminated container %q in pod %q not found", containerName, podName)
		}
	}
	if c == nil {
		return errdefs.InvalidInputf("container %q in pod %q is waiting to start", containerName, podName)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	return crilog.Reader{Runtime: l.follow}.ReadLogs(ctx, c.LogPath, c.ID, crilog.NewOptions(opts, l.clock.Now()), stdout, stderr)
}

// logSource writes a container's log (containerLogs.write).
type logSource func(ctx context.Context, namespace, pod, container string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error

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
