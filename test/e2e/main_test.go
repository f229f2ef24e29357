// Package e2e tests crivk as the node of a real local cluster: kube-apiserver,
// scheduler and controller-manager from hack/local-up.sh, the project's own
// containerd, and crivk started by this package's TestMain through
// hack/run-crivk.sh. Run it with `make test-e2e` (or `make test`); without
// CRIVK_E2E=1 (set by hack/test.sh once the cluster is up) the package
// fails rather than pass having run nothing.
//
// The harness owns crivk's process: a test stops or restarts it only
// through stopCrivkFor, killCrivkFor, startCrivkFor or withCrivkFlags,
// which make the test end with crivk running with the defaults. Each test
// deletes its namespaces and waits for them to go (newNamespace,
// deleteNamespace). After each test that restarts crivk, and at the
// suite's end, the leak check (leak_test.go) fails the run on anything
// crivk left of a deleted pod (sandbox, container, pod cgroup, mount) and
// on a crivk process whose goroutines, open files or RSS grew past the
// bounds of its baseline.
//
// Which tests run in parallel (parallelTests): go test runs every test
// that does not call t.Parallel first, one at a time, and then the
// parallel ones together (hack/test.sh: -parallel 4). A test calls
// t.Parallel, as its first statement, only if it touches pods of its own
// namespace and nothing of the node's: it does not stop or restart crivk,
// containerd or the API server, changes no flag, node object, node
// condition or image set, reads no node-wide count (metrics, stats, the
// runtime's list beyond its pod's UID), asks for no CPU request, and
// asserts no duration tight enough (a few seconds) for a loaded machine
// to break. TestEvictionDiskPressure is parallel as well: its node,
// containerd and filesystems are its own. Everything else stays serial,
// so a restart or a node-wide check never sees another test's pods.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	client   kubernetes.Interface
	runtime  cri.RuntimeService
	nodeName string
	nodeIP   string
	busybox  string
	// restConfig is the admin client's configuration (streaming tests
	// build SPDY and WebSocket executors from it).
	restConfig *rest.Config

	// stopCrivk stops the running crivk; nil while crivk is down. Tests
	// that stop or restart crivk do it through stopCrivkFor, killCrivkFor,
	// startCrivkFor or withCrivkFlags, which make the test end with crivk
	// running (restartsCrivk).
	stopCrivk func() error
	// crivkStartedAt is when the running crivk was started (its node's
	// events since then are its own).
	crivkStartedAt time.Time
)

func TestMain(m *testing.M) {
	if os.Getenv("CRIVK_E2E") != "1" {
		// Not a pass: nothing was tested. go test ./... fails here
		// rather than report ok for a package that ran nothing.
		fmt.Println("e2e: FAIL: these tests need the local cluster: run them through `make test-e2e` (hack/test.sh e2e), which brings it up and sets CRIVK_E2E=1")
		os.Exit(1)
	}
	os.Exit(run(m))
}

func mustEnv(k string) string {
	v := os.Getenv(k)
	if v == "" {
		fmt.Fprintf(os.Stderr, "e2e: %s is not set; source _output/local/env\n", k)
		os.Exit(2)
	}
	return v
}

func run(m *testing.M) int {
	nodeName = mustEnv("NODE_NAME")
	nodeIP = mustEnv("NODE_IP")
	busybox = mustEnv("BUSYBOX_IMAGE")
	cfg, err := clientcmd.BuildConfigFromFlags("", mustEnv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	cfg.QPS, cfg.Burst = 100, 200
	restConfig = cfg
	client = kubernetes.NewForConfigOrDie(cfg)
	rt, err := cri.Connect(context.Background(), cri.Config{Endpoint: mustEnv("CRI_ENDPOINT"), PodLogDir: filepath.Join(mustEnv("LOCAL_DIR"), "pods")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: CRI:", err)
		return 2
	}
	defer rt.Close()
	runtime = rt.Services()

	stopCrivk, err = startCrivk()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	// The tests start from a Ready node, as they would after an earlier
	// test: a test that stops crivk before it handles SIGTERM would see an
	// unclean exit that is only the harness's.
	ready := wait.PollUntilContextTimeout(context.Background(), poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return nodeReady(ctx).Status == v1.ConditionTrue, nil
	})
	if ready != nil {
		fmt.Fprintf(os.Stderr, "e2e: node %s not Ready 2m after crivk's start: %s\n", nodeName, nodeDigest(context.Background()))
		_ = stopCrivk()
		return 2
	}
	if baseline, err = takeBaseline(context.Background(), "the suite's start"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: crivk's baseline:", err)
		_ = stopCrivk()
		return 2
	}
	code := m.Run()
	// The leak check: every test namespace gone, nothing left of a
	// deleted pod, crivk's process within its baseline's bounds.
	fmt.Println("e2e: leak check at the suite's end")
	if leaks := suiteLeakCheck(); len(leaks) > 0 {
		fmt.Printf("e2e: FAIL: leak check at the suite's end: %d leaks:\n  %s\n", len(leaks), strings.Join(leaks, "\n  "))
		if code == 0 {
			code = 1
		}
	} else {
		fmt.Println("e2e: leak check at the suite's end: no test namespace, no sandbox, container, pod cgroup or mount of a deleted pod left; crivk's goroutines, open files and RSS within their bounds")
	}
	if code != 0 {
		collectSuiteEvidence(code)
	}
	if stopCrivk == nil {
		fmt.Fprintln(os.Stderr, "e2e: crivk was down at the suite's end")
		return max(code, 1)
	}
	if err := stopCrivk(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping crivk:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// withCrivkFlags runs crivk with extraArgs for the rest of the test: crivk
// is stopped, prepare runs (nil: nothing), crivk starts with the flags.
// When the test ends crivk is stopped, restore runs (nil: nothing) and
// crivk runs again with the defaults, its node Ready, as the other tests
// expect it; then restartsCrivk's leak check runs.
func withCrivkFlags(t *testing.T, prepare, restore func(), extraArgs ...string) {
	t.Helper()
	restartsCrivk(t) // registered first: its check runs after the restart below
	// The process is gone either way (stopCrivk kills what SIGTERM did not
	// end): the clean-up below still starts crivk with the defaults, so
	// that one unclean stop fails this test, not every test after it.
	if err := stopCrivkFor(t); err != nil {
		t.Errorf("crivk did not stop cleanly: %v", err)
	}
	t.Cleanup(func() {
		if stopCrivk != nil {
			if err := stopCrivk(); err != nil {
				t.Errorf("crivk with %v did not stop cleanly: %v", extraArgs, err)
			}
			stopCrivk = nil
		}
		if restore != nil {
			restore()
		}
		started := time.Now()
		if err := startCrivkFor(t); err != nil {
			t.Errorf("restarting crivk with the defaults: %v", err)
			return
		}
		// Ready may still be the True of before the restart (a stop
		// shorter than the node controller's grace changes nothing):
		// wait for the restarted crivk's own lease renewal, so that it is
		// past its start (its SIGTERM handler installed) when the next
		// test stops it.
		waitFleetRenewed(t, []string{nodeName}, started, 2*time.Minute)
	})
	if prepare != nil {
		prepare()
	}
	if err := startCrivkFor(t, extraArgs...); err != nil {
		t.Fatalf("starting crivk with %v: %v", extraArgs, err)
	}
}

// stopCrivkFor stops crivk with SIGTERM for the rest of t or until
// startCrivkFor, after checking its process against its baseline
// (checkBeforeStop). If t ends with crivk down, restartsCrivk's cleanup
// starts it again with the defaults.
func stopCrivkFor(t *testing.T) error {
	t.Helper()
	restartsCrivk(t)
	checkBeforeStop(t)
	if stopCrivk == nil {
		return nil
	}
	err := stopCrivk()
	stopCrivk = nil
	return err
}

// killCrivkFor kills crivk with SIGKILL and reaps it, for the rest of t
// or until startCrivkFor (restartsCrivk as stopCrivkFor).
func killCrivkFor(t *testing.T) {
	t.Helper()
	restartsCrivk(t)
	baseline = nil // no graceful stop to check before
	if err := syscall.Kill(crivkPID(t), syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 crivk: %v", err)
	}
	if stopCrivk != nil {
		_ = stopCrivk() // reaps the killed process; its error is the SIGKILL
		stopCrivk = nil
	}
}

// startCrivkFor starts crivk with extraArgs (none: the defaults) after
// stopCrivkFor or killCrivkFor.
func startCrivkFor(t *testing.T, extraArgs ...string) error {
	t.Helper()
	restartsCrivk(t)
	if stopCrivk != nil {
		return fmt.Errorf("crivk already runs")
	}
	stop, err := startCrivk(extraArgs...)
	if err != nil {
		return err
	}
	stopCrivk = stop
	return nil
}

// startCrivk runs crivk as the local node, its log in
// _output/local/logs/crivk-e2e.log, and returns how to stop it (SIGTERM,
// then an error if it did not exit cleanly within 10 s).
func startCrivk(extraArgs ...string) (func() error, error) {
	return startCrivkBinary("", extraArgs...)
}

// startCrivkBinary is startCrivk with another build of crivk (empty: the
// one under test), run by hack/run-crivk.sh with the same settings.
func startCrivkBinary(bin string, extraArgs ...string) (func() error, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(mustEnv("LOCAL_DIR"), "logs", "crivk-e2e.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// pprof on loopback: the streaming test counts crivk's goroutines.
	// Tracing on: every test runs with it (TestTracing reads the spans).
	args := append([]string{"--log-level=debug", "--profiling-address=" + crivkProfilingAddr, "--tracing"}, extraArgs...)
	cmd := exec.Command(filepath.Join(root, "hack", "run-crivk.sh"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if bin != "" {
		cmd.Env = append(os.Environ(), "CRIVK_BIN="+bin)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	crivkStartedAt = time.Now()
	baseline = nil // taken once the new process is clean (restartsCrivk)
	what := "crivk"
	if bin != "" {
		what = "crivk " + bin
	}
	fmt.Printf("e2e: %s started (pid %d), log %s\n", what, cmd.Process.Pid, logPath)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func() error {
		defer logf.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			return fmt.Errorf("crivk did not exit within 10s of SIGTERM")
		}
	}, nil
}

// crivkProfilingAddr is where the e2e's crivk serves net/http/pprof.
const crivkProfilingAddr = "127.0.0.1:16060"

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
