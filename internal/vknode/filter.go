package vknode

import (
	"context"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// vkUpdateFilter keeps from virtual-kubelet's pod controller the informer
// updates it would do nothing with, mostly crivk's own status writes.
// virtual-kubelet (v1.13.0, node/podcontroller.go Run, UpdateFunc) does two
// things with an update (old, new) of key ns/name, each with go-cmp, whose
// reflection and path bookkeeping made it the largest allocator of the agent:
//
//	A. if the provider's last status for the key was skipped (it equalled
//	   the one before: lastPodStatusUpdateSkipped, set only in
//	   enqueuePodStatusUpdate) and new's status, labels, annotations or
//	   finalizers differ from that status's pod, requeue the status write;
//	B. if podShouldEnqueue(old, new) (node/pod.go: containers, init and
//	   ephemeral containers, activeDeadlineSeconds, tolerations, labels,
//	   annotations, deletionGracePeriodSeconds, deletionTimestamp differ),
//	   queue the pod's sync (where podsEffectivelyEqual runs).
//
// An update is dropped only when both are certainly no-ops:
//
//   - B: sameForVK(old, new) holds, which is stricter than go-cmp on the
//     fields podShouldEnqueue reads (reflect.DeepEqual, nil-aware map
//     equality, the same pointer and time comparisons), so podShouldEnqueue
//     is false;
//   - A: the key is not maybeSkipped. Invariant: whenever virtual-kubelet's
//     record of the key has lastPodStatusUpdateSkipped set, maybeSkipped is
//     set. virtual-kubelet sets the flag only while the provider hands it a
//     status (notify), when the pod handed equals (go-cmp) its last one;
//     that last one is nil or equal to the last pod handed for the key that
//     this filter recorded (handed), so notify sets maybeSkipped before it
//     hands a pod that may equal the last, and clears it only after handing
//     one that certainly differs (UID, resourceVersion or status differ),
//     when virtual-kubelet has just cleared its flag too. The records follow
//     virtual-kubelet's: made before its AddFunc makes a fresh one, removed
//     after its DeleteFunc removed its own (not for tombstones, which it
//     keeps).
//
// Anything else (an unknown key, a non-pod object) is passed through, so
// virtual-kubelet decides as before; the filter only saves it work. Only
// virtual-kubelet's handler is filtered: crivk's own handlers are added to
// the informer itself.
type vkUpdateFilter struct {
	// handing serialises notify: the records follow the order in which
	// virtual-kubelet was handed the statuses.
	handing sync.Mutex

	mu sync.Mutex
	// keys holds a record per key virtual-kubelet knows. Guarded by mu.
	keys map[string]*handedStatus

	// dropped counts the updates kept from virtual-kubelet.
	dropped atomic.Uint64
}

// handedStatus is what the filter knows of virtual-kubelet's record of a
// key. Its fields are guarded by vkUpdateFilter.mu.
type handedStatus struct {
	// handed is set once a pod was handed for the key since the record was
	// made; uid, resourceVersion and status are that pod's. The status is a
	// shallow copy: the provider hands fresh objects nobody writes again
	// (virtual-kubelet copies them), and only the status is kept alive.
	handed          bool
	uid             string
	resourceVersion string
	status          v1.PodStatus
	// maybeSkipped: virtual-kubelet may have skipped the last status of
	// the key (see the invariant above).
	maybeSkipped bool
}

func newVKUpdateFilter() *vkUpdateFilter {
	return &vkUpdateFilter{keys: map[string]*handedStatus{}}
}

// notify wraps virtual-kubelet's status callback cb.
func (f *vkUpdateFilter) notify(cb func(*v1.Pod)) func(*v1.Pod) {
	return func(pod *v1.Pod) {
		key, err := cache.MetaNamespaceKeyFunc(pod)
		if err != nil {
			cb(pod) // virtual-kubelet logs it and keeps no state
			return
		}
		f.handing.Lock()
		defer f.handing.Unlock()
		f.mu.Lock()
		rec := f.keys[key]
		maybeEqual := rec != nil && rec.handed && mayEqualHanded(rec, pod)
		if maybeEqual {
			rec.maybeSkipped = true
		}
		f.mu.Unlock()

		cb(pod)

		f.mu.Lock()
		defer f.mu.Unlock()
		cur := f.keys[key]
		if cur == nil {
			return // virtual-kubelet forgot the key: nothing to follow
		}
		// A record made during cb is fresh, as virtual-kubelet's: its flag
		// is clear and its last pod is this one or none.
		if cur == rec && !maybeEqual {
			cur.maybeSkipped = false
		}
		cur.handed, cur.uid, cur.resourceVersion, cur.status = true, string(pod.UID), pod.ResourceVersion, pod.Status
	}
}

// mayEqualHanded is false only when pod certainly differs (go-cmp) from the
// pod last handed for rec's key: each compared part must be equal for the
// pods to be, and equality.Semantic is looser than go-cmp (it equates nil
// and empty, compares quantities and times by value as go-cmp does through
// their Equal methods).
func mayEqualHanded(rec *handedStatus, pod *v1.Pod) bool {
	return rec.uid == string(pod.UID) && rec.resourceVersion == pod.ResourceVersion &&
		equality.Semantic.DeepEqual(rec.status, pod.Status)
}

// sameForVK reports that virtual-kubelet's podShouldEnqueue(old, new) is
// certainly false. Every comparison is at least as strict as the go-cmp one
// it stands for: reflect.DeepEqual tells nil from empty and compares
// quantities and times field by field (go-cmp by their Equal methods, true
// for identical values); maps are compared with their nil-ness.
func sameForVK(old, new *v1.Pod) bool {
	if old == new {
		return true // a resync
	}
	return old.DeletionTimestamp.Equal(new.DeletionTimestamp) &&
		int64PtrEqual(old.DeletionGracePeriodSeconds, new.DeletionGracePeriodSeconds) &&
		int64PtrEqual(old.Spec.ActiveDeadlineSeconds, new.Spec.ActiveDeadlineSeconds) &&
		stringMapEqual(old.Labels, new.Labels) &&
		stringMapEqual(old.Annotations, new.Annotations) &&
		reflect.DeepEqual(old.Spec.Tolerations, new.Spec.Tolerations) &&
		reflect.DeepEqual(old.Spec.Containers, new.Spec.Containers) &&
		reflect.DeepEqual(old.Spec.InitContainers, new.Spec.InitContainers) &&
		reflect.DeepEqual(old.Spec.EphemeralContainers, new.Spec.EphemeralContainers)
}

func int64PtrEqual(a, b *int64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// stringMapEqual is maps.Equal that also tells a nil map from an empty one,
// as go-cmp does.
func stringMapEqual(a, b map[string]string) bool {
	return (a == nil) == (b == nil) && maps.Equal(a, b)
}

// drop reports whether the update (oldObj, newObj) is kept from
// virtual-kubelet.
func (f *vkUpdateFilter) drop(oldObj, newObj any) bool {
	oldPod, ok := oldObj.(*v1.Pod)
	if !ok {
		return false
	}
	newPod, ok := newObj.(*v1.Pod)
	if !ok {
		return false
	}
	key, err := cache.MetaNamespaceKeyFunc(newPod)
	if err != nil {
		return false
	}
	f.mu.Lock()
	rec := f.keys[key]
	pass := rec == nil || rec.maybeSkipped
	f.mu.Unlock()
	if pass || !sameForVK(oldPod, newPod) {
		return false
	}
	f.dropped.Add(1)
	return true
}

// handler wraps the event handler virtual-kubelet adds to the pod informer.
func (f *vkUpdateFilter) handler(next cache.ResourceEventHandler) cache.ResourceEventHandler {
	return filteredHandler{f: f, next: next}
}

type filteredHandler struct {
	f    *vkUpdateFilter
	next cache.ResourceEventHandler
}

func (h filteredHandler) OnAdd(obj any, isInInitialList bool) {
	// A fresh record before virtual-kubelet makes its fresh one.
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		h.f.mu.Lock()
		h.f.keys[key] = &handedStatus{}
		h.f.mu.Unlock()
	}
	h.next.OnAdd(obj, isInInitialList)
}

func (h filteredHandler) OnUpdate(oldObj, newObj any) {
	if h.f.drop(oldObj, newObj) {
		return
	}
	h.next.OnUpdate(oldObj, newObj)
}

func (h filteredHandler) OnDelete(obj any) {
	h.next.OnDelete(obj)
	// virtual-kubelet forgets a key only for a pod, not a tombstone.
	if pod, ok := obj.(*v1.Pod); ok {
		if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
			h.f.mu.Lock()
			delete(h.f.keys, key)
			h.f.mu.Unlock()
		}
	}
}

// podInformer returns the pod informer handed to virtual-kubelet: inf, with
// the handlers added through it filtered.
func (f *vkUpdateFilter) podInformer(inf corev1informers.PodInformer) corev1informers.PodInformer {
	return filteredPodInformer{inf: inf, f: f}
}

type filteredPodInformer struct {
	inf corev1informers.PodInformer
	f   *vkUpdateFilter
}

func (i filteredPodInformer) Informer() cache.SharedIndexInformer {
	return filteredInformer{SharedIndexInformer: i.inf.Informer(), f: i.f}
}
func (i filteredPodInformer) Lister() corev1listers.PodLister { return i.inf.Lister() }

type filteredInformer struct {
	cache.SharedIndexInformer
	f *vkUpdateFilter
}

func (i filteredInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(i.f.handler(h))
}

func (i filteredInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(i.f.handler(h), resync)
}

func (i filteredInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(i.f.handler(h), opts)
}

// notifyingProvider is the provider handed to virtual-kubelet, with its
// status callback wrapped by the filter.
type notifyingProvider struct {
	PodProvider
	f *vkUpdateFilter
}

var (
	_ node.PodLifecycleHandler    = notifyingProvider{}
	_ node.PodNotifier            = notifyingProvider{}
	_ corev1informers.PodInformer = filteredPodInformer{}
	_ cache.SharedIndexInformer   = filteredInformer{}
	_ cache.ResourceEventHandler  = filteredHandler{}
)

func (p notifyingProvider) NotifyPods(ctx context.Context, cb func(*v1.Pod)) {
	p.PodProvider.NotifyPods(ctx, p.f.notify(cb))
}
