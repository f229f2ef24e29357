package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

const (
	namespace  = "bench-fleet"
	pauseImage = "registry.k8s.io/pause:3.10.2"
)

// podTimes is what the tracker saw of one pod, client-side times.
type podTimes struct {
	created, running, deleted, gone time.Time
	churn                           bool
}

// tracker watches the bench namespace's pods (an informer) and records
// when each was created (by us), first seen Running, deleted (by us) and
// gone from the API. A churn pod is deleted as soon as it is Running.
type tracker struct {
	cs kubernetes.Interface

	mu   sync.Mutex // guards pods
	pods map[string]*podTimes
	// onRunning is called (in its own goroutine) for a churn pod the
	// first time it is seen Running; set before run.
	onRunning func(name string)
	changed   chan struct{}
}

func newTracker(cs kubernetes.Interface) *tracker {
	return &tracker{cs: cs, pods: map[string]*podTimes{}, changed: make(chan struct{}, 1)}
}

func (t *tracker) run(ctx context.Context) error {
	lw := cache.NewListWatchFromClient(t.cs.CoreV1().RESTClient(), "pods", namespace, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	seen := func(obj interface{}) {
		p, ok := obj.(*v1.Pod)
		if !ok || p.Status.Phase != v1.PodRunning {
			return
		}
		now := time.Now()
		t.mu.Lock()
		pt := t.pods[p.Name]
		first := pt != nil && pt.running.IsZero()
		if first {
			pt.running = now
		}
		churn := pt != nil && pt.churn
		t.mu.Unlock()
		if first {
			t.signal()
			if churn && t.onRunning != nil {
				go t.onRunning(p.Name)
			}
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj interface{}) { seen(obj) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			p, ok := obj.(*v1.Pod)
			if !ok {
				return
			}
			t.mu.Lock()
			if pt := t.pods[p.Name]; pt != nil && pt.gone.IsZero() {
				pt.gone = time.Now()
			}
			t.mu.Unlock()
			t.signal()
		},
	})
	if err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("pod informer did not sync")
	}
	return nil
}

func (t *tracker) signal() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func benchPod(name, node, role string) *v1.Pod {
	grace := int64(1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{"app": "bench-fleet", "role": role}},
		Spec: v1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "c", Image: pauseImage,
				ImagePullPolicy: v1.PullIfNotPresent}},
		},
	}
}

// create creates pod and records its creation time (before the call).
func (t *tracker) create(ctx context.Context, p *v1.Pod, churn bool) error {
	t.mu.Lock()
	t.pods[p.Name] = &podTimes{created: time.Now(), churn: churn}
	t.mu.Unlock()
	if _, err := t.cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.mu.Lock()
		delete(t.pods, p.Name)
		t.mu.Unlock()
		return fmt.Errorf("creating pod %s/%s on %s: %w", namespace, p.Name, p.Spec.NodeName, err)
	}
	return nil
}

// delete deletes pod name and records when it was asked.
func (t *tracker) delete(ctx context.Context, name string) error {
	t.mu.Lock()
	if pt := t.pods[name]; pt != nil {
		pt.deleted = time.Now()
	}
	t.mu.Unlock()
	err := t.cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// createMany creates pods with parallel workers.
func (t *tracker) createMany(ctx context.Context, pods []*v1.Pod, workers int) error {
	ch := make(chan *v1.Pod)
	errs := make(chan error, len(pods))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range ch {
				if err := t.create(ctx, p, false); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, p := range pods {
		ch <- p
	}
	close(ch)
	wg.Wait()
	close(errs)
	return <-errs
}

// waitFor waits until cond (called under the lock) holds or timeout.
func (t *tracker) waitFor(ctx context.Context, timeout time.Duration, cond func(map[string]*podTimes) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		t.mu.Lock()
		ok := cond(t.pods)
		t.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-t.changed:
		case <-tick.C:
		}
	}
}

// latencies returns, for the pods names selects, create->Running and
// delete->gone in seconds, and how many never got there.
func (t *tracker) latencies(sel func(name string, pt *podTimes) bool) (running, gone []float64, notRunning, notGone int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, pt := range t.pods {
		if !sel(name, pt) {
			continue
		}
		if pt.running.IsZero() {
			notRunning++
		} else {
			running = append(running, pt.running.Sub(pt.created).Seconds())
		}
		if !pt.deleted.IsZero() {
			if pt.gone.IsZero() {
				notGone++
			} else {
				gone = append(gone, pt.gone.Sub(pt.deleted).Seconds())
			}
		}
	}
	return running, gone, notRunning, notGone
}

// quantile returns the q-quantile (nearest rank) of xs, 0 when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}
