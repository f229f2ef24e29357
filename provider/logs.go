package provider

import (
	"context"
	"io"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/cri/crilog"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	v1 "k8s.io/api/core/v1"
)

// GetContainerLogs writes a container's CRI log file to stdout and stderr
// (either may be nil to drop that stream) with the kubelet's options (tail,
// limitBytes, timestamps, since, follow, previous) and semantics (package
// cri/crilog: tailLines=0 is no line, as on the kubelet). It returns when
// the log is written, or with follow once the container has stopped and
// its log is drained, or when ctx ends.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	pod := p.engine.PodByName(namespace, podName)
	if pod == nil {
		return errdefs.NotFoundf("pod %q does not exist", podName)
	}
	spec, typ := containerSpec(pod, containerName)
	if spec == nil {
		return errdefs.NotFoundf("container %q not found in pod %q", containerName, podName)
	}
	st, err := p.runtime.GetPodStatus(ctx, cri.RefOf(pod))
	if err != nil {
		return err
	}
	c := st.Latest(containerName, typ)
	if opts.Previous {
		c = st.Previous(containerName, typ)
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
	return crilog.Reader{Runtime: p.runtime.Services()}.ReadLogs(ctx, c.LogPath, c.ID, crilog.NewOptions(opts, time.Now()), stdout, stderr)
}
