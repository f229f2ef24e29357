package volume

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// testGID is the fsGroup of these tests: a group of no file yet as root,
// else the caller's own group (then only the modes show the change).
func testGID() int64 {
	if os.Geteuid() == 0 {
		return 4242
	}
	return int64(os.Getgid())
}

// entry is what the ownership change decides of one path.
type entry struct {
	mode os.FileMode
	gid  uint32
}

// tree lists every path under dir (root included, ".." version
// directories under their generic name) with its mode and group.
func tree(t *testing.T, dir string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if first, rest, _ := strings.Cut(rel, "/"); strings.HasPrefix(first, "..") && first != dataDirName {
			rel = strings.TrimSuffix("..<version>/"+rest, "/")
		}
		out[rel] = entry{mode: info.Mode(), gid: info.Sys().(*syscall.Stat_t).Gid}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVolumeOwnershipPolicies: fsGroupChangePolicy changes nothing on the
// volume types crivk supports, as in the kubelet (their plugins pass no
// policy to SetVolumeOwnership): with OnRootMismatch, Always or no policy
// the volume ends the same, the fsGroup on its root (setgid, the kubelet's
// mode bits) and on every file; a hostPath volume is never changed.
func TestVolumeOwnershipPolicies(t *testing.T) {
	gid := testGID()
	cm := &v1.ConfigMap{Data: map[string]string{"k": "v"}}
	sec := &v1.Secret{Data: map[string][]byte{"s": []byte("x")}}
	for _, tc := range []struct {
		name     string
		vol      v1.VolumeSource
		plugin   string
		rootMode os.FileMode // the root's mode after set-up, with the fsGroup
	}{
		{"emptyDir", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}, pluginEmptyDir, os.ModeDir | os.ModeSetgid | 0o777},
		{"emptyDir Memory", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}, pluginEmptyDir, os.ModeDir | os.ModeSetgid | 0o777},
		{"configMap", v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}, pluginConfigMap, os.ModeDir | os.ModeSetgid | 0o777},
		{"secret", v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}, pluginSecret, os.ModeDir | os.ModeSetgid | 0o777},
		{"downwardAPI", v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "sub/name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}, pluginDownwardAPI, os.ModeDir | os.ModeSetgid | 0o777},
		{"projected", v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}, pluginProjected, os.ModeDir | os.ModeSetgid | 0o777},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var trees []map[string]entry
			for _, policy := range []*v1.PodFSGroupChangePolicy{nil, ptr(v1.FSGroupChangeAlways), ptr(v1.FSGroupChangeOnRootMismatch)} {
				f := newFixture(t)
				f.objects.configMaps["ns/cm"], f.objects.secrets["ns/s"] = cm, sec
				pod := testPod(v1.Volume{Name: "v", VolumeSource: tc.vol})
				pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid, FSGroupChangePolicy: policy}
				if err := f.m.MountPod(context.Background(), pod); err != nil {
					t.Fatal(err)
				}
				got := tree(t, f.m.volumeDir("uid-1", tc.plugin, "v"))
				if root := got["."]; root.mode != tc.rootMode || root.gid != uint32(gid) {
					t.Errorf("policy %v: root %v gid %d, want %v gid %d", policyName(policy), root.mode, root.gid, tc.rootMode, gid)
				}
				for p, e := range got {
					if e.gid != uint32(gid) && e.mode&os.ModeSymlink == 0 {
						t.Errorf("policy %v: %s has gid %d, want %d", policyName(policy), p, e.gid, gid)
					}
					if e.mode.IsDir() && e.mode&os.ModeSetgid == 0 {
						t.Errorf("policy %v: directory %s is not setgid (%v)", policyName(policy), p, e.mode)
					}
				}
				trees = append(trees, got)
			}
			for i, name := range []string{"Always", "OnRootMismatch"} {
				if !reflect.DeepEqual(trees[i+1], trees[0]) {
					t.Errorf("%s: %v, without a policy: %v", name, trees[i+1], trees[0])
				}
			}
		})
	}

	t.Run("hostPath", func(t *testing.T) {
		for _, policy := range []*v1.PodFSGroupChangePolicy{nil, ptr(v1.FSGroupChangeAlways), ptr(v1.FSGroupChangeOnRootMismatch)} {
			host := t.TempDir()
			if err := os.WriteFile(filepath.Join(host, "f"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			before := tree(t, host)
			f := newFixture(t)
			pod := testPod(v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}})
			pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid, FSGroupChangePolicy: policy}
			if err := f.m.MountPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if after := tree(t, host); !reflect.DeepEqual(after, before) {
				t.Errorf("policy %v: hostPath changed: %v, was %v", policyName(policy), after, before)
			}
		}
	})
}

// TestVolumeOwnershipOnRootMismatchStillWalks: the case OnRootMismatch
// would skip where it applies, a volume whose root already has the
// fsGroup and the modes but with a file inside that has not: a new
// version of a configMap volume still changes every file of it, as the
// kubelet's configMap plugin does (it passes no policy).
func TestVolumeOwnershipOnRootMismatchStillWalks(t *testing.T) {
	gid := testGID()
	f := newFixture(t)
	f.objects.configMaps["ns/cm"] = &v1.ConfigMap{Data: map[string]string{"k": "v1"}}
	pod := testPod(v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}})
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid, FSGroupChangePolicy: ptr(v1.FSGroupChangeOnRootMismatch)}
	if err := f.m.MountPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	dir := f.m.volumeDir("uid-1", pluginConfigMap, "v")
	if root := tree(t, dir)["."]; root.gid != uint32(gid) || root.mode&os.ModeSetgid == 0 {
		t.Fatalf("root %v gid %d: does not match the fsGroup yet", root.mode, root.gid)
	}
	stray := filepath.Join(dir, "stray")
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(stray, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	f.objects.configMaps["ns/cm"] = &v1.ConfigMap{Data: map[string]string{"k": "v2"}}
	if err := f.m.MountPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, dir)["stray"], (entry{mode: 0o640, gid: uint32(gid)}); got != want {
		t.Errorf("stray file %v gid %d, want %v gid %d (changed, as the kubelet changes it)", got.mode, got.gid, want.mode, want.gid)
	}
	// Unchanged content: no new version, nothing walked.
	if err := os.Chmod(stray, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.m.MountPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dir)["stray"].mode; got != 0o600 {
		t.Errorf("stray file %v after a sync with the same content, want 0600 (the kubelet writes and walks only a new version)", got)
	}
}

func policyName(p *v1.PodFSGroupChangePolicy) string {
	if p == nil {
		return "none"
	}
	return string(*p)
}

// TestProjectedTokenMode: the kubelet's projected service account token:
// 0600 whatever defaultMode says when the pod has an fsGroup (then 0640,
// the group's) or every container runs as the same user (then owned by
// that user); else defaultMode.
func TestProjectedTokenMode(t *testing.T) {
	gid := testGID()
	user := func(u int64) *v1.SecurityContext { return &v1.SecurityContext{RunAsUser: &u} }
	for _, tc := range []struct {
		name     string
		psc      *v1.PodSecurityContext
		csc      []*v1.SecurityContext
		wantMode os.FileMode
		wantUID  int64 // -1: crivk's own
		wantGID  int64 // -1: crivk's own
	}{
		{name: "nothing: defaultMode", csc: []*v1.SecurityContext{nil}, wantMode: 0o644, wantUID: -1, wantGID: -1},
		{name: "fsGroup: 0640", psc: &v1.PodSecurityContext{FSGroup: &gid}, csc: []*v1.SecurityContext{nil}, wantMode: 0o640, wantUID: -1, wantGID: gid},
		{name: "every container the pod's user: 0600 owned by it", psc: &v1.PodSecurityContext{RunAsUser: ptr(int64(os.Geteuid()))},
			csc: []*v1.SecurityContext{nil, nil}, wantMode: 0o600, wantUID: int64(os.Geteuid()), wantGID: -1},
		{name: "every container its own, the same user", csc: []*v1.SecurityContext{user(int64(os.Geteuid())), user(int64(os.Geteuid()))},
			wantMode: 0o600, wantUID: int64(os.Geteuid()), wantGID: -1},
		{name: "two users: defaultMode", psc: &v1.PodSecurityContext{RunAsUser: ptr(int64(os.Geteuid()))}, csc: []*v1.SecurityContext{nil, user(12345)},
			wantMode: 0o644, wantUID: -1, wantGID: -1},
		{name: "one container without a user: defaultMode", csc: []*v1.SecurityContext{user(int64(os.Geteuid())), nil},
			wantMode: 0o644, wantUID: -1, wantGID: -1},
		{name: "user and fsGroup: 0640", psc: &v1.PodSecurityContext{RunAsUser: ptr(int64(os.Geteuid())), FSGroup: &gid},
			csc: []*v1.SecurityContext{nil}, wantMode: 0o640, wantUID: int64(os.Geteuid()), wantGID: gid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			pod := testPod(v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr(int32(0o644)),
				Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}})
			pod.Spec.SecurityContext = tc.psc
			pod.Spec.Containers = nil
			for i, sc := range tc.csc {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: string(rune('a' + i)), SecurityContext: sc})
			}
			if err := f.m.MountPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(filepath.Join(f.m.volumeDir("uid-1", pluginProjected, "v"), "token"))
			if err != nil {
				t.Fatal(err)
			}
			st := info.Sys().(*syscall.Stat_t)
			if info.Mode().Perm() != tc.wantMode {
				t.Errorf("mode %v, want %v", info.Mode().Perm(), tc.wantMode)
			}
			if tc.wantUID >= 0 && int64(st.Uid) != tc.wantUID {
				t.Errorf("uid %d, want %d", st.Uid, tc.wantUID)
			}
			if tc.wantGID >= 0 && int64(st.Gid) != tc.wantGID {
				t.Errorf("gid %d, want %d", st.Gid, tc.wantGID)
			}
		})
	}
}
