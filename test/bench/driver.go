package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// span is one pod's measured interval: Start when the harness issued the
// call, End when the result was seen.
type span struct {
	Name       string
	Start, End time.Time
}

// driver is how the workloads act on one lane.
type driver interface {
	// create starts pods at once and returns, per pod, create call ->
	// Running with every container ready.
	create(ctx context.Context, pods []*v1.Pod) ([]span, error)
	// remove deletes pods at once and returns, per pod, delete call -> gone.
	remove(ctx context.Context, pods []*v1.Pod) ([]span, error)
	// waitExit returns when the exit of pod's container was seen.
	waitExit(ctx context.Context, pod *v1.Pod) (time.Time, error)
}

// parallel runs f for every pod in its own goroutine and joins the errors.
func parallel(pods []*v1.Pod, f func(i int, p *v1.Pod) error) error {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i, p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func podNames(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// ------------------------------------------------------------------ agents

// apiDriver acts through the API server; an agent (kubelet or crivk) does
// the work; the tracker's watch says when.
type apiDriver struct {
	client kubernetes.Interface
	ns     string
	tr     *tracker
	clock  clock.PassiveClock
}

func (d *apiDriver) create(ctx context.Context, pods []*v1.Pod) ([]span, error) {
	names := podNames(pods)
	d.tr.forget(names)
	spans := make([]span, len(pods))
	err := parallel(pods, func(i int, p *v1.Pod) error {
		spans[i] = span{Name: p.Name, Start: d.clock.Now()}
		if _, err := d.client.CoreV1().Pods(d.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", d.ns, p.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	seen, err := d.tr.wait(ctx, evRunning, names)
	if err != nil {
		return nil, err
	}
	for i := range spans {
		spans[i].End = seen[spans[i].Name]
	}
	return spans, nil
}

func (d *apiDriver) remove(ctx context.Context, pods []*v1.Pod) ([]span, error) {
	spans := make([]span, len(pods))
	err := parallel(pods, func(i int, p *v1.Pod) error {
		spans[i] = span{Name: p.Name, Start: d.clock.Now()}
		// The pod's own terminationGracePeriodSeconds (30 s) applies.
		if err := d.client.CoreV1().Pods(d.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s/%s: %w", d.ns, p.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	seen, err := d.tr.wait(ctx, evGone, podNames(pods))
	if err != nil {
		return nil, err
	}
	for i := range spans {
		spans[i].End = seen[spans[i].Name]
	}
	return spans, nil
}

func (d *apiDriver) waitExit(ctx context.Context, pod *v1.Pod) (time.Time, error) {
	seen, err := d.tr.wait(ctx, evExited, []string{pod.Name})
	if err != nil {
		return time.Time{}, err
	}
	return seen[pod.Name], nil
}

// ------------------------------------------------------------------ raw CRI

// rawDriver sends the sandbox and container configs crivk builds for the
// pod straight to the CRI, one goroutine per pod: no agent in between.
type rawDriver struct {
	rt    *cri.Runtime
	rs    internalapi.RuntimeService
	clock clock.PassiveClock
	// poll is how often waitExit asks the runtime (the runtime has no
	// container events: containerd 1.6 lacks GetContainerEvents).
	poll time.Duration

	mu   sync.Mutex
	pods map[string]*rawPod
}

type rawPod struct {
	sandboxID  string
	logDir     string
	containers []string
}

func newRawDriver(rt *cri.Runtime, c clock.PassiveClock) *rawDriver {
	return &rawDriver{rt: rt, rs: rt.Services(), clock: c, poll: 10 * time.Millisecond, pods: map[string]*rawPod{}}
}

func (d *rawDriver) start(ctx context.Context, p *v1.Pod) error {
	sb, _, err := d.rt.SandboxConfig(p, 0)
	if err != nil {
		return fmt.Errorf("sandbox config of %s: %w", p.Name, err)
	}
	if err := os.MkdirAll(sb.LogDirectory, 0o755); err != nil {
		return err
	}
	rp := &rawPod{logDir: sb.LogDirectory}
	d.mu.Lock()
	d.pods[p.Name] = rp
	d.mu.Unlock()
	id, err := d.rs.RunPodSandbox(ctx, sb, "")
	if err != nil {
		return fmt.Errorf("RunPodSandbox %s: %w", p.Name, err)
	}
	rp.sandboxID = id
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		cc, err := cri.ContainerConfig(p, c, cri.ContainerTypeRegular, 0, c.Image, nil)
		if err != nil {
			return fmt.Errorf("container config of %s/%s: %w", p.Name, c.Name, err)
		}
		cid, err := d.rs.CreateContainer(ctx, id, cc, sb)
		if err != nil {
			return fmt.Errorf("CreateContainer %s/%s: %w", p.Name, c.Name, err)
		}
		rp.containers = append(rp.containers, cid)
		if err := d.rs.StartContainer(ctx, cid); err != nil {
			return fmt.Errorf("StartContainer %s/%s: %w", p.Name, c.Name, err)
		}
	}
	return nil
}

func (d *rawDriver) create(ctx context.Context, pods []*v1.Pod) ([]span, error) {
	spans := make([]span, len(pods))
	err := parallel(pods, func(i int, p *v1.Pod) error {
		spans[i].Name, spans[i].Start = p.Name, d.clock.Now()
		err := d.start(ctx, p)
		spans[i].End = d.clock.Now()
		return err
	})
	return spans, err
}

func (d *rawDriver) remove(ctx context.Context, pods []*v1.Pod) ([]span, error) {
	spans := make([]span, len(pods))
	err := parallel(pods, func(i int, p *v1.Pod) error {
		spans[i].Name, spans[i].Start = p.Name, d.clock.Now()
		d.mu.Lock()
		rp := d.pods[p.Name]
		delete(d.pods, p.Name)
		d.mu.Unlock()
		if rp == nil {
			return fmt.Errorf("pod %s was not created by this lane", p.Name)
		}
		grace := int64(30)
		if p.Spec.TerminationGracePeriodSeconds != nil {
			grace = *p.Spec.TerminationGracePeriodSeconds
		}
		var errs []error
		for _, cid := range rp.containers {
			if err := d.rs.StopContainer(ctx, cid, grace); err != nil {
				errs = append(errs, fmt.Errorf("StopContainer %s of %s: %w", cid, p.Name, err))
			}
		}
		if rp.sandboxID != "" {
			if err := d.rs.StopPodSandbox(ctx, rp.sandboxID); err != nil {
				errs = append(errs, fmt.Errorf("StopPodSandbox %s: %w", p.Name, err))
			}
			if err := d.rs.RemovePodSandbox(ctx, rp.sandboxID); err != nil {
				errs = append(errs, fmt.Errorf("RemovePodSandbox %s: %w", p.Name, err))
			}
		}
		spans[i].End = d.clock.Now()
		if err := os.RemoveAll(rp.logDir); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	return spans, err
}

func (d *rawDriver) waitExit(ctx context.Context, pod *v1.Pod) (time.Time, error) {
	d.mu.Lock()
	rp := d.pods[pod.Name]
	d.mu.Unlock()
	if rp == nil || len(rp.containers) == 0 {
		return time.Time{}, fmt.Errorf("pod %s has no container of this lane", pod.Name)
	}
	var at time.Time
	err := wait.PollUntilContextCancel(ctx, d.poll, true, func(ctx context.Context) (bool, error) {
		st, err := d.rs.ContainerStatus(ctx, rp.containers[0], false)
		if err != nil {
			return false, fmt.Errorf("ContainerStatus of %s: %w", pod.Name, err)
		}
		if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			at = d.clock.Now()
			return true, nil
		}
		return false, nil
	})
	return at, err
}
