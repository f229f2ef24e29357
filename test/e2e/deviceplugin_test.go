package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestDevicePlugin: a device plugin (test/e2e/deviceplugin, a process on
// the host) registers on crivk's <root-dir>/device-plugins/kubelet.sock;
// the node shows its resource in capacity and allocatable (the node e2e
// suite's "Device Plugin Failures" checks); a pod limiting one device runs
// with the plugin's Allocate answer in its container (its env and its CRI
// annotation); a pod bound to the node asking for more devices than are
// free is rejected with the kubelet's reason and message; once the plugin
// stops, allocatable drops to 0 and capacity stays (the 5 minute grace).
func TestDevicePlugin(t *testing.T) {
	ns := newNamespace(t)
	res := "e2e.crivk.dev/dev-" + rand.String(5)
	dir := filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "device-plugins")

	stop := startDevicePlugin(t, dir, res, 2)
	waitDeviceCounts(t, res, 2, 2)

	one := devicePluginPod("one", res, 1)
	createPod(t, ns, one)
	p := waitPod(t, ns, one.Name, 90*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	var logs string
	err := wait.PollUntilContextTimeout(testContext(t, time.Minute), poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		logs, _ = podLogs(ctx, ns, one.Name, &v1.PodLogOptions{})
		return strings.Contains(logs, "DEVICES="), nil
	})
	if err != nil {
		t.Fatalf("pod %s logged no DEVICES= line: %q", one.Name, logs)
	}
	ids := strings.TrimSpace(strings.SplitN(strings.SplitN(logs, "DEVICES=", 2)[1], "\n", 2)[0])
	if ids != "dev0" && ids != "dev1" {
		t.Errorf("the container's DEVICEPLUGINTEST_DEVICES is %q, want one of the plugin's devices", ids)
	}
	cs, err := runtime.ListContainers(testContext(t, 10*time.Second), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}})
	if err != nil || len(cs) == 0 {
		t.Fatalf("the pod's containers in the runtime: %v, %v", cs, err)
	}
	if got := cs[0].Annotations["deviceplugintest/devices"]; got != ids {
		t.Errorf("the container's annotation deviceplugintest/devices is %q, want %q", got, ids)
	}

	// Bound to the node (the scheduler would not place it): crivk's
	// admission decides, as the kubelet's.
	more := devicePluginPod("more", res, 2)
	more.Spec.NodeName = nodeName
	createPod(t, ns, more)
	r := waitPod(t, ns, more.Name, 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	wantMsg := fmt.Sprintf("Pod was rejected: Allocate failed due to requested number of devices unavailable for %s. Requested: 2, Available: 1, which is unexpected", res)
	if r.Status.Reason != "UnexpectedAdmissionError" || r.Status.Message != wantMsg {
		t.Errorf("the pod asking for 2 devices: reason %q message %q, want UnexpectedAdmissionError and %q", r.Status.Reason, r.Status.Message, wantMsg)
	}

	stop()
	waitDeviceCounts(t, res, 2, 0)
	if p, err := client.CoreV1().Pods(ns).Get(testContext(t, 10*time.Second), one.Name, metav1.GetOptions{}); err != nil || p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod holding a device after its plugin stopped: %v, %v", p.Status.Phase, err)
	}
}

// devicePluginPod limits (and requests) n devices of res and prints the
// plugin's env, then sleeps.
func devicePluginPod(name, res string, n int64) *v1.Pod {
	p := busyboxPod(name, v1.RestartPolicyAlways, `echo "DEVICES=${DEVICEPLUGINTEST_DEVICES}"; exec sleep 3600`)
	rl := v1.ResourceList{v1.ResourceName(res): *resource.NewQuantity(n, resource.DecimalSI)}
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: rl, Requests: rl}
	return p
}

// startDevicePlugin builds test/e2e/deviceplugin and runs it with n
// devices of res until the returned stop (or the test's end); it returns
// once the plugin printed "registered".
func startDevicePlugin(t *testing.T, dir, res string, n int) (stop func()) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "deviceplugin")
	build := exec.Command("go", "build", "-o", bin, "./deviceplugin")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test device plugin: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-dir", dir, "-resource", res, "-devices", fmt.Sprint(n), "-endpoint", "e2e-"+rand.String(5)+".sock")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the test device plugin: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	registered := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		ok := false
		for s.Scan() {
			if s.Text() == "registered" {
				ok = true
				registered <- true
			}
		}
		if !ok {
			registered <- false
		}
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	select {
	case ok := <-registered:
		if !ok {
			t.Fatalf("the test device plugin exited without registering on %s", dir)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the test device plugin did not register on %s within a minute", dir)
	}
	return stop
}

// waitDeviceCounts waits (90s) for the node's capacity and allocatable of
// res.
func waitDeviceCounts(t *testing.T, res string, capacity, allocatable int64) {
	t.Helper()
	var c, a string
	err := wait.PollUntilContextTimeout(testContext(t, 90*time.Second), poll, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cq, okc := n.Status.Capacity[v1.ResourceName(res)]
		aq, oka := n.Status.Allocatable[v1.ResourceName(res)]
		c, a = cq.String(), aq.String()
		return okc && oka && cq.Value() == capacity && aq.Value() == allocatable, nil
	})
	if err != nil {
		t.Fatalf("node %s: %s capacity %s allocatable %s, want %d and %d: %v", nodeName, res, c, a, capacity, allocatable, err)
	}
}
