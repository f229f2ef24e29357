package provider

import (
	"context"
	"io"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/cri/crilog"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GetContainerLogs streams a container's CRI log file with the kubelet's
// options (tail, limitBytes, timestamps, since, follow, previous), with the
// kubelet's semantics (package cri/crilog).
//
// virtual-kubelet parses tailLines=0 and an absent tailLines alike, so 0
// means "all lines" here.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	pod := p.engine.PodByName(namespace, podName)
	if pod == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not known on this node", namespace, podName)
	}
	typ, ok := containerType(pod, containerName)
	if !ok {
		return nil, errdefs.NotFoundf("container %q is not in pod %s/%s", containerName, namespace, podName)
	}
	st, err := p.runtime.GetPodStatus(ctx, cri.RefOf(pod))
	if err != nil {
		return nil, err
	}
	c := st.Latest(containerName, typ)
	if opts.Previous {
		c = st.Previous(containerName, typ)
		if c == nil {
			return nil, errdefs.InvalidInputf("previous terminated container %q in pod %q not found", containerName, podName)
		}
	}
	if c == nil {
		return nil, errdefs.InvalidInputf("container %q in pod %q is waiting to start", containerName, podName)
	}

	apiOpts := &v1.PodLogOptions{Follow: opts.Follow, Timestamps: opts.Timestamps, Previous: opts.Previous}
	if opts.Tail > 0 {
		t := int64(opts.Tail)
		apiOpts.TailLines = &t
	}
	if opts.LimitBytes > 0 {
		b := int64(opts.LimitBytes)
		apiOpts.LimitBytes = &b
	}
	if opts.SinceSeconds > 0 {
		s := int64(opts.SinceSeconds)
		apiOpts.SinceSeconds = &s
	}
	if !opts.SinceTime.IsZero() {
		apiOpts.SinceTime = &metav1.Time{Time: opts.SinceTime}
	}
	logOpts := crilog.NewOptions(apiOpts, time.Now())

	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer cancel()
		err := crilog.Reader{Runtime: p.runtime.Services()}.ReadLogs(ctx, c.LogPath, c.ID, logOpts, pw, pw)
		pw.CloseWithError(err)
	}()
	return &cancelReader{ReadCloser: pr, cancel: cancel}, nil
}

// cancelReader stops the log reader when the HTTP handler closes the stream.
type cancelReader struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (r *cancelReader) Close() error {
	r.cancel()
	return r.ReadCloser.Close()
}

func containerType(pod *v1.Pod, name string) (cri.ContainerType, bool) {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return cri.ContainerTypeRegular, true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return cri.ContainerTypeInit, true
		}
	}
	return "", false
}
