package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/utils/exec"
)

// execURL is the API server's exec subresource of a pod's container c.
func execURL(ns, pod string, opts *v1.PodExecOptions) *url.URL {
	return client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).
		SubResource("exec").VersionedParams(opts, scheme.ParameterCodec).URL()
}

// runningPod creates a busybox pod running script and waits until it is
// Running and Ready.
func runningPod(t *testing.T, ns string, pod *v1.Pod) *v1.Pod {
	t.Helper()
	createPod(t, ns, pod)
	return waitPod(t, ns, pod.Name, 90*time.Second, "Running and Ready", isRunningReady)
}

// TestExecStdinAndExitCode runs `kubectl exec -i` through the API server:
// stdin reaches the command, stdout and stderr come back apart, and the
// command's exit code reaches the client, over SPDY and over WebSocket
// (which the API server translates to SPDY before the node).
func TestExecStdinAndExitCode(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	runningPod(t, ns, busyboxPod("exec", v1.RestartPolicyNever, "sleep 3600"))
	opts := &v1.PodExecOptions{Container: "c", Command: []string{"sh", "-c", "cat; echo to-stderr >&2; exit 3"},
		Stdin: true, Stdout: true, Stderr: true}
	u := execURL(ns, "exec", opts)
	spdyExec, err := remotecommand.NewSPDYExecutor(restConfig, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(restConfig, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]remotecommand.Executor{"spdy": spdyExec, "websocket": wsExec} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := ex.StreamWithContext(testContext(t, 30*time.Second), remotecommand.StreamOptions{
				Stdin: strings.NewReader("hello from stdin\n"), Stdout: &stdout, Stderr: &stderr})
			var exit utilexec.ExitError
			if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
				t.Fatalf("exec: %v (%T), want exit code 3", err, err)
			}
			if stdout.String() != "hello from stdin\n" || stderr.String() != "to-stderr\n" {
				t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
			}
			t.Logf("%s: exit code %d, stdout %q, stderr %q", name, exit.ExitStatus(), stdout.String(), stderr.String())
		})
	}

	// A tty merges stderr into stdout and a terminal size reaches the process.
	ttyOpts := &v1.PodExecOptions{Container: "c", Command: []string{"sh", "-c", "sleep 1; stty size"}, Stdin: true, Stdout: true, TTY: true}
	ex, err := remotecommand.NewSPDYExecutor(restConfig, "POST", execURL(ns, "exec", ttyOpts))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sizes := &fixedSize{size: remotecommand.TerminalSize{Width: 123, Height: 45}}
	// stdin stays open while the command runs: an end of input on a
	// terminal would hang the session up before stty prints.
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	if err := ex.StreamWithContext(testContext(t, 30*time.Second), remotecommand.StreamOptions{
		Stdin: stdinR, Stdout: &out, Tty: true, TerminalSizeQueue: sizes}); err != nil {
		t.Fatalf("tty exec: %v", err)
	}
	if !strings.Contains(out.String(), "45 123") {
		t.Errorf("tty exec printed %q, want the terminal size 45 123", out.String())
	}

	// An unknown container is the node's 404, not a hang.
	bad, err := remotecommand.NewSPDYExecutor(restConfig, "POST", execURL(ns, "exec",
		&v1.PodExecOptions{Container: "nope", Command: []string{"true"}, Stdout: true}))
	if err != nil {
		t.Fatal(err)
	}
	err = bad.StreamWithContext(testContext(t, 30*time.Second), remotecommand.StreamOptions{Stdout: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("exec in an unknown container: %v, want an error naming it", err)
	}
}

type fixedSize struct {
	once sync.Once
	size remotecommand.TerminalSize
}

// Next returns the size once, then nil: no further resize.
func (f *fixedSize) Next() *remotecommand.TerminalSize {
	var s *remotecommand.TerminalSize
	f.once.Do(func() { s = &f.size })
	return s
}

// TestAttach attaches to a container whose main process reads stdin.
func TestAttach(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := busyboxPod("attach", v1.RestartPolicyNever, "while read line; do echo got:$line; done")
	pod.Spec.Containers[0].Stdin = true
	runningPod(t, ns, pod)
	u := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("attach").SubResource("attach").
		VersionedParams(&v1.PodAttachOptions{Container: "c", Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	ex, err := remotecommand.NewSPDYExecutor(restConfig, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	ctx := testContext(t, 30*time.Second)
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdoutW, Stderr: io.Discard})
		stdoutW.Close()
	}()
	// The write blocks until the session reads it; a failed session
	// closes stdout, which ends the read below.
	go func() { _, _ = io.WriteString(stdinW, "ping\n") }()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil || line != "got:ping\n" {
		t.Fatalf("attached stdout %q, %v; want got:ping", line, err)
	}
	stdinW.Close()
	select {
	case err := <-done:
		t.Logf("attach session ended: %v", err)
	case <-ctx.Done():
		t.Fatal("attach session did not end after stdin was closed")
	}
}

// TestPortForward forwards two ports of one pod (two TCP echo servers) and
// a closed one.
func TestPortForward(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	runningPod(t, ns, busyboxPod("pf", v1.RestartPolicyNever,
		"nc -ll -p 8081 -e cat & nc -ll -p 8082 -e sh -c 'read l; echo two:$l' & wait"))
	// The servers listen once the shell has run them; the pod is Ready
	// at once (no probe), so wait for both ports through exec.
	waitListening(t, ns, "pf", 8081, 8082)

	ports := forward(t, ns, "pf", "0:8081", "0:8082", "0:8083")
	if got := roundTrip(t, ports[0], "one\n"); got != "one\n" {
		t.Errorf("port 8081 echoed %q", got)
	}
	if got := roundTrip(t, ports[1], "x\n"); got != "two:x\n" {
		t.Errorf("port 8082 answered %q", got)
	}
	// Two connections at once on the same forwarded port.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := fmt.Sprintf("concurrent-%d\n", i)
			if got := roundTrip(t, ports[0], msg); got != msg {
				t.Errorf("concurrent connection %d echoed %q", i, got)
			}
		}()
	}
	wg.Wait()

	// Nothing listens on 8083: the client's connection is closed without
	// data and the forwarder reports the runtime's error.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[2]))), 5*time.Second)
	if err != nil {
		t.Fatalf("dialing the forwarded closed port: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = conn.Write([]byte("anyone?\n"))
	n, err := conn.Read(make([]byte, 16))
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("closed port: read %d bytes, %v; want the connection closed", n, err)
	}
}

// waitListening waits until the pod's container listens on every port
// (busybox netstat through exec).
func waitListening(t *testing.T, ns, pod string, ports ...int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		out, _, err := execOutput(ctx, ns, pod, "netstat", "-ltn")
		if err != nil {
			return false, nil
		}
		for _, p := range ports {
			if !strings.Contains(out, ":"+strconv.Itoa(p)+" ") {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s never listened on %v", ns, pod, ports)
	}
}

func execOutput(ctx context.Context, ns, pod string, cmd ...string) (string, string, error) {
	return execIn(ctx, ns, pod, "c", cmd...)
}

// execIn runs cmd in container of pod through the API server's exec and
// returns its stdout and stderr.
func execIn(ctx context.Context, ns, pod, container string, cmd ...string) (string, string, error) {
	ex, err := remotecommand.NewSPDYExecutor(restConfig, "POST",
		execURL(ns, pod, &v1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}))
	if err != nil {
		return "", "", err
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	return stdout.String(), stderr.String(), err
}

// forward starts a port-forward through the API server and returns the
// local ports in the order asked.
func forward(t *testing.T, ns, pod string, ports ...string) []uint16 {
	t.Helper()
	tr, upgrader, err := spdy.RoundTripperFor(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	u := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut bytes.Buffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, ports, stop, ready, io.Discard, &syncWriter{w: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward ended before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("port-forward not ready within 30s")
	}
	got, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	local := make([]uint16, len(got))
	for i, p := range got {
		local[i] = p.Local
	}
	return local
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// roundTrip sends msg on a new connection to the local port and returns
// the first line answered.
func roundTrip(t *testing.T, port uint16, msg string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), 5*time.Second)
	if err != nil {
		t.Errorf("dialing local port %d: %v", port, err)
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Errorf("writing to local port %d: %v", port, err)
		return ""
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Errorf("reading from local port %d: %v (got %q)", port, err, line)
	}
	return line
}

// TestStreamSessionsDoNotLeak interrupts 200 exec sessions mid-stream
// (the client goes away while the command still runs) and checks that
// crivk's goroutines and open files come back to where they were.
func TestStreamSessionsDoNotLeak(t *testing.T) {
	ns := newNamespace(t)
	runningPod(t, ns, busyboxPod("leak", v1.RestartPolicyNever, "sleep 3600"))
	pid := crivkPID(t)
	// One session first, so that lazily started machinery (client
	// connections, the proxy's pools) counts in the baseline.
	interruptedExec(t, ns, "leak")
	settle := func() (g, f int, err error) {
		// Wait for the counts to stop falling: connections close
		// asynchronously after the client is gone. Within 2 of the
		// sample a second before is stable: other tests' pods run
		// beside this one (probes, status), whose goroutines come and go.
		prevG, prevF := -1, -1
		err = wait.PollUntilContextTimeout(context.Background(), time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
			g, f = goroutines(t), openFiles(t, pid)
			stable := prevG >= 0 && abs(g-prevG) <= 2 && abs(f-prevF) <= 2
			prevG, prevF = g, f
			return stable, nil
		})
		return g, f, err
	}
	g0, f0, err := settle()
	if err != nil {
		// A baseline still moving would make the comparison below
		// pass or fail by chance.
		t.Fatalf("crivk's goroutines and open files did not settle within 30s before the sessions (last %d, %d): %v", g0, f0, err)
	}
	const sessions, parallel = 200, 10
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	start := time.Now()
	for range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			interruptedExec(t, ns, "leak")
		}()
	}
	wg.Wait()
	g1, f1, err := settle()
	if err != nil {
		t.Errorf("crivk's goroutines and open files did not settle within 30s after the sessions (last %d, %d): %v", g1, f1, err)
	}
	t.Logf("%d interrupted exec sessions in %s: crivk goroutines %d -> %d, open files %d -> %d",
		sessions, time.Since(start).Round(time.Millisecond), g0, g1, f0, f1)
	// A leak of one goroutine or fd per session would show as +200.
	if g1 > g0+20 || f1 > f0+20 {
		t.Errorf("leak after %d interrupted sessions: goroutines %d -> %d, open files %d -> %d", sessions, g0, g1, f0, f1)
	}
}

// interruptedExec starts `sleep` in the container behind a line of output,
// waits for that line and then drops the connection.
func interruptedExec(t *testing.T, ns, pod string) {
	ex, err := remotecommand.NewSPDYExecutor(restConfig, "POST",
		execURL(ns, pod, &v1.PodExecOptions{Container: "c", Command: []string{"sh", "-c", "echo started; sleep 5"}, Stdout: true}))
	if err != nil {
		t.Error(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: w})
		w.Close()
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Errorf("interrupted exec: first line %q, %v", line, err)
	}
	cancel()
	<-done
}

// crivkPID finds the e2e's crivk process by its executable.
func crivkPID(t *testing.T) int {
	t.Helper()
	pid := findCrivkPID(t)
	if pid == 0 {
		t.Fatal("no process runs crivk's binary")
	}
	return pid
}

// findCrivkPID is the PID of the process running crivk's binary, or 0.
func findCrivkPID(t *testing.T) int {
	t.Helper()
	pid, _ := lookupCrivkPID()
	return pid
}

func openFiles(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("crivk's open files: %v", err)
	}
	return len(fds)
}

// goroutines reads crivk's goroutine count from its pprof endpoint.
func goroutines(t *testing.T) int {
	t.Helper()
	n, _, err := goroutineProfile(testContext(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEphemeralContainer adds an ephemeral container to a running pod
// (kubectl debug --target), sees its status Running, execs into it (it
// shares the target's process namespace, so the target's sleep is
// visible), and sees it terminated, not restarted, once it exits.
func TestEphemeralContainer(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	runningPod(t, ns, busyboxPod("debugged", v1.RestartPolicyAlways, "sleep 3600"))
	ctx := testContext(t, 2*time.Minute)
	p, err := client.CoreV1().Pods(ns).Get(ctx, "debugged", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c", "while [ ! -e /tmp/done ]; do sleep 0.2; done"}},
		TargetContainerName: "c",
	})
	if _, err := client.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, "debugged", p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("adding the ephemeral container: %v", err)
	}
	ephemeral := func(p *v1.Pod) *v1.ContainerStatus {
		for i := range p.Status.EphemeralContainerStatuses {
			if p.Status.EphemeralContainerStatuses[i].Name == "debugger" {
				return &p.Status.EphemeralContainerStatuses[i]
			}
		}
		return nil
	}
	waitPod(t, ns, "debugged", 60*time.Second, "the ephemeral container running", func(p *v1.Pod) bool {
		s := ephemeral(p)
		return s != nil && s.State.Running != nil
	})
	out, stderr, err := execIn(ctx, ns, "debugged", "debugger", "ps")
	if err != nil || !strings.Contains(out, "sleep 3600") {
		t.Errorf("ps in the ephemeral container: %q %q %v; want the target's sleep 3600", out, stderr, err)
	}
	if _, stderr, err := execIn(ctx, ns, "debugged", "debugger", "touch", "/tmp/done"); err != nil {
		t.Fatalf("exec into the ephemeral container: %v %s", err, stderr)
	}
	p = waitPod(t, ns, "debugged", 60*time.Second, "the ephemeral container terminated", func(p *v1.Pod) bool {
		s := ephemeral(p)
		return s != nil && s.State.Terminated != nil
	})
	if s := ephemeral(p); s.RestartCount != 0 || s.State.Terminated.ExitCode != 0 {
		t.Errorf("ephemeral container status %+v, want exit 0 and no restart", s)
	}
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("the target container was disturbed: %+v", p.Status.ContainerStatuses[0])
	}
}
