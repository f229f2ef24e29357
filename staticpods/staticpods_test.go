package staticpods

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

const manifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: c
    image: busybox:1.37
    resources: {limits: {cpu: 100m}}
`

var seen = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func TestDecodeManifest(t *testing.T) {
	pod, err := decodeManifest([]byte(manifest), "/etc/m/web.yaml", "Node1", seen)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "web-node1" || pod.Namespace != "default" || pod.Spec.NodeName != "Node1" || pod.Status.Phase != v1.PodPending {
		t.Errorf("name %s/%s node %q phase %q", pod.Namespace, pod.Name, pod.Spec.NodeName, pod.Status.Phase)
	}
	if len(pod.UID) != 32 || pod.Annotations[AnnotationHash] != string(pod.UID) || pod.Annotations[AnnotationSource] != "file" ||
		pod.Annotations[AnnotationSeen] != "2026-01-02T03:04:05.000000006Z" {
		t.Errorf("uid %q annotations %v", pod.UID, pod.Annotations)
	}
	if !IsStatic(pod) || IsMirror(pod) {
		t.Error("a decoded manifest must be static, not a mirror")
	}
	if tol := pod.Spec.Tolerations; len(tol) != 1 || tol[0].Operator != v1.TolerationOpExists || tol[0].Effect != v1.TaintEffectNoExecute {
		t.Errorf("tolerations %v, want Exists:NoExecute", tol)
	}
	c := pod.Spec.Containers[0]
	if pod.Spec.RestartPolicy != v1.RestartPolicyAlways || pod.Spec.DNSPolicy != v1.DNSClusterFirst || c.ImagePullPolicy != v1.PullIfNotPresent ||
		c.TerminationMessagePath != "/dev/termination-log" || c.Resources.Requests.Cpu().String() != "100m" {
		t.Errorf("API defaults missing: %+v", pod.Spec)
	}
	// The UID depends on the content, the node and the file only.
	for name, tc := range map[string]struct {
		data, file, node string
		same             bool
	}{
		"same input":      {manifest, "/etc/m/web.yaml", "Node1", true},
		"another seen":    {manifest, "/etc/m/web.yaml", "Node1", true},
		"another file":    {manifest, "/etc/m/web2.yaml", "Node1", false},
		"another node":    {manifest, "/etc/m/web.yaml", "node2", false},
		"another content": {strings.Replace(manifest, "1.37", "1.36", 1), "/etc/m/web.yaml", "Node1", false},
	} {
		p, err := decodeManifest([]byte(tc.data), tc.file, tc.node, seen.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if (p.UID == pod.UID) != tc.same {
			t.Errorf("%s: uid %s vs %s, same=%v wanted", name, p.UID, pod.UID, tc.same)
		}
	}
}

func TestDecodeManifestRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ data, want string }{
		"no name":           {"apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c, image: i}]}\n", "name is needed"},
		"not a pod":         {"apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "is not a Pod"},
		"service account":   {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {serviceAccountName: sa, containers: [{name: c, image: i}]}\n", "serviceaccounts"},
		"secret volume":     {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {volumes: [{name: v, secret: {secretName: s}}], containers: [{name: c, image: i}]}\n", "secrets (via secret volumes)"},
		"config map env":    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, envFrom: [{configMapRef: {name: m}}]}]}\n", "configmaps"},
		"not even a pod":    {"{", ""},
		"projected token":   {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {volumes: [{name: v, projected: {sources: [{serviceAccountToken: {path: t}}]}}], containers: [{name: c, image: i}]}\n", "serviceaccounts (via projected volumes)"},
		"image pull secret": {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {imagePullSecrets: [{name: s}], containers: [{name: c, image: i}]}\n", "secrets"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeManifest([]byte(tc.data), "/f", "n", seen)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// recordingSink records what the source hands the engine.
type recordingSink struct {
	mu     sync.Mutex
	events []string
}

func (r *recordingSink) UpdatePod(_ context.Context, p *v1.Pod) { r.add("update " + p.Name) }
func (r *recordingSink) Kill(_ context.Context, p *v1.Pod) bool {
	r.add("kill " + p.Name)
	return true
}
func (r *recordingSink) add(s string) { r.mu.Lock(); r.events = append(r.events, s); r.mu.Unlock() }
func (r *recordingSink) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func TestSourceSync(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := NewSource(SourceConfig{Path: dir, NodeName: "n1", Clock: clocktesting.NewFakeClock(seen)})
	sink := &recordingSink{}
	ctx := context.Background()
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"empty directory", func() {}, nil},
		{"a manifest appears; dotfiles and directories are ignored", func() {
			write("web.yaml", manifest)
			write(".hidden.yaml", strings.Replace(manifest, "web", "hidden", 1))
			_ = os.Mkdir(filepath.Join(dir, "sub"), 0o755)
		}, []string{"update web-n1"}},
		{"nothing changed", func() {}, nil},
		{"a broken file is skipped, the others stay", func() { write("broken.yaml", "{") }, nil},
		{"the manifest changes: the old pod is killed, the new one handed", func() {
			write("web.yaml", strings.Replace(manifest, "1.37", "1.36", 1))
		}, []string{"kill web-n1", "update web-n1"}},
		{"the manifest is removed", func() { _ = os.Remove(filepath.Join(dir, "web.yaml")) }, []string{"kill web-n1"}},
	}
	for _, st := range steps {
		st.do()
		s.Sync(ctx, sink)
		got := sink.take()
		if strings.Join(got, ";") != strings.Join(st.want, ";") {
			t.Errorf("%s: handed %v, want %v", st.name, got, st.want)
		}
	}
	if !s.HasSynced() || len(s.Pods()) != 0 {
		t.Errorf("synced %v, pods %v: want synced and none", s.HasSynced(), s.Pods())
	}
	if !s.Terminating("default", "web-n1") {
		t.Fatal("the removed pod must be terminating until its termination completes")
	}
	old := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-n1", UID: "other"}}
	s.Terminated(old)
	if !s.Terminating("default", "web-n1") {
		t.Error("the end of another UID's termination must not count")
	}
	s.mu.Lock()
	var uids []types.UID
	for uid := range s.terminating["default/web-n1"] {
		uids = append(uids, uid)
	}
	s.mu.Unlock()
	if len(uids) != 2 {
		t.Fatalf("terminating UIDs %v, want the two removed versions of web", uids)
	}
	old.UID = uids[0]
	s.Terminated(old)
	if !s.Terminating("default", "web-n1") {
		t.Error("not terminating while one removed version still terminates")
	}
	old.UID = uids[1]
	s.Terminated(old)
	if s.Terminating("default", "web-n1") {
		t.Error("terminating after Terminated")
	}
}

func TestSourceWithoutPath(t *testing.T) {
	s := NewSource(SourceConfig{})
	if !s.HasSynced() || len(s.Pods()) != 0 {
		t.Error("a source without a path is synced at once and empty")
	}
	s2 := NewSource(SourceConfig{Path: filepath.Join(t.TempDir(), "missing"), NodeName: "n"})
	if s2.HasSynced() {
		t.Error("synced before the first read")
	}
	s2.Sync(context.Background(), &recordingSink{})
	if !s2.HasSynced() {
		t.Error("a missing path is read as empty, and synced")
	}
}

// fixedStatic is a StaticPods of given pods.
type fixedStatic struct {
	pods        []*v1.Pod
	terminating map[string]bool
	unsynced    bool // the manifests not read yet
}

func (f *fixedStatic) Pods() []*v1.Pod { return f.pods }
func (f *fixedStatic) HasSynced() bool { return !f.unsynced }
func (f *fixedStatic) Terminating(ns, name string) bool {
	return f.terminating[ns+"/"+name]
}

// mirrorEnv is the mirror client over a fake API whose objects the lister
// sees at once (a perfectly fresh informer).
type mirrorEnv struct {
	client  *fake.Clientset
	indexer cache.Indexer
	static  *fixedStatic
	m       *Mirrors
	// running: the runtime's pods with a running container or a ready
	// sandbox (MirrorConfig.Running), by UID.
	mu      sync.Mutex
	running map[types.UID]bool
}

func newMirrorEnv(t *testing.T, static ...*v1.Pod) *mirrorEnv {
	t.Helper()
	e := &mirrorEnv{client: fake.NewClientset(), indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		static: &fixedStatic{pods: static, terminating: map[string]bool{}}, running: map[types.UID]bool{}}
	// The fake API assigns no UIDs; the mirror client's preconditions
	// and the tests need them.
	n := 0
	e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if p := a.(k8stesting.CreateAction).GetObject().(*v1.Pod); p.UID == "" {
			n++
			p.UID = types.UID(fmt.Sprintf("uid-%d", n))
		}
		return false, nil, nil
	})
	var err error
	e.m, err = NewMirrors(MirrorConfig{Client: e.client.CoreV1(), Pods: corev1listers.NewPodLister(e.indexer), NodeName: "n1",
		NodeUID: func() (types.UID, error) { return "node-uid", nil }, Static: e.static,
		Running: func(_ context.Context, uid types.UID) (bool, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.running[uid], nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// refresh copies the API's pods into the lister.
func (e *mirrorEnv) refresh(t *testing.T) {
	t.Helper()
	list, err := e.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := []any{}
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	if err := e.indexer.Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
}

func (e *mirrorEnv) reconcile(t *testing.T) {
	t.Helper()
	if err := e.m.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
}

func (e *mirrorEnv) get(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := e.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func TestMirrors(t *testing.T) {
	static, err := decodeManifest([]byte(manifest), "/etc/m/web.yaml", "n1", seen)
	if err != nil {
		t.Fatal(err)
	}
	e := newMirrorEnv(t, static)
	e.reconcile(t)
	mirror := e.get(t, "web-n1")
	if mirror == nil {
		t.Fatal("no mirror pod created")
	}
	if mirror.Annotations[AnnotationMirror] != string(static.UID) || mirror.Annotations[AnnotationSource] != "file" || mirror.Labels["app"] != "web" {
		t.Errorf("mirror annotations %v labels %v", mirror.Annotations, mirror.Labels)
	}
	if or := mirror.OwnerReferences; len(or) != 1 || or[0].Kind != "Node" || or[0].Name != "n1" || or[0].UID != "node-uid" ||
		or[0].Controller == nil || !*or[0].Controller || or[0].BlockOwnerDeletion != nil {
		t.Errorf("owner references %+v: NodeRestriction wants one controller reference to the node", or)
	}

	// The engine's status goes to the mirror, other writers' conditions kept.
	mirror.Status.Conditions = []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue}}
	if _, err := e.client.CoreV1().Pods("default").UpdateStatus(context.Background(), mirror, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	st := static.DeepCopy()
	st.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	e.m.SetStatus(st)
	e.reconcile(t)
	mirror = e.get(t, "web-n1")
	if mirror.Status.Phase != v1.PodRunning || len(mirror.Status.Conditions) != 2 {
		t.Errorf("mirror status %+v: want Running with Ready and the foreign gate", mirror.Status)
	}

	// Deleted through the API (marked): deleted and created again.
	oldUID := mirror.UID
	now := metav1.Now()
	mirror.DeletionTimestamp = &now
	if err := e.indexer.Update(mirror); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t)
	if again := e.get(t, "web-n1"); again == nil || again.UID == oldUID || again.DeletionTimestamp != nil {
		t.Errorf("mirror after a deletion: %v, want a new one", again)
	}
	// Gone from the API: created again.
	if err := e.client.CoreV1().Pods("default").Delete(context.Background(), "web-n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	e.reconcile(t)
	if e.get(t, "web-n1") == nil {
		t.Error("a deleted mirror pod must be created again")
	}

	// Another hash (the manifest changed): the old mirror stays, with its
	// UID and status, while the old static pod terminates (the new one
	// waits for the name); replaced once it terminated.
	changed, err := decodeManifest([]byte(strings.Replace(manifest, "1.37", "1.36", 1)), "/etc/m/web.yaml", "n1", seen)
	if err != nil {
		t.Fatal(err)
	}
	before := e.get(t, "web-n1")
	e.static.pods = []*v1.Pod{changed}
	e.static.terminating["default/web-n1"] = true
	pending := changed.DeepCopy()
	pending.Status = v1.PodStatus{Phase: v1.PodPending}
	e.m.SetStatus(pending)
	e.reconcile(t)
	if m := e.get(t, "web-n1"); m == nil || m.UID != before.UID || m.Annotations[AnnotationMirror] != string(static.UID) || m.Status.Phase != before.Status.Phase {
		t.Errorf("mirror while the old static pod terminates: %v, want the old one (uid %s, phase %s) untouched", m, before.UID, before.Status.Phase)
	}
	delete(e.static.terminating, "default/web-n1")
	e.reconcile(t)
	if m := e.get(t, "web-n1"); m == nil || m.UID == before.UID || m.Annotations[AnnotationMirror] != string(changed.UID) {
		t.Errorf("mirror after the old static pod terminated: %v, want a new one of hash %s", m, changed.UID)
	}

	// Removed from the manifests: kept while the pod terminates, then deleted.
	e.static.pods = nil
	e.static.terminating["default/web-n1"] = true
	e.reconcile(t)
	if e.get(t, "web-n1") == nil {
		t.Error("the mirror must stay while its static pod terminates")
	}
	delete(e.static.terminating, "default/web-n1")
	e.reconcile(t)
	if e.get(t, "web-n1") != nil {
		t.Error("an orphaned mirror pod must be deleted")
	}
}

// TestMirrorsNeverTouchOtherPods: a regular pod holding the name is not a
// mirror; nothing deletes it, and no mirror is created over it.
func TestMirrorsNeverTouchOtherPods(t *testing.T) {
	static, _ := decodeManifest([]byte(manifest), "/etc/m/web.yaml", "n1", seen)
	e := newMirrorEnv(t, static)
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-n1", UID: "regular"}, Spec: v1.PodSpec{NodeName: "n1"}}
	lone := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lone", UID: "lone"}, Spec: v1.PodSpec{NodeName: "n1"}}
	for _, p := range []*v1.Pod{other, lone} {
		if _, err := e.client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.refresh(t)
	if err := e.m.Reconcile(context.Background()); err == nil {
		t.Error("want an error naming the pod that holds the static pod's name")
	}
	if p := e.get(t, "web-n1"); p == nil || p.UID != "regular" || e.get(t, "lone") == nil {
		t.Error("a pod that is not a mirror must never be deleted")
	}
}

// fakeEngine records what Apart passes through.
type fakeEngine struct {
	recordingSink
	pods   []*v1.Pod
	notify func(*v1.Pod)
}

func (f *fakeEngine) KillUnknown(_ context.Context, p *v1.Pod) { f.add("killUnknown " + p.Name) }
func (f *fakeEngine) PodByName(ns, name string) *v1.Pod {
	for _, p := range f.pods {
		if p.Namespace == ns && p.Name == name {
			return p
		}
	}
	return nil
}
func (f *fakeEngine) Pods() []*v1.Pod             { return f.pods }
func (f *fakeEngine) NotifyPods(cb func(*v1.Pod)) { f.notify = cb }

func TestApart(t *testing.T) {
	static, _ := decodeManifest([]byte(manifest), "/etc/m/web.yaml", "n1", seen)
	mirror := static.DeepCopy()
	mirror.UID = "mirror-uid"
	mirror.Annotations[AnnotationMirror] = string(static.UID)
	regular := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "reg", UID: "r"}}
	eng := &fakeEngine{pods: []*v1.Pod{static, regular}}
	env := newMirrorEnv(t, static)
	a := Apart(eng, env.m)
	ctx := context.Background()

	a.UpdatePod(ctx, mirror)
	a.Kill(ctx, mirror)
	a.KillUnknown(ctx, mirror)
	if got := eng.take(); len(got) != 0 {
		t.Errorf("a mirror pod reached the engine: %v", got)
	}
	a.UpdatePod(ctx, regular)
	a.Kill(ctx, regular)
	if got := strings.Join(eng.take(), ";"); got != "update reg;kill reg" {
		t.Errorf("regular pods: %q", got)
	}
	if a.PodByName("default", "web-n1") != nil || len(a.Pods()) != 1 || a.Pods()[0] != regular {
		t.Error("static pods must be hidden from virtual-kubelet")
	}
	var handed []string
	a.NotifyPods(func(p *v1.Pod) { handed = append(handed, p.Name) })
	eng.notify(regular)
	eng.notify(static)
	if strings.Join(handed, ",") != "reg" {
		t.Errorf("virtual-kubelet got statuses of %v, want only reg", handed)
	}
	env.m.mu.Lock()
	_, ok := env.m.statuses[static.UID]
	env.m.mu.Unlock()
	if !ok {
		t.Error("the static pod's status must go to the mirror client")
	}
}

func TestOnTerminated(t *testing.T) {
	static, _ := decodeManifest([]byte(manifest), "/etc/m/web.yaml", "n1", seen)
	src := NewSource(SourceConfig{Path: "/nonexistent", NodeName: "n1"})
	src.terminating["default/web-n1"] = map[types.UID]bool{static.UID: true}
	env := newMirrorEnv(t)
	var next []string
	hook := OnTerminated(func(_ context.Context, p *v1.Pod) error { next = append(next, p.Name); return nil }, src, env.m)
	regular := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "reg", UID: "r"}}
	_ = hook(context.Background(), static)
	_ = hook(context.Background(), regular)
	if strings.Join(next, ",") != "reg" {
		t.Errorf("the deletion path got %v: a static pod has no API object of its own", next)
	}
	if src.Terminating("default", "web-n1") {
		t.Error("the static pod's termination was not recorded")
	}
}

// TestMirrorsKeepMirrorsUntilTheManifestsWereRead: right after crivk's
// start, before the manifests were read, a mirror pod is not an orphan
// (the node e2e spec "MirrorPod [Serial] when kubelet restarts should not
// change container status" saw crivk delete and recreate it 11 ms before
// the read); once they were read and hold no such static pod, it is.
func TestMirrorsKeepMirrorsUntilTheManifestsWereRead(t *testing.T) {
	e := newMirrorEnv(t)
	mirror := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-n1", UID: "m1",
		Annotations: map[string]string{AnnotationMirror: "hash", AnnotationSource: SourceFile}}, Spec: v1.PodSpec{NodeName: "n1"}}
	if _, err := e.client.CoreV1().Pods("default").Create(context.Background(), mirror, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	e.static.unsynced = true
	e.reconcile(t)
	if e.get(t, "web-n1") == nil {
		t.Fatal("a mirror pod was deleted before the manifests were read")
	}
	e.static.unsynced = false
	e.reconcile(t)
	if e.get(t, "web-n1") != nil {
		t.Error("an orphaned mirror pod must be deleted once the manifests were read")
	}
}

// TestMirrorsKeepMirrorsWhileTheRuntimeRunsTheirPod: after a restart,
// with a manifest removed or changed while crivk was down, the source
// knows of no terminating pod; the old mirror pod stays while the
// runtime still runs the old static pod's containers (the orphan sweep
// stops them), and goes once they are gone: a pod object never goes
// before its containers.
func TestMirrorsKeepMirrorsWhileTheRuntimeRunsTheirPod(t *testing.T) {
	static, err := decodeManifest([]byte(manifest), "/etc/m/web.yaml", "n1", seen)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := decodeManifest([]byte(strings.Replace(manifest, "1.37", "1.36", 1)), "/etc/m/web.yaml", "n1", seen)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		after []*v1.Pod // the static pods after the restart
	}{
		{"manifest removed while down", nil},
		{"manifest changed while down", []*v1.Pod{changed}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newMirrorEnv(t, static)
			e.reconcile(t)
			old := e.get(t, "web-n1")
			if old == nil {
				t.Fatal("no mirror pod created")
			}
			// The restart: a source that read the new manifests, and
			// the old pod's containers still running.
			e.static.pods = tt.after
			e.mu.Lock()
			e.running[static.UID] = true
			e.mu.Unlock()
			e.reconcile(t)
			if m := e.get(t, "web-n1"); m == nil || m.UID != old.UID {
				t.Fatalf("mirror while the old static pod's containers run: %v, want the old one (uid %s)", m, old.UID)
			}
			e.mu.Lock()
			e.running[static.UID] = false
			e.mu.Unlock()
			e.reconcile(t)
			m := e.get(t, "web-n1")
			switch {
			case tt.after == nil && m != nil:
				t.Errorf("orphaned mirror pod %s kept after its containers stopped", m.UID)
			case tt.after != nil && (m == nil || m.UID == old.UID || m.Annotations[AnnotationMirror] != string(changed.UID)):
				t.Errorf("mirror after the old containers stopped: %v, want a new one of hash %s", m, changed.UID)
			}
		})
	}
}
