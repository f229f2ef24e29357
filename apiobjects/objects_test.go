package apiobjects

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestObjectsWatchesReferencedObjectsAndKicksPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	// The fake clientset's watch does not replay what happened after the
	// informer's list: the ConfigMap is created only once the watch is open.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("configmaps", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace())
		once.Do(func() { close(watching) })
		return true, w, err
	})
	clk := clocktesting.NewFakeClock(time.Now())
	o := New(fakeCore{client.CoreV1()}, clk)
	go o.Run(ctx)

	user := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "user", UID: "u1"}, Spec: v1.PodSpec{
		Volumes: []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}}}},
	}}
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "u2"}}
	var mu sync.Mutex
	kicked := map[types.UID]int{}
	o.SetKick(func(ns string) []*v1.Pod { return []*v1.Pod{user, other} }, func(uid types.UID) {
		mu.Lock()
		kicked[uid]++
		mu.Unlock()
	})
	kicks := func(uid types.UID) int { mu.Lock(); defer mu.Unlock(); return kicked[uid] }
	eventually := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("timed out waiting for %s; actions %v", what, client.Actions())
		}
	}

	_, err := o.GetConfigMap(ctx, "ns", "cfg")
	if !apierrors.IsNotFound(err) || err.Error() != `configmap "cfg" not found` {
		t.Fatalf("missing ConfigMap: %v", err)
	}
	select {
	case <-watching:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for the ConfigMap watch; actions %v", client.Actions())
	}
	// The object appears: the referencing pod is kicked, the other not.
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "1"}}
	if _, err := client.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the referencing pod kicked", func() bool { return kicks("u1") > 0 })
	eventually("the ConfigMap served", func() bool {
		got, err := o.GetConfigMap(ctx, "ns", "cfg")
		return err == nil && got.Data["k"] == "1"
	})
	before := kicks("u1")
	cm.Data["k"] = "2"
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("kick on update", func() bool { return kicks("u1") > before })
	eventually("the update served from the watch", func() bool {
		got, err := o.GetConfigMap(ctx, "ns", "cfg")
		return err == nil && got.Data["k"] == "2"
	})
	if kicks("u2") != 0 {
		t.Fatal("a pod that does not reference the ConfigMap was kicked")
	}
	// Only the watched object was read; no Secret at all.
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "secrets" {
			t.Fatalf("a Secret was read: %v", a)
		}
	}
	// Unused for idleTimeout: the watch is stopped.
	clk.Step(idleTimeout + time.Second)
	eventually("the idle watch stopped", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.watches) == 0
	})
}

// The kubelet stops an object's watch when the last pod referencing it
// goes; a watch of an object still referenced stays.
func TestObjectsStopsUnreferencedWatches(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Now())
	// Run's ticker calls stopIdle; the test calls it itself after each
	// clock step, so that each check follows a pass it knows ran.
	o := New(fakeCore{client.CoreV1()}, clk)
	defer func() { // what Run does when its context ends
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, w := range o.watches {
			close(w.stop)
		}
	}()
	keep := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "keep", UID: "u1"}, Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "c", EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "kept"}}}}}}}}
	gone := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", UID: "u2"}, Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}}}}
	var mu sync.Mutex
	pods := []*v1.Pod{keep, gone}
	o.SetKick(func(string) []*v1.Pod { mu.Lock(); defer mu.Unlock(); return pods }, func(types.UID) {})
	watched := func() map[objectKey]bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		m := map[objectKey]bool{}
		for k := range o.watches {
			m[k] = true
		}
		return m
	}
	_, _ = o.GetConfigMap(ctx, "ns", "kept")
	_, _ = o.GetSecret(ctx, "ns", "pull")
	kept, pull := objectKey{kindConfigMap, "ns", "kept"}, objectKey{kindSecret, "ns", "pull"}
	if w := watched(); !w[kept] || !w[pull] {
		t.Fatalf("watches after the Gets: %v", w)
	}
	// Both still referenced: a pass stops neither.
	clk.Step(unreferencedAfter + time.Second)
	o.stopIdle()
	if w := watched(); !w[kept] || !w[pull] {
		t.Fatalf("a referenced watch was stopped: %v", w)
	}
	// The pull secret's pod goes: its watch stops at the next tick, the
	// other stays.
	mu.Lock()
	pods = []*v1.Pod{keep}
	mu.Unlock()
	clk.Step(unreferencedAfter + time.Second)
	o.stopIdle()
	if watched()[pull] {
		t.Fatalf("the unreferenced watch was not stopped: %v", watched())
	}
	if !watched()[kept] {
		t.Fatal("the referenced watch was stopped with the unreferenced one")
	}
}

func TestReferences(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}},
		Volumes:          []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}}},
		Containers: []v1.Container{{Name: "c",
			EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "envcm"}}}},
			Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "envsec"}, Key: "k"}}}},
		}},
	}}
	for _, tt := range []struct {
		key  objectKey
		want bool
	}{
		{objectKey{kindSecret, "", "sec"}, true},
		{objectKey{kindConfigMap, "", "sec"}, false},
		{objectKey{kindConfigMap, "", "envcm"}, true},
		{objectKey{kindSecret, "", "envsec"}, true},
		{objectKey{kindSecret, "", "nope"}, false},
		{objectKey{kindSecret, "", "pull"}, true},
		{objectKey{kindConfigMap, "", "pull"}, false},
	} {
		t.Run(string(tt.key.kind)+"/"+tt.key.name, func(t *testing.T) {
			if got := references(pod, tt.key); got != tt.want {
				t.Fatalf("references = %v, want %v", got, tt.want)
			}
		})
	}
}

// fakeCore is the fake clientset's core client that, like the fake
// clientset itself, tells informers it cannot serve watch-list streams.
type fakeCore struct{ corev1client.CoreV1Interface }

func (fakeCore) IsWatchListSemanticsUnSupported() bool { return true }
