package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
)

// localStorage makes a StorageClass of local volumes (no provisioner,
// WaitForFirstConsumer) and n PersistentVolumes of it on crivk's node,
// each a fresh directory under $LOCAL_DIR/local-pv/<class> owned by root
// with mode 0755 (only a pod given the fsGroup can write it). Call it
// before newNamespace: its clean-up, which removes all of it, then runs
// after the namespace's (t.Cleanup is last in, first out), when the
// claims are gone.
func localStorage(t *testing.T, n int) (class string, paths []string) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	class = "e2e-local-" + rand.String(5)
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	retain := v1.PersistentVolumeReclaimRetain
	if _, err := client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: class},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &mode,
		ReclaimPolicy:     &retain,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pvs []string
	for i := range n {
		dir := filepath.Join(mustEnv("LOCAL_DIR"), "local-pv", class, fmt.Sprintf("pv%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, dir)
		name := fmt.Sprintf("%s-%d", class, i)
		pvs = append(pvs, name)
		if _, err := client.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PersistentVolumeSpec{
				Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: retain,
				StorageClassName:              class,
				PersistentVolumeSource:        v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
					MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{nodeName}}},
				}}}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, pv := range pvs {
			if err := client.CoreV1().PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("clean-up: deleting PV %s: %v", pv, err)
			}
		}
		_ = client.StorageV1().StorageClasses().Delete(ctx, class, metav1.DeleteOptions{})
		_ = os.RemoveAll(filepath.Join(mustEnv("LOCAL_DIR"), "local-pv", class))
	})
	return class, paths
}

// waitSetPod waits for pod name Running and Ready with a UID other than old.
func waitSetPod(t *testing.T, ns, name string, old types.UID) *v1.Pod {
	t.Helper()
	return waitPod(t, ns, name, 2*time.Minute, "Running and Ready (a new pod)", func(p *v1.Pod) bool {
		return p.UID != old && isRunningReady(p)
	})
}

// volumeMountsOf lists the mounts below the volume directories of pod uid.
func volumeMountsOf(t *testing.T, uid types.UID) []string {
	return mountsUnder(t, filepath.Join(podDir(uid), "volumes"))
}

// localVolumeMountsOf lists the mounts of pod uid's local volumes.
func localVolumeMountsOf(t *testing.T, uid types.UID) []string {
	return mountsUnder(t, filepath.Join(podDir(uid), "volumes", "kubernetes.io~local-volume"))
}

// keeperScript writes a marker on /data once and says so ("wrote M"), or
// says it found one ("found M"), then sleeps.
const keeperScript = `if [ -f /data/marker ]; then echo "found $(cat /data/marker)"; else echo "$(date +%s)-$RANDOM" > /data/marker && echo "wrote $(cat /data/marker)"; fi; exec sleep 3600`

// createKeeperSet creates StatefulSet "keeper" (pods labelled app) of one
// replica on crivk's node running keeperScript as user 1000 with fsGroup 2000 (the volume is
// writable only through the fsGroup), its claim template "data" of class
// and size.
func createKeeperSet(t *testing.T, ns, app, class, size string) {
	t.Helper()
	uid, gid := int64(1000), int64(2000)
	grace := int64(5)
	replicas := int32(1)
	labels := map[string]string{"app": app}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "keeper"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: "keeper",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					NodeSelector:                  map[string]string{"kubernetes.io/hostname": nodeName},
					TerminationGracePeriodSeconds: &grace,
					SecurityContext:               &v1.PodSecurityContext{RunAsUser: &uid, FSGroup: &gid},
					Containers: []v1.Container{{
						Name: "c", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent,
						Command:      []string{"sh", "-c", keeperScript},
						VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
				},
			},
			VolumeClaimTemplates: []v1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: v1.PersistentVolumeClaimSpec{
					AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					StorageClassName: &class,
					Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}},
				},
			}},
		},
	}
	if _, err := client.AppsV1().StatefulSets(ns).Create(testContext(t, 30*time.Second), set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deleteSetPod deletes pod p (UID precondition) and waits up to 90 s for
// its object to be gone or replaced by a new pod of the name.
func deleteSetPod(t *testing.T, ns string, p *v1.Pod) {
	t.Helper()
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 90*time.Second)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		cur, err := client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && cur.UID != p.UID), nil
	})
	if err != nil {
		t.Fatalf("pod %s (%s) still there after 90s", p.Name, p.UID)
	}
}

// killCrivkAndAdopt kills crivk with SIGKILL, starts it again and returns
// pod p once Running and Ready, failing the test unless it kept its
// container with no restart.
func killCrivkAndAdopt(t *testing.T, ns string, p *v1.Pod) *v1.Pod {
	t.Helper()
	before := p.Status.ContainerStatuses[0].ContainerID
	killCrivkFor(t)
	if err := startCrivkFor(t); err != nil {
		t.Fatalf("restarting crivk: %v", err)
	}
	waitCrivkServing(t)
	p = waitPod(t, ns, p.Name, time.Minute, "Running and Ready after crivk's kill -9", isRunningReady)
	if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != before || cs.RestartCount != 0 {
		t.Errorf("after kill -9 the container is %s (restarts %d), want the same %s", cs.ContainerID, cs.RestartCount, before)
	}
	return p
}

// TestStatefulSetLocalVolume runs a StatefulSet whose claim template is
// bound to a local PersistentVolume on crivk's node. The pod runs as a
// user that can write the volume only through the pod's fsGroup. Its data
// must outlive the deletion of its pod and a kill -9 of crivk; when a pod
// object is gone, its volume must no longer be mounted (the deletion
// guarantee).
func TestStatefulSetLocalVolume(t *testing.T) {
	class, paths := localStorage(t, 1)
	ns := newNamespace(t)
	createKeeperSet(t, ns, "keeper", class, "1Gi")
	p := waitSetPod(t, ns, "keeper-0", "")
	logs := waitLogs(t, ns, p.Name, time.Minute, "the marker written", func(l string) bool { return strings.HasPrefix(l, "wrote ") })
	marker := strings.TrimSpace(strings.TrimPrefix(logs, "wrote "))
	onDisk, err := os.ReadFile(filepath.Join(paths[0], "marker"))
	if err != nil || strings.TrimSpace(string(onDisk)) != marker {
		t.Fatalf("the local volume's directory holds %q (%v), want the marker %q the pod wrote", onDisk, err, marker)
	}
	if mps := localVolumeMountsOf(t, p.UID); len(mps) != 1 {
		t.Errorf("mounts of the pod's local volumes: %v, want one", mps)
	}

	// The pod deleted: its object goes only once its volume is unmounted,
	// and the pod made again finds the data.
	deleteAndCheckUnmounted := func(p *v1.Pod) {
		t.Helper()
		deleteSetPod(t, ns, p)
		if mps := volumeMountsOf(t, p.UID); len(mps) != 0 {
			t.Errorf("the object of pod %s (%s) is gone while its volumes are still mounted: %v", p.Name, p.UID, mps)
		}
	}
	deleteAndCheckUnmounted(p)
	p2 := waitSetPod(t, ns, "keeper-0", p.UID)
	waitLogs(t, ns, p2.Name, time.Minute, "the marker found", func(l string) bool { return strings.TrimSpace(l) == "found "+marker })

	// kill -9 crivk: the pod is adopted with its container and its one
	// mount; deleted then, it is made again with the data.
	p2 = killCrivkAndAdopt(t, ns, p2)
	// A sync of the adopted pod must find the mount in place, not mount
	// it again.
	if mps := localVolumeMountsOf(t, p2.UID); len(mps) != 1 {
		t.Errorf("mounts of the adopted pod's local volumes: %v, want exactly one", mps)
	}
	deleteAndCheckUnmounted(p2)
	p3 := waitSetPod(t, ns, "keeper-0", p2.UID)
	waitLogs(t, ns, p3.Name, time.Minute, "the marker found after kill -9", func(l string) bool { return strings.TrimSpace(l) == "found "+marker })
}

// TestUnresolvableClaim: a pod whose claim does not exist, and one whose
// claim is not bound, stay in ContainerCreating with the kubelet's
// FailedMount event; nothing of them is started.
func TestUnresolvableClaim(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	missing := busyboxPod("missing-claim", v1.RestartPolicyNever, "true")
	missing.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "nope"}}}}
	missing.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	// The scheduler does not place a pod whose claim is missing: name the node.
	missing.Spec.NodeName = nodeName
	createPod(t, ns, missing)
	waitEventContains(t, ns, missing.Name, "FailedMount",
		`Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC `+ns+`/nope: failed to fetch PVC from API server: persistentvolumeclaims "nope" not found`, time.Minute)

	class := "e2e-none"
	pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Create(testContext(t, 10*time.Second), &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "pending"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pending := busyboxPod("pending-claim", v1.RestartPolicyNever, "true")
	pending.Spec.NodeName = nodeName
	pending.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}
	createPod(t, ns, pending)
	waitEventContains(t, ns, pending.Name, "FailedMount", "error processing PVC "+ns+"/pending: PVC is not bound", time.Minute)

	for _, name := range []string{missing.Name, pending.Name} {
		p, err := client.CoreV1().Pods(ns).Get(testContext(t, 10*time.Second), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase != v1.PodPending || len(p.Status.ContainerStatuses) == 0 ||
			p.Status.ContainerStatuses[0].State.Waiting == nil || p.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
			t.Errorf("pod %s: phase %s, container statuses %+v; want Pending, waiting in ContainerCreating", name, p.Status.Phase, p.Status.ContainerStatuses)
		}
		if sb, c := runtimeObjects(t, p.UID); c != 0 {
			t.Errorf("pod %s: the runtime holds %d sandboxes and %d containers, want no container", name, sb, c)
		}
	}
}

// TestGenericEphemeralLocalVolume runs a pod with a generic ephemeral
// volume of the local class: the ephemeral volume controller makes the
// claim <pod>-<volume> owned by the pod, the scheduler binds it to the
// local volume, crivk mounts it with the fsGroup; the claim goes with the
// pod, and the pod's object goes only once the volume is unmounted.
func TestGenericEphemeralLocalVolume(t *testing.T) {
	t.Parallel()
	class, paths := localStorage(t, 1)
	ns := newNamespace(t)
	gid, uid := int64(3000), int64(1000)
	pod := busyboxPod("scratch", v1.RestartPolicyNever, "echo hello > /scratch/f")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: &uid, FSGroup: &gid}
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
		VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		}},
	}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, 2*time.Minute, "its end", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	if p.Status.Phase != v1.PodSucceeded {
		t.Fatalf("pod %s: %s (%+v), want Succeeded: user 1000 writes the volume through the fsGroup", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	}
	if b, err := os.ReadFile(filepath.Join(paths[0], "f")); err != nil || string(b) != "hello\n" {
		t.Errorf("the local volume holds %q (%v), want the pod's hello", b, err)
	}
	claim, err := client.CoreV1().PersistentVolumeClaims(ns).Get(testContext(t, 10*time.Second), "scratch-scratch", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ephemeral volume's claim: %v", err)
	}
	if !metav1.IsControlledBy(claim, p) {
		t.Errorf("claim %s is controlled by %v, want the pod", claim.Name, claim.OwnerReferences)
	}
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, p.Name, time.Minute)
	if mps := volumeMountsOf(t, p.UID); len(mps) != 0 {
		t.Errorf("the pod's object is gone while its volume is still mounted: %v", mps)
	}
}
