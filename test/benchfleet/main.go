package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// config is the command line.
type config struct {
	root, out, docs, command string
	nodeCounts               []int
	agents                   []string
	kubeconfig               string
	env                      env
	pidsDir                  string
	podsPerNode              int
	baseline, steady, churn  time.Duration
	deadline                 time.Time
	crivkArgs                []string
	smoke                    bool
	render                   string
}

func parseConfig() (*config, error) {
	c := &config{}
	var nodes, agents, deadline, crivkArgs string
	flag.StringVar(&c.root, "root", ".", "repository root")
	flag.StringVar(&c.out, "out", "", "results directory")
	flag.StringVar(&c.docs, "docs", "", "write this markdown report (docs/benchmarks-fleet.md) and its plots beside it")
	flag.StringVar(&c.command, "command", "make bench-fleet", "the command line shown in the report")
	flag.StringVar(&nodes, "nodes", "10,50,100", "node counts, in order")
	flag.StringVar(&agents, "agents", "crivk,kubelet", "agents (crivk, kubelet); the order alternates per node count")
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "admin kubeconfig")
	flag.StringVar(&c.env.bin, "bin", "_output/bin", "directory of crivk, fakecri and kubemark")
	flag.StringVar(&c.env.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "the bootstrap token's kubeconfig (both sides join with it)")
	flag.StringVar(&c.env.caCert, "ca", "", "cluster CA (crivk's --client-ca-file)")
	flag.StringVar(&c.env.servingCert, "serving-cert", "", "crivk's serving certificate")
	flag.StringVar(&c.env.servingKey, "serving-key", "", "crivk's serving key")
	flag.StringVar(&c.env.nodeIP, "node-ip", "", "the machine's IP")
	flag.IntVar(&c.env.qps, "kube-api-qps", 50, "API client QPS of every node, both agents")
	flag.IntVar(&c.env.burst, "kube-api-burst", 100, "API client burst of every node, both agents")
	flag.StringVar(&c.pidsDir, "pids-dir", "_output/local/pids", "hack/local-up.sh's PID files (kube-apiserver.pid, etcd.pid)")
	flag.IntVar(&c.podsPerNode, "pods-per-node", 3, "pods run on every node through the steady and churn windows")
	flag.DurationVar(&c.baseline, "baseline", 15*time.Second, "baseline window (no bench node)")
	flag.DurationVar(&c.steady, "steady", 30*time.Second, "steady window")
	flag.DurationVar(&c.churn, "churn", 45*time.Second, "churn window")
	flag.StringVar(&deadline, "deadline", "", "RFC 3339 time: a node count whose estimated run would end later is skipped")
	flag.StringVar(&crivkArgs, "crivk-args", "", "extra crivk arguments, space separated")
	flag.BoolVar(&c.smoke, "smoke", false, "label the report as a smoke run")
	flag.StringVar(&c.render, "render", "", "only render this results.json into -out (and -docs): no run")
	flag.Parse()
	if c.render != "" {
		if c.out == "" {
			return nil, fmt.Errorf("-render needs -out")
		}
		return c, nil
	}
	for _, s := range strings.Split(nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-nodes %q: %q is no node count", nodes, s)
		}
		c.nodeCounts = append(c.nodeCounts, n)
	}
	for _, a := range strings.Split(agents, ",") {
		a = strings.TrimSpace(a)
		if a != "crivk" && a != "kubelet" {
			return nil, fmt.Errorf("-agents: unknown agent %q", a)
		}
		c.agents = append(c.agents, a)
	}
	if deadline != "" {
		d, err := time.Parse(time.RFC3339, deadline)
		if err != nil {
			return nil, fmt.Errorf("-deadline: %w", err)
		}
		c.deadline = d
	}
	c.crivkArgs = strings.Fields(crivkArgs)
	if c.out == "" || c.kubeconfig == "" || c.env.bootstrapKubeconfig == "" || c.env.nodeIP == "" {
		return nil, fmt.Errorf("-out, -kubeconfig, -bootstrap-kubeconfig and -node-ip are required")
	}
	return c, nil
}

// Results is results.json.
type Results struct {
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Commit   string    `json:"commit"`
	Machine  string    `json:"machine"`
	Smoke    bool      `json:"smoke"`
	Config   struct {
		PodsPerNode int     `json:"podsPerNode"`
		Baseline    float64 `json:"baselineSeconds"`
		Steady      float64 `json:"steadySeconds"`
		Churn       float64 `json:"churnSeconds"`
		QPS         int     `json:"qps"`
		Burst       int     `json:"burst"`
	} `json:"config"`
	Runs    []*Run   `json:"runs"`
	Skipped []string `json:"skipped,omitempty"`
}

// Run is one agent at one node count.
type Run struct {
	Agent          string  `json:"agent"`
	Nodes          int     `json:"nodes"`
	Error          string  `json:"error,omitempty"`
	Processes      int     `json:"processes"`
	ReadySeconds   float64 `json:"readySeconds"`
	Baseline       *Window `json:"baseline,omitempty"`
	Steady         *Window `json:"steady,omitempty"`
	Churn          *Window `json:"churn,omitempty"`
	StartPods      int     `json:"startPods"`
	StartNotRun    int     `json:"startNotRunning"`
	StartP50       float64 `json:"startP50"`
	StartP90       float64 `json:"startP90"`
	StartSeconds   float64 `json:"startAllRunningSeconds"`
	ChurnCreated   int     `json:"churnCreated"`
	ChurnNotRun    int     `json:"churnNotRunning"`
	ChurnP50       float64 `json:"churnP50"`
	ChurnP90       float64 `json:"churnP90"`
	DeleteP50      float64 `json:"deleteP50"`
	DeleteP90      float64 `json:"deleteP90"`
	ChurnNotGone   int     `json:"churnNotGone"`
	CleanupSeconds float64 `json:"cleanupSeconds"`
}

// Window is one measured interval.
type Window struct {
	Seconds          float64            `json:"seconds"`
	RequestsPerSec   map[string]float64 `json:"requestsPerSec"`
	ByResourcePerSec map[string]float64 `json:"byResourcePerSec"`
	Watchers         float64            `json:"watchers"`
	LongRunning      float64            `json:"longRunningWatches"`
	ResponseBytesPS  float64            `json:"responseBytesPerSec"`
	WatchBytesPS     float64            `json:"watchEventBytesPerSec"`
	RequestBytesPS   float64            `json:"requestBytesPerSec"`
	WatchEventsPS    float64            `json:"watchEventsPerSec"`
	APIServerCores   float64            `json:"apiserverCores"`
	EtcdCores        float64            `json:"etcdCores"`
	AgentCores       float64            `json:"agentCores"`
	FakeCores        float64            `json:"fakeRuntimeCores"`
	APIServerRSS     uint64             `json:"apiserverRSS"`
	EtcdRSS          uint64             `json:"etcdRSS"`
	AgentRSS         uint64             `json:"agentRSS"`
	FakeRSS          uint64             `json:"fakeRuntimeRSS"`
	TotalRequestsPS  float64            `json:"totalRequestsPerSec"`
}

type bench struct {
	cfg             *config
	cs              kubernetes.Interface
	apiPID, etcdPID int
}

func main() {
	cfg, err := parseConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-fleet:", err)
		os.Exit(2)
	}
	if cfg.render != "" {
		if err := render(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "bench-fleet:", err)
			os.Exit(1)
		}
		return
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if !cfg.deadline.IsZero() {
		// Past the deadline the run in progress stops and cleans up.
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, cfg.deadline)
		defer stop()
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench-fleet:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...interface{}) {
	fmt.Printf("%s bench-fleet: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, cfg *config) error {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, cs: cs}
	if b.apiPID, err = readPID(filepath.Join(cfg.pidsDir, "kube-apiserver.pid")); err != nil {
		return err
	}
	if b.etcdPID, err = readPID(filepath.Join(cfg.pidsDir, "etcd.pid")); err != nil {
		return err
	}
	res := &Results{Command: cfg.command, Started: time.Now().UTC(), Commit: gitCommit(cfg.root), Machine: machine(), Smoke: cfg.smoke}
	res.Config.PodsPerNode, res.Config.QPS, res.Config.Burst = cfg.podsPerNode, cfg.env.qps, cfg.env.burst
	res.Config.Baseline, res.Config.Steady, res.Config.Churn = cfg.baseline.Seconds(), cfg.steady.Seconds(), cfg.churn.Seconds()
	if err := ensureNamespace(ctx, cs); err != nil {
		return err
	}
	// Pods of a namespace without its default ServiceAccount yet wait for
	// their token volume: wait for it, as the e2e framework does.
	for deadline := time.Now().Add(60 * time.Second); ; {
		if _, err := cs.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("no default ServiceAccount in namespace %s after 60 s: %w", namespace, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	save := func() error {
		res.Finished = time.Now().UTC()
		j, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cfg.out, "results.json"), j, 0o644); err != nil {
			return err
		}
		return writeReports(res, cfg)
	}
	for i, n := range cfg.nodeCounts {
		if !cfg.deadline.IsZero() {
			if end := time.Now().Add(estimate(cfg, n)); end.After(cfg.deadline) {
				msg := fmt.Sprintf("%d nodes: skipped, its estimated %s would end at %s, after the deadline %s",
					n, estimate(cfg, n).Round(time.Second), end.UTC().Format("15:04"), cfg.deadline.UTC().Format("15:04"))
				logf("%s", msg)
				res.Skipped = append(res.Skipped, msg)
				continue
			}
		}
		agents := append([]string(nil), cfg.agents...)
		if i%2 == 1 {
			sort.Sort(sort.Reverse(sort.StringSlice(agents)))
		}
		for _, a := range agents {
			if ctx.Err() != nil {
				break
			}
			r := b.runOne(ctx, a, n)
			res.Runs = append(res.Runs, r)
			if err := save(); err != nil {
				return err
			}
		}
	}
	if err := save(); err != nil {
		return err
	}
	_ = cs.CoreV1().Namespaces().Delete(context.Background(), namespace, metav1.DeleteOptions{})
	for _, r := range res.Runs {
		if r.Error != "" {
			return fmt.Errorf("%s at %d nodes: %s", r.Agent, r.Nodes, r.Error)
		}
	}
	return ctx.Err()
}

// estimate is a generous guess of one node count's run, both agents.
func estimate(cfg *config, n int) time.Duration {
	// The smoke run at 10 nodes took 8 s over its windows per agent;
	// the hollow nodes' start and the pod batches grow with N.
	per := 20*time.Second + time.Duration(n)*800*time.Millisecond + cfg.baseline + cfg.steady + cfg.churn + 20*time.Second
	return time.Duration(len(cfg.agents)) * per
}

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

// render rewrites the reports of an earlier run's results.json.
func render(cfg *config) error {
	b, err := os.ReadFile(cfg.render)
	if err != nil {
		return err
	}
	res := &Results{}
	if err := json.Unmarshal(b, res); err != nil {
		return fmt.Errorf("%s: %w", cfg.render, err)
	}
	return writeReports(res, cfg)
}
