package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The CSI end-to-end tests run the project's hostpath CSI driver and
// registrar (hack/tools/cmd/csi-hostpath, test scaffolding) and the
// upstream external-provisioner (built from its module by
// hack/build-storage.sh) as processes on this machine, with crivk's paths:
// the driver's socket under <root-dir>/plugins/<driver>/, the registrar's
// on <root-dir>/plugins_registry, where crivk's plugin manager finds it.

const hostpathDriver = "hostpath.csi.crivk.io"

// csiCall is a line of the driver's call log.
type csiCall struct {
	Method            string `json:"method"`
	VolumeID          string `json:"volume_id"`
	TargetPath        string `json:"target_path"`
	StagingTargetPath string `json:"staging_target_path"`
	Error             string `json:"error"`
}

// hostpathCSI is a running driver, registrar and provisioner.
type hostpathCSI struct {
	callLog  string
	stateDir string
}

// calls reads the driver's call log.
func (h *hostpathCSI) calls(t *testing.T) []csiCall {
	t.Helper()
	f, err := os.Open(h.callLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []csiCall
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c csiCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("call log line %q: %v", sc.Text(), err)
		}
		out = append(out, c)
	}
	return out
}

// storageBin is a binary hack/build-storage.sh builds.
func storageBin(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("../../_output/bin/storage", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: hack/build-storage.sh builds it (hack/test.sh e2e runs it): %v", p, err)
	}
	return p
}

// startProcess runs a storage piece until the test ends (SIGTERM, then
// SIGKILL after 10 s), its output in <LOCAL_DIR>/logs/<log>.
func startProcess(t *testing.T, log string, bin string, args ...string) {
	t.Helper()
	out, err := os.OpenFile(filepath.Join(mustEnv("LOCAL_DIR"), "logs", log), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		out.Close()
	})
}

// startHostpathCSI runs the driver, its registrar and the provisioner,
// makes the CSIDriver object (attachRequired false, podInfoOnMount, both
// lifecycle modes, fsGroupPolicy File) and waits for crivk's CSINode to
// list the driver. Everything goes when the test ends, in reverse.
func startHostpathCSI(t *testing.T) *hostpathCSI {
	t.Helper()
	driverBin := storageBin(t, "csi-hostpath")
	provisionerBin := storageBin(t, "csi-provisioner")
	root := filepath.Join(mustEnv("LOCAL_DIR"), "crivk")
	sockDir := filepath.Join(root, "plugins", hostpathDriver)
	if err := os.MkdirAll(sockDir, 0o750); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "csi.sock")
	h := &hostpathCSI{stateDir: filepath.Join(mustEnv("LOCAL_DIR"), "csi-hostpath"), callLog: filepath.Join(t.TempDir(), "calls.jsonl")}
	ctx := testContext(t, time.Minute)
	yes, no := true, false
	file := storagev1.FileFSGroupPolicy
	if _, err := client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: hostpathDriver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no, PodInfoOnMount: &yes, FSGroupPolicy: &file,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.StorageV1().CSIDrivers().Delete(context.Background(), hostpathDriver, metav1.DeleteOptions{})
	})
	startProcess(t, "csi-hostpath.log", driverBin, "driver", "--endpoint", "unix://"+sock, "--nodeid", nodeName,
		"--state-dir", h.stateDir, "--driver-name", hostpathDriver, "--call-log", h.callLog)
	startProcess(t, "csi-registrar.log", driverBin, "registrar", "--csi-address", sock, "--kubelet-registration-path", sock,
		"--plugin-registration-dir", filepath.Join(root, "plugins_registry"))
	startProcess(t, "csi-provisioner.log", provisionerBin, "--csi-address", sock, "--kubeconfig", mustEnv("KUBECONFIG"),
		"--leader-election=false", "--timeout=60s", "--v=3")
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		n, err := client.StorageV1().CSINodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, d := range n.Spec.Drivers {
			if d.Name == hostpathDriver && d.NodeID == nodeName {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("crivk's CSINode never listed %s: %v (logs: %s/logs/csi-*.log, crivk-e2e.log)", hostpathDriver, err, mustEnv("LOCAL_DIR"))
	}
	return h
}

// hostpathClass makes a StorageClass of the hostpath driver
// (WaitForFirstConsumer, reclaim Delete), removed when the test ends.
func hostpathClass(t *testing.T, ns string) string {
	t.Helper()
	name := ns + "-hostpath"
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	del := v1.PersistentVolumeReclaimDelete
	if _, err := client.StorageV1().StorageClasses().Create(testContext(t, 10*time.Second), &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: hostpathDriver, VolumeBindingMode: &mode, ReclaimPolicy: &del,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// callIndex returns the index of the first call of method on volume id
// after from (-1: none).
func callIndex(calls []csiCall, from int, method, id string) int {
	for i := from; i < len(calls); i++ {
		if calls[i].Method == method && calls[i].VolumeID == id && calls[i].Error == "" {
			return i
		}
	}
	return -1
}

// TestCSIStatefulSet runs a StatefulSet whose claim the external
// provisioner creates on the hostpath CSI driver: crivk stages and
// publishes it at the kubelet's paths, applies the fsGroup (policy File),
// and the data outlives the deletion of the pod and a kill -9 of crivk.
// Each time a pod object goes, its volume has been unpublished (and, the
// last user gone, unstaged) before.
func TestCSIStatefulSet(t *testing.T) {
	h := startHostpathCSI(t)
	ns := newNamespace(t)
	class := hostpathClass(t, ns)
	createKeeperSet(t, ns, "csi-keeper", class, "64Mi")
	p := waitSetPod(t, ns, "keeper-0", "")
	logs := waitLogs(t, ns, p.Name, time.Minute, "the marker written", func(l string) bool { return strings.HasPrefix(l, "wrote ") })
	marker := strings.TrimSpace(strings.TrimPrefix(logs, "wrote "))
	pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Get(testContext(t, 10*time.Second), "data-keeper-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(testContext(t, 10*time.Second), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.CSI == nil {
		t.Fatalf("the claim's volume %s: %v %+v", pvc.Spec.VolumeName, err, pv)
	}
	handle := pv.Spec.CSI.VolumeHandle
	target := filepath.Join(podDir(p.UID), "volumes", "kubernetes.io~csi", pv.Name, "mount")
	calls := h.calls(t)
	stage, publish := callIndex(calls, 0, "NodeStageVolume", handle), callIndex(calls, 0, "NodePublishVolume", handle)
	if stage < 0 || publish < stage || calls[publish].TargetPath != target ||
		!strings.HasPrefix(calls[stage].StagingTargetPath, filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "plugins", "kubernetes.io", "csi", hostpathDriver)+"/") {
		t.Fatalf("driver calls %+v; want NodeStageVolume under <root-dir>/plugins/kubernetes.io/csi/%s/, then NodePublishVolume on %s", calls, hostpathDriver, target)
	}

	deleteAndCheck := func(p *v1.Pod) {
		t.Helper()
		deleteSetPod(t, ns, p)
		target := filepath.Join(podDir(p.UID), "volumes", "kubernetes.io~csi", pv.Name, "mount")
		if mps := volumeMountsOf(t, p.UID); len(mps) != 0 {
			t.Errorf("the object of pod %s (%s) is gone while its volumes are still mounted: %v", p.Name, p.UID, mps)
		}
		calls := h.calls(t)
		unpublish := -1
		for i, c := range calls {
			if c.Method == "NodeUnpublishVolume" && c.TargetPath == target && c.Error == "" {
				unpublish = i
			}
		}
		if unpublish < 0 {
			t.Errorf("the object of pod %s (%s) is gone and its volume was never unpublished from %s; calls %+v", p.Name, p.UID, target, calls)
		}
	}
	deleteAndCheck(p)
	p2 := waitSetPod(t, ns, "keeper-0", p.UID)
	waitLogs(t, ns, p2.Name, time.Minute, "the marker found", func(l string) bool { return strings.TrimSpace(l) == "found "+marker })

	p2 = killCrivkAndAdopt(t, ns, p2)
	deleteAndCheck(p2)
	p3 := waitSetPod(t, ns, "keeper-0", p2.UID)
	waitLogs(t, ns, p3.Name, time.Minute, "the marker found after kill -9", func(l string) bool { return strings.TrimSpace(l) == "found "+marker })

	// The last pod goes: its volume is unpublished, then unstaged.
	if err := client.AppsV1().StatefulSets(ns).Delete(testContext(t, 10*time.Second), "keeper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, p3.Name, 90*time.Second)
	calls = h.calls(t)
	last := -1
	for i, c := range calls {
		if c.Method == "NodeUnpublishVolume" && c.VolumeID == handle && c.Error == "" {
			last = i
		}
	}
	if last < 0 || callIndex(calls, last, "NodeUnstageVolume", handle) < 0 {
		t.Errorf("after the last pod: calls %+v; want NodeUnpublishVolume then NodeUnstageVolume of %s", calls, handle)
	}
	if mps := mountsUnder(t, filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "plugins", "kubernetes.io", "csi")); len(mps) != 0 {
		t.Errorf("staging mounts left: %v", mps)
	}
}

// TestCSIInlineVolume runs a pod with a CSI ephemeral inline volume of the
// hostpath driver: published with the pod's information and the ephemeral
// key, written by the pod through its fsGroup, unpublished before the pod's
// object goes.
func TestCSIInlineVolume(t *testing.T) {
	h := startHostpathCSI(t)
	ns := newNamespace(t)
	uid, gid := int64(1000), int64(3000)
	pod := busyboxPod("inline", v1.RestartPolicyNever, "echo hello > /scratch/f && cat /scratch/f")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: &uid, FSGroup: &gid}
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: hostpathDriver}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, 2*time.Minute, "its end", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	if p.Status.Phase != v1.PodSucceeded {
		t.Fatalf("pod %s: %s (%+v), want Succeeded: user 1000 writes the volume through the fsGroup", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	}
	target := filepath.Join(podDir(p.UID), "volumes", "kubernetes.io~csi", "scratch", "mount")
	calls := h.calls(t)
	publish := -1
	for i, c := range calls {
		if c.Method == "NodePublishVolume" && c.TargetPath == target && c.Error == "" {
			publish = i
		}
	}
	if publish < 0 || calls[publish].StagingTargetPath != "" {
		t.Fatalf("calls %+v; want a NodePublishVolume on %s without staging", calls, target)
	}
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, p.Name, time.Minute)
	if callIndex(h.calls(t), publish, "NodeUnpublishVolume", calls[publish].VolumeID) < 0 {
		t.Errorf("the pod's object is gone and its inline volume was never unpublished")
	}
	if mps := volumeMountsOf(t, p.UID); len(mps) != 0 {
		t.Errorf("the pod's object is gone while its volume is still mounted: %v", mps)
	}
}
