package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// More pod fields docs/runtime.md once listed as ignored or partly
// ignored, each now as the kubelet v1.35.4 has it (#30).

// fields2GID is the fsGroup of TestFields2FSGroupChangePolicy: a group no
// file of the test has before.
const fields2GID = 4321

// TestFields2FSGroupChangePolicy: fsGroupChangePolicy changes nothing on
// the volume types crivk supports, as in the kubelet (its emptyDir,
// configMap, secret, downwardAPI and projected plugins pass no policy to
// SetVolumeOwnership; hostPath never gets the fsGroup). Two pods with
// fsGroup 4321, one OnRootMismatch and one Always, see the same: the
// emptyDir's and the configMap volume's roots with the group and setgid,
// the configMap's file with the group; and a hostPath directory whose root
// already has the group and setgid (what OnRootMismatch would skip on) with
// a file inside that has not is left as it was by both.
func TestFields2FSGroupChangePolicy(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	createConfigMap(t, ns, "cfg", map[string]string{"k": "v"})
	host := t.TempDir()
	stray := filepath.Join(host, "stray")
	if err := os.WriteFile(stray, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(host, -1, fields2GID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(host, 0o777|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	hostInfo := func() (rootMode os.FileMode, rootGID uint32, strayMode os.FileMode, strayGID uint32) {
		t.Helper()
		r, err := os.Stat(host)
		if err != nil {
			t.Fatal(err)
		}
		s, err := os.Stat(stray)
		if err != nil {
			t.Fatal(err)
		}
		return r.Mode(), r.Sys().(*syscall.Stat_t).Gid, s.Mode(), s.Sys().(*syscall.Stat_t).Gid
	}
	rm, rg, sm, sg := hostInfo()

	script := `stat -c 'ed %a %g' /ed
stat -c 'cm %a %g' /cm
stat -L -c 'cm/k %a %g' /cm/k
stat -c 'host %a %g' /host
stat -c 'host/stray %a %g' /host/stray
echo "groups $(id -G)"`
	pod := func(name string, policy v1.PodFSGroupChangePolicy) *v1.Pod {
		p := busyboxPod(name, v1.RestartPolicyNever, script)
		p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](fields2GID), FSGroupChangePolicy: ptr.To(policy)}
		p.Spec.Volumes = []v1.Volume{
			{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
			{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host, Type: ptr.To(v1.HostPathDirectory)}}},
		}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "ed", MountPath: "/ed"}, {Name: "cm", MountPath: "/cm"}, {Name: "host", MountPath: "/host"}}
		return p
	}
	createPod(t, ns, pod("onroot", v1.FSGroupChangeOnRootMismatch))
	createPod(t, ns, pod("always", v1.FSGroupChangeAlways))

	want := []string{
		"ed 2777 4321",     // the emptyDir's root: the group, setgid
		"cm 2777 4321",     // the configMap volume's root too
		"cm/k 644 4321",    // and its file
		"host 2777 4321",   // the hostPath as the test left it
		"host/stray 600 0", // and its file: never changed
	}
	out := map[string][]string{}
	for _, name := range []string{"onroot", "always"} {
		p, logs := finishedLogs(t, ns, name)
		if p.Status.Phase != v1.PodSucceeded {
			t.Fatalf("%s: phase %s, logs:\n%s", name, p.Status.Phase, logs)
		}
		out[name] = strings.Split(strings.TrimSpace(logs), "\n")
	}
	if !reflect.DeepEqual(out["onroot"], out["always"]) {
		t.Errorf("OnRootMismatch and Always differ:\nOnRootMismatch %q\nAlways         %q", out["onroot"], out["always"])
	}
	for name, lines := range out {
		if len(lines) != len(want)+1 {
			t.Errorf("%s: %q, want %q and the groups", name, lines, want)
			continue
		}
		for i := range want {
			if lines[i] != want[i] {
				t.Errorf("%s: %q, want %q", name, lines[i], want[i])
			}
		}
		// The other groups are the image's; the fsGroup must be there.
		if !strings.Contains(lines[len(want)]+" ", " 4321 ") {
			t.Errorf("%s: %q, the fsGroup 4321 is not among the process' groups", name, lines[len(want)])
		}
	}
	if rm2, rg2, sm2, sg2 := hostInfo(); rm2 != rm || rg2 != rg || sm2 != sm || sg2 != sg {
		t.Errorf("hostPath changed on the host: root %v gid %d, stray %v gid %d; were %v %d, %v %d", rm2, rg2, sm2, sg2, rm, rg, sm, sg)
	}
}

// TestFields2StatusVolumeMounts: the container statuses report the
// containers' volumeMounts as the kubelet does (name, mountPath, readOnly,
// and for read-only mounts recursiveReadOnly: IfPossible resolves to
// Enabled where the runtime's default handler has the feature (containerd
// 2), else to Disabled (containerd 1.6 reports no handler with it); a
// read-only mount without it is Disabled), for init and regular containers, from before the
// containers exist until after they ran, the API server's
// kube-api-access mount included. The status' user is the runtime's: none
// from containerd 1.6, else the container's uid, gid and groups.
func TestFields2StatusVolumeMounts(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	createConfigMap(t, ns, "cfg", map[string]string{"k": "v"})
	pod := busyboxPod("mounts", v1.RestartPolicyAlways, "sleep 3600")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1234), RunAsGroup: ptr.To[int64](5678), SupplementalGroups: []int64{91011}}
	pod.Spec.Volumes = []v1.Volume{
		{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
	}
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent,
		Command: []string{"true"}, VolumeMounts: []v1.VolumeMount{{Name: "ed", MountPath: "/ed"}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "ed", MountPath: "/ed"},
		{Name: "cm", MountPath: "/cm", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)},
		{Name: "cm", MountPath: "/cm-sub", ReadOnly: true, SubPath: "k"},
	}
	created := createPod(t, ns, pod)

	// What the statuses must say: every mount of the created pod (the API
	// server added the kube-api-access one), in order.
	ifPossible := v1.RecursiveReadOnlyDisabled
	if runtimeSupportsRecursiveReadOnly(t) {
		ifPossible = v1.RecursiveReadOnlyEnabled
	}
	expect := func(c v1.Container) []v1.VolumeMountStatus {
		var out []v1.VolumeMountStatus
		for _, vm := range c.VolumeMounts {
			s := v1.VolumeMountStatus{Name: vm.Name, MountPath: vm.MountPath, ReadOnly: vm.ReadOnly}
			switch {
			case vm.ReadOnly && vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == v1.RecursiveReadOnlyIfPossible:
				s.RecursiveReadOnly = ptr.To(ifPossible)
			case vm.ReadOnly:
				s.RecursiveReadOnly = ptr.To(v1.RecursiveReadOnlyDisabled)
			}
			out = append(out, s)
		}
		return out
	}
	wantInit, wantMain := expect(created.Spec.InitContainers[0]), expect(created.Spec.Containers[0])
	if len(wantMain) != 4 {
		t.Fatalf("the created pod's container has mounts %+v, want the three of the test and kube-api-access", created.Spec.Containers[0].VolumeMounts)
	}
	p := waitPod(t, ns, "mounts", 90*time.Second, "running and ready", isRunningReady)
	check := func(when string, p *v1.Pod) {
		t.Helper()
		if len(p.Status.InitContainerStatuses) != 1 || len(p.Status.ContainerStatuses) != 1 {
			t.Fatalf("%s: statuses %+v", when, p.Status)
		}
		if got := p.Status.InitContainerStatuses[0].VolumeMounts; !reflect.DeepEqual(got, wantInit) {
			t.Errorf("%s: init container's volumeMounts %+v, want %+v", when, got, wantInit)
		}
		if got := p.Status.ContainerStatuses[0].VolumeMounts; !reflect.DeepEqual(got, wantMain) {
			t.Errorf("%s: container's volumeMounts %+v, want %+v", when, got, wantMain)
		}
	}
	check("running", p)

	cs := p.Status.ContainerStatuses[0]
	switch u := cs.User; {
	case u == nil:
		t.Logf("the runtime reports no user (containerd 1.6): none in the status, as the kubelet's")
	case u.Linux == nil || u.Linux.UID != 1234 || u.Linux.GID != 5678 || !containsGID(u.Linux.SupplementalGroups, 91011):
		t.Errorf("status user %+v, want uid 1234, gid 5678, groups with 91011", u.Linux)
	}
}

func containsGID(gs []int64, g int64) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}
