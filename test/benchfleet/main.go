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

	"github.com/crivk/crivk/test/procfs"
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
	if b.apiPID, err = procfs.ReadPID(filepath.Join(cfg.pidsDir, "kube-apiserver.pid")); err != nil {
		return err
	}
	if b.etcdPID, err = procfs.ReadPID(filepath.Join(cfg.pidsDir, "etcd.pid")); err != nil {
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
