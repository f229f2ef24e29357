package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// runOne runs agent a with n nodes: baseline, start, pods, steady, churn,
// cleanup. Its error is recorded in the Run, never returned: the next run
// still happens.
func (b *bench) runOne(ctx context.Context, a string, n int) *Run {
	r := &Run{Agent: a, Nodes: n}
	dir := filepath.Join(b.cfg.out, fmt.Sprintf("%s-%d", a, n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Error = err.Error()
		return r
	}
	stem, label := "fleet-"+a, "bench.crivk.io/fleet="+a
	var f fleet
	if a == "crivk" {
		f = &crivkFleet{env: b.cfg.env, dir: dir, n: n, stem: stem, label: label, extra: b.cfg.crivkArgs}
		r.Processes = 1
	} else {
		f = &hollowFleet{env: b.cfg.env, dir: dir, n: n, stem: stem, label: label}
		r.Processes = n
	}
	defer func() {
		start := time.Now()
		if err := b.cleanup(f, a); err != nil && r.Error == "" {
			r.Error = "cleanup: " + err.Error()
		}
		r.CleanupSeconds = time.Since(start).Seconds()
		logf("%s %d: cleaned up in %.1f s", a, n, r.CleanupSeconds)
	}()
	if err := b.runSteps(ctx, f, r, n, label); err != nil {
		r.Error = err.Error()
		logf("%s %d: FAILED: %v", a, n, err)
	}
	return r
}

func (b *bench) runSteps(ctx context.Context, f fleet, r *Run, n int, label string) error {
	a := r.Agent
	logf("%s %d: baseline window %s", a, n, b.cfg.baseline)
	w, err := b.measure(ctx, b.cfg.baseline, f, nil)
	if err != nil {
		return err
	}
	r.Baseline = w

	logf("%s %d: starting %d nodes", a, n, n)
	start := time.Now()
	if err := f.Start(ctx); err != nil {
		return err
	}
	if err := b.waitReady(ctx, label, n, 90*time.Second+time.Duration(n)*2*time.Second); err != nil {
		return err
	}
	r.ReadySeconds = time.Since(start).Seconds()
	logf("%s %d: all Ready after %.1f s", a, n, r.ReadySeconds)
	nodes, err := b.nodeNames(ctx, label)
	if err != nil {
		return err
	}

	t := newTracker(b.cs)
	// A churn pod is deleted as soon as it is Running.
	t.onRunning = func(name string) { _ = t.delete(ctx, name) }
	tctx, stopTracker := context.WithCancel(ctx)
	defer stopTracker()
	if err := t.run(tctx); err != nil {
		return err
	}
	var pods []*v1.Pod
	for i, node := range nodes {
		for j := 0; j < b.cfg.podsPerNode; j++ {
			pods = append(pods, benchPod(fmt.Sprintf("%s-s-%d-%d", a, i, j), node, "steady"))
		}
	}
	logf("%s %d: creating %d pods (%d per node)", a, n, len(pods), b.cfg.podsPerNode)
	start = time.Now()
	if err := t.createMany(ctx, pods, 16); err != nil {
		return err
	}
	allRunning := t.waitFor(ctx, 60*time.Second+time.Duration(len(pods))*200*time.Millisecond, func(m map[string]*podTimes) bool {
		for _, pt := range m {
			if !pt.churn && pt.running.IsZero() {
				return false
			}
		}
		return true
	})
	r.StartSeconds = time.Since(start).Seconds()
	run, _, notRun, _ := t.latencies(func(_ string, pt *podTimes) bool { return !pt.churn })
	r.StartPods, r.StartNotRun, r.StartP50, r.StartP90 = len(pods), notRun, quantile(run, 0.5), quantile(run, 0.9)
	logf("%s %d: %d/%d pods Running after %.1f s (p50 %.2f s, p90 %.2f s)", a, n, len(run), len(pods), r.StartSeconds, r.StartP50, r.StartP90)
	if !allRunning {
		return fmt.Errorf("%d of %d pods not Running", notRun, len(pods))
	}

	logf("%s %d: steady window %s", a, n, b.cfg.steady)
	if r.Steady, err = b.measure(ctx, b.cfg.steady, f, nil); err != nil {
		return err
	}

	// Churn: one pod per node every 10 s (N/10 per second), round robin,
	// each deleted once Running.
	interval := 10 * time.Second / time.Duration(n)
	var created int
	logf("%s %d: churn window %s, a pod every %s", a, n, b.cfg.churn, interval)
	r.Churn, err = b.measure(ctx, b.cfg.churn, f, func(wctx context.Context) {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			p := benchPod(fmt.Sprintf("%s-c-%d", a, i), nodes[i%len(nodes)], "churn")
			go func() {
				if err := t.create(ctx, p, true); err != nil {
					logf("%s %d: %v", a, n, err)
				}
			}()
			created++
		}
	})
	if err != nil {
		return err
	}
	// Let the last churn pods finish (Running, deleted, gone).
	t.waitFor(ctx, 60*time.Second, func(m map[string]*podTimes) bool {
		for _, pt := range m {
			if pt.churn && (pt.running.IsZero() || pt.gone.IsZero()) {
				return false
			}
		}
		return true
	})
	cr, cg, cNotRun, cNotGone := t.latencies(func(_ string, pt *podTimes) bool { return pt.churn })
	r.ChurnCreated, r.ChurnNotRun, r.ChurnNotGone = created, cNotRun, cNotGone
	r.ChurnP50, r.ChurnP90 = quantile(cr, 0.5), quantile(cr, 0.9)
	r.DeleteP50, r.DeleteP90 = quantile(cg, 0.5), quantile(cg, 0.9)
	logf("%s %d: churn: %d created, %d not Running, create->Running p50 %.2f s p90 %.2f s, delete->gone p50 %.2f s p90 %.2f s (%d not gone)",
		a, n, created, cNotRun, r.ChurnP50, r.ChurnP90, r.DeleteP50, r.DeleteP90, cNotGone)
	return nil
}

// measure samples the API server's metrics and the processes' CPU and RSS
// at both ends of a window of length d, running during (if any) through
// it.
func (b *bench) measure(ctx context.Context, d time.Duration, f fleet, during func(context.Context)) (*Window, error) {
	agentPIDs, fakePIDs := f.PIDs()
	a0, err := scrapeAPI(ctx, b.cs)
	if err != nil {
		return nil, err
	}
	api0, etcd0 := sampleProcs([]int{b.apiPID}), sampleProcs([]int{b.etcdPID})
	ag0, fk0 := sampleProcs(agentPIDs), sampleProcs(fakePIDs)
	t0 := time.Now()
	wctx, stop := context.WithTimeout(ctx, d)
	defer stop()
	if during != nil {
		during(wctx)
	}
	<-wctx.Done()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	a1, err := scrapeAPI(ctx, b.cs)
	if err != nil {
		return nil, err
	}
	api1, etcd1 := sampleProcs([]int{b.apiPID}), sampleProcs([]int{b.etcdPID})
	ag1, fk1 := sampleProcs(agentPIDs), sampleProcs(fakePIDs)
	secs := time.Since(t0).Seconds()
	w := &Window{Seconds: secs, RequestsPerSec: map[string]float64{}, ByResourcePerSec: map[string]float64{},
		Watchers: a1.Watchers, LongRunning: a1.LongRunningWatches,
		APIServerCores: (api1.CPU - api0.CPU) / secs, EtcdCores: (etcd1.CPU - etcd0.CPU) / secs,
		AgentCores: (ag1.CPU - ag0.CPU) / secs, FakeCores: (fk1.CPU - fk0.CPU) / secs,
		APIServerRSS: api1.RSS, EtcdRSS: etcd1.RSS, AgentRSS: ag1.RSS, FakeRSS: fk1.RSS}
	for k, v := range a1.RequestsByVerb {
		if d := v - a0.RequestsByVerb[k]; d > 0 {
			w.RequestsPerSec[k] = d / secs
			w.TotalRequestsPS += d / secs
		}
	}
	for k, v := range a1.RequestsByVerbResource {
		if d := v - a0.RequestsByVerbResource[k]; d > 0 {
			w.ByResourcePerSec[k] = d / secs
		}
	}
	rate := func(x0, x1 float64) float64 {
		if x0 < 0 || x1 < 0 {
			return -1
		}
		return (x1 - x0) / secs
	}
	w.ResponseBytesPS = rate(a0.ResponseBytes, a1.ResponseBytes)
	w.WatchBytesPS = rate(a0.WatchEventBytes, a1.WatchEventBytes)
	w.RequestBytesPS = rate(a0.RequestBytes, a1.RequestBytes)
	w.WatchEventsPS = rate(a0.WatchEvents, a1.WatchEvents)
	return w, nil
}

func (b *bench) nodeNames(ctx context.Context, label string) ([]string, error) {
	l, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range l.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names, nil
}

// waitReady waits until n nodes with label are Ready.
func (b *bench) waitReady(ctx context.Context, label string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	ready := 0
	for {
		l, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: label})
		if err == nil {
			ready = 0
			for _, node := range l.Items {
				for _, c := range node.Status.Conditions {
					if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
						ready++
					}
				}
			}
			if ready >= n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes (%s) Ready after %s", ready, n, label, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// cleanup deletes the bench pods (the agent confirms each), stops the
// processes, then deletes the Nodes and their Leases. It runs on its own
// context: a cancelled run still cleans up.
func (b *bench) cleanup(f fleet, a string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pods := b.cs.CoreV1().Pods(namespace)
	_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	var errs []string
	for deadline := time.Now().Add(40 * time.Second); ; {
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Sprintf("pods still there after 40 s: force-deleted"))
			zero := int64(0)
			_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
			break
		}
		time.Sleep(time.Second)
	}
	f.Stop(10 * time.Second)
	label := "bench.crivk.io/fleet=" + a
	names, _ := b.nodeNames(ctx, label)
	for _, n := range names {
		if err := b.cs.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err.Error())
		}
		if err := b.cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// ensureNamespace creates the bench namespace, first waiting for one an
// earlier run left terminating (etcd outlives the cluster's processes).
func ensureNamespace(ctx context.Context, cs kubernetes.Interface) error {
	for deadline := time.Now().Add(120 * time.Second); ; {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
			if err == nil || !apierrors.IsAlreadyExists(err) {
				return err
			}
		case err != nil:
			return err
		case ns.DeletionTimestamp == nil:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s still terminating after 120 s", namespace)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
