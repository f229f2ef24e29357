package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/test/procfs"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
)

type options struct {
	root, out, docs, replot string
	lanes                   []string
	quick                   bool
	qps                     float64
	burst                   int
	maxPods                 int
	profilingAddress        string
	crivkArgs               string
	command                 string
	// steadyPods and steadyDuration, if set, replace the plan's W5 levels
	// and window.
	steadyPods     string
	steadyDuration time.Duration
	// only, batchSizes, repeat and crivkVariants make a focused run
	// (focus.go).
	only, batchSizes, crivkVariants string
	repeat                          int
	// rawParallelism, if set, replaces the plan's RawParallelism
	// (rawparallel.go).
	rawParallelism string
}

func main() {
	var o options
	var lanes string
	flag.StringVar(&o.root, "root", ".", "the crivk checkout (hack/run-*.sh, _output/local)")
	flag.StringVar(&o.out, "out", "", "results directory (default _output/bench/<UTC timestamp>)")
	flag.StringVar(&o.docs, "docs", "", "if set, rewrite this markdown file (docs/benchmarks.md) from the results")
	flag.StringVar(&o.replot, "replot", "", "only rebuild the report and plots from this results.json")
	flag.StringVar(&lanes, "lanes", "raw,rawapi,kubelet,crivk", "lanes to run, in order")
	flag.BoolVar(&o.quick, "quick", os.Getenv("BENCH_QUICK") == "1", "quick plan (default $BENCH_QUICK=1)")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "API client QPS of the agents (rawapi's too)")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "API client burst of the agents (rawapi's too)")
	flag.IntVar(&o.maxPods, "max-pods", 500, "maxPods of both agents (and the rawapi lane's node): the plan's largest batch")
	flag.StringVar(&o.profilingAddress, "crivk-profiling-address", "", "if set, crivk serves pprof there during its lane")
	flag.StringVar(&o.crivkArgs, "crivk-args", "", "extra crivk arguments (space-separated), e.g. --runtime-events=false")
	flag.StringVar(&o.steadyPods, "steady-pods", "", "W5 levels, comma-separated pod counts (default: the plan's), e.g. 0,30,110")
	flag.DurationVar(&o.steadyDuration, "steady-duration", 0, "W5 window per level (default: the plan's)")
	flag.StringVar(&o.only, "only", "", "only these steps, comma-separated: w1, w2 (the batches, created and deleted), w4, w5; the warm-up pod always runs (a focused run)")
	flag.StringVar(&o.rawParallelism, "raw-parallelism", "", "the raw lane's settings for each W2/W3 batch, comma-separated bounds on its sandbox calls in flight, 0 for none; the best of them is the raw figure (default: the plan's), e.g. 0,8")
	flag.StringVar(&o.batchSizes, "batch-sizes", "", "W2/W3 batch sizes, comma-separated (default: the plan's), e.g. 110")
	flag.IntVar(&o.repeat, "repeat", 1, "rounds of every lane (a focused run if above 1), interleaved with the crivk variants")
	flag.StringVar(&o.crivkVariants, "crivk-variants", "", "crivk argument sets separated by ';', each run in every round after -crivk-args (a focused run), e.g. '--max-parallel-sandboxes=0;--max-parallel-sandboxes=4'")
	var traceFile, tracePod string
	flag.StringVar(&traceFile, "trace-tree", "", "only print the traces of -trace-pod from this crivk --trace-file as trees, and exit")
	flag.StringVar(&tracePod, "trace-pod", "", "with -trace-tree, the pod: NAMESPACE/NAME")
	flag.StringVar(&o.command, "command", "", "the command line to print in the report (hack/bench.sh sets it)")
	flag.Parse()
	if traceFile != "" {
		if err := traceTree(traceFile, tracePod); err != nil {
			log.Fatalf("bench: %v", err)
		}
		return
	}
	o.lanes = strings.Split(lanes, ",")
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	if err := run(o); err != nil {
		log.Fatalf("bench: %v", err)
	}
}

// Results is results.json.
type Results struct {
	Started  time.Time    `json:"started"`
	Seconds  float64      `json:"seconds"`
	Quick    bool         `json:"quick"`
	Plan     Plan         `json:"plan"`
	Machine  Machine      `json:"machine"`
	Command  string       `json:"command"`
	Settings Settings     `json:"settings"`
	Lanes    []LaneResult `json:"lanes"`
}

// Settings are what both agents were given.
type Settings struct {
	QPS     float64 `json:"kubeAPIQPS"`
	Burst   int     `json:"kubeAPIBurst"`
	MaxPods int     `json:"maxPods"`
}

func run(o options) error {
	if o.replot != "" {
		b, err := os.ReadFile(o.replot)
		if err != nil {
			return err
		}
		var r Results
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", o.replot, err)
		}
		return writeReport(&r, filepath.Dir(o.replot), o.docs)
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	o.root = root
	env := func(k string) (string, error) {
		if v := os.Getenv(k); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("$%s is not set: source _output/local/env (hack/bench.sh does)", k)
	}
	var kubeconfig, criEndpoint, nodeName, localDir, busybox, pause string
	for k, p := range map[string]*string{"KUBECONFIG": &kubeconfig, "CRI_ENDPOINT": &criEndpoint, "NODE_NAME": &nodeName,
		"LOCAL_DIR": &localDir, "BUSYBOX_IMAGE": &busybox, "PAUSE_IMAGE": &pause} {
		if *p, err = env(k); err != nil {
			return err
		}
	}
	r := &Results{Started: time.Now().UTC(), Quick: o.quick, Plan: FullPlan, Machine: machine(), Command: o.command,
		Settings: Settings{QPS: o.qps, Burst: o.burst, MaxPods: o.maxPods}}
	if o.quick {
		r.Plan = QuickPlan
	}
	if r.Plan, err = withSteady(r.Plan, o.steadyPods, o.steadyDuration); err != nil {
		return err
	}
	rawPar, err := parseParallelism(o.rawParallelism)
	if err != nil {
		return err
	}
	if rawPar != nil {
		r.Plan.RawParallelism = rawPar
	}
	only, err := parseOnly(o.only)
	if err != nil {
		return err
	}
	sizes, err := parseBatchSizes(o.batchSizes)
	if err != nil {
		return err
	}
	variants, err := parseVariants(o.crivkVariants)
	if err != nil {
		return err
	}
	if r.Plan, err = withFocus(r.Plan, only, sizes, o.repeat); err != nil {
		return err
	}
	runs := schedule(o.lanes, variants, o.repeat)
	focused := len(only) > 0 || o.repeat > 1 || len(variants) > 0
	if focused && o.docs != "" {
		return fmt.Errorf("-docs with a focused run (-only, -repeat, -crivk-variants): its report is per setting; write the figures into the hand-written part")
	}
	if o.out == "" {
		o.out = filepath.Join(root, "_output/bench", r.Started.Format("20060102T150405Z"))
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()

	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	hcfg := rest.CopyConfig(admin)
	hcfg.QPS, hcfg.Burst, hcfg.UserAgent = 2000, 2000, "crivk-bench"
	client, err := kubernetes.NewForConfig(hcfg)
	if err != nil {
		return err
	}
	proxy, err := startProxy(admin)
	if err != nil {
		return err
	}
	defer proxy.Close()
	agentKubeconfig := filepath.Join(o.out, "agent.kubeconfig")
	if err := proxy.writeKubeconfig(agentKubeconfig); err != nil {
		return err
	}

	podLogDir := filepath.Join(localDir, "pods")
	// The raw lane's CRI calls get the agents' timeout, the kubelet's
	// --runtime-request-timeout (2 minutes; RunPodSandbox twice that):
	// containerd serves batches of 110 and 250 sandboxes one after another.
	rt, err := cri.Connect(ctx, cri.Config{Endpoint: criEndpoint, RequestTimeout: 2 * time.Minute, PodLogDir: podLogDir, DNS: cri.DNSConfig{ClusterDomain: "cluster.local", ResolvConf: "/etc/resolv.conf"}})
	if err != nil {
		return err
	}
	defer rt.Close()
	cdPID, err := procfs.ReadPID(filepath.Join(localDir, "pids/containerd.pid"))
	if err != nil {
		return fmt.Errorf("containerd PID: %w", err)
	}
	// The shims of this containerd name its socket (-address); NODE_IP is
	// the rawapi agent's node address. Both optional.
	shimAddress := os.Getenv("CONTAINERD_ADDRESS")
	nodeIP := os.Getenv("NODE_IP")

	const ns = "crivk-bench"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	// Pods are refused until the namespace's default ServiceAccount exists.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the default ServiceAccount of %s never appeared: %w", ns, err)
	}
	f := podFactory{ns: ns, node: nodeName, image: pause, busybox: busybox, run: r.Started.Format("20060102T150405Z")}
	// Isolation between lanes: a containerd pushed past its limits (a raw
	// batch whose calls timed out) may need minutes to work through its
	// backlog; every sandbox must be gone, and stay gone for 5 listings a
	// second apart, before the next lane starts.
	n := &node{cri: rt.Services(), client: client, ns: ns, name: nodeName, poll: time.Second, timeout: 5 * time.Minute, quiet: 5}

	var lanes []lane
	for i, rn := range runs {
		var l lane
		switch rn.lane {
		case "raw":
			l = &rawLane{rt: rt, cdPID: cdPID}
		case "rawapi":
			// The agents' API client settings, through the counting proxy.
			acfg, err := clientcmd.BuildConfigFromFlags("", agentKubeconfig)
			if err != nil {
				return err
			}
			acfg.QPS, acfg.Burst, acfg.UserAgent = float32(o.qps), o.burst, "crivk-bench-rawapi"
			ac, err := kubernetes.NewForConfig(acfg)
			if err != nil {
				return err
			}
			l = &rawAPILane{rt: rt, client: client, agentClient: ac, ns: ns, node: nodeName, nodeIP: nodeIP, maxPods: o.maxPods, cdPID: cdPID, proxy: proxy}
		case "kubelet", "crivk", tracedLane:
			logName := rn.lane + ".log"
			if focused {
				// One log per run: <lane>-<round>-<run>.log.
				logName = fmt.Sprintf("%s-%d-%d.log", rn.lane, rn.round, i+1)
			}
			l = &agentLane{name: rn.lane, o: o, kubeconfig: agentKubeconfig, client: client, ns: ns, variant: strings.Fields(rn.variant),
				node: nodeName, selector: benchLabel, cdPID: cdPID, cri: rt.Services(), proxy: proxy, logPath: filepath.Join(o.out, logName)}
		default:
			return fmt.Errorf("unknown lane %q (raw, rawapi, kubelet, crivk, %s)", rn.lane, tracedLane)
		}
		if focused {
			l = &describedLane{lane: l, variant: rn.variant, round: rn.round}
		}
		lanes = append(lanes, l)
	}
	work := func(ctx context.Context, d driver, m meters, res *LaneResult) error {
		plan := r.Plan
		if res.Lane == "raw" && plan.RawSteadyDuration > 0 {
			plan.SteadyDuration = plan.RawSteadyDuration
		}
		w := &workloads{d: d, f: f, plan: plan, m: m, clock: clock.RealClock{}, logf: func(format string, args ...any) {
			log.Printf("lane %s: "+format, append([]any{res.Lane}, args...)...)
		}, jitter: func() time.Duration { return time.Duration(rand.Int64N(int64(time.Second))) }}
		if res.Lane == "rawapi" {
			// Its agent has no exit handling (W4) and is the harness
			// itself (W5 would measure the harness).
			w.skip = map[string]bool{"w4": true, "w5": true}
		}
		// The raw lanes' agent is the harness itself.
		agent := m.agentPID
		if agent == 0 {
			agent = os.Getpid()
		}
		w.cpu = newCPUSampler(agent, m.containerdPID, shimAddress, w.logf)
		return w.run(ctx, res)
	}
	// results.json and report.md are written after every lane, so that a
	// run stopped in a later lane keeps the lanes done; docs only at the end.
	save := func(lanes []LaneResult, docs string) error {
		r.Lanes = lanes
		r.Seconds = time.Since(r.Started).Seconds()
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(o.out, "results.json"), b, 0o644); err != nil {
			return err
		}
		return writeReport(r, o.out, docs)
	}
	done := runLanes(ctx, n, lanes, work, log.Printf, func(lanes []LaneResult) {
		if err := save(lanes, ""); err != nil {
			log.Printf("saving the results so far: %v", err)
		}
	})
	if err := save(done, o.docs); err != nil {
		return err
	}
	log.Printf("results in %s (%.0f s)", o.out, r.Seconds)
	for _, l := range r.Lanes {
		if l.Error != "" {
			return fmt.Errorf("lane %s: %s", l.Lane, l.Error)
		}
	}
	return nil
}

// rawLane: the harness is the agent.
type rawLane struct {
	rt    *cri.Runtime
	cdPID int
}

func (l *rawLane) Name() string { return "raw" }
func (l *rawLane) setup(ctx context.Context) (driver, meters, error) {
	return newRawDriver(l.rt, clock.RealClock{}), meters{containerdPID: l.cdPID}, nil
}
func (l *rawLane) teardown(ctx context.Context) error { return nil }

// agentLane: kubelet or crivk as the node.
type agentLane struct {
	name, kubeconfig, ns, node, selector, logPath string
	o                                             options
	client                                        kubernetes.Interface
	cdPID                                         int
	cri                                           containers
	proxy                                         *countingProxy
	// variant is this run's crivk arguments, after -crivk-args.
	variant   []string
	agent     *agentProc
	stopWatch context.CancelFunc
}

func (l *agentLane) Name() string { return l.name }

func (l *agentLane) setup(ctx context.Context) (driver, meters, error) {
	cmd, err := agentCommand(l.o.root, l.name, l.kubeconfig, l.o, l.variant)
	if err != nil {
		return nil, meters{}, err
	}
	if l.agent, err = startAgent(cmd, l.name, l.logPath); err != nil {
		return nil, meters{}, err
	}
	if err := waitNodeReady(ctx, l.client, l.agent, l.node, 2*time.Minute); err != nil {
		return nil, meters{}, err
	}
	wctx, cancel := context.WithCancel(ctx)
	l.stopWatch = cancel
	tr := newTracker(clock.RealClock{})
	if err := tr.run(wctx, l.client, l.ns, l.selector); err != nil {
		return nil, meters{}, err
	}
	d := &apiDriver{client: l.client, ns: l.ns, tr: tr, clock: clock.RealClock{}, cri: l.cri, node: l.node}
	scrape := func(ctx context.Context) (agentCounters, error) { return scrapeAgent(ctx, l.client, l.node) }
	return d, meters{agentPID: l.agent.pid(), containerdPID: l.cdPID, requests: l.proxy.Count, requestsByKind: l.proxy.ByKind, scrape: scrape}, nil
}

// describedLane is a lane of a focused run: its results carry the
// variant and round.
type describedLane struct {
	lane
	variant string
	round   int
}

func (l *describedLane) describe(res *LaneResult) { res.Variant, res.Round = l.variant, l.round }

func (l *agentLane) teardown(ctx context.Context) error {
	if l.stopWatch != nil {
		l.stopWatch()
	}
	if l.agent == nil {
		return nil
	}
	return l.agent.stop()
}

// withSteady returns p with its W5 levels replaced by pods (comma-separated
// counts; "": kept) and its window by d (0: kept).
func withSteady(p Plan, pods string, d time.Duration) (Plan, error) {
	if pods != "" {
		p.SteadyPods = nil
		for _, f := range strings.Split(pods, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 {
				return p, fmt.Errorf("-steady-pods %q: %q is not a pod count", pods, f)
			}
			p.SteadyPods = append(p.SteadyPods, n)
		}
	}
	if d < 0 {
		return p, fmt.Errorf("-steady-duration %s is negative", d)
	}
	if d > 0 {
		p.SteadyDuration = d
	}
	return p, nil
}
