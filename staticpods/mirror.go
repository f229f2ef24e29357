package staticpods

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/crivk/crivk/lifecycle/status"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// StaticPods is what the mirror client reads of the static pods: Source
// implements it.
type StaticPods interface {
	Pods() []*v1.Pod
	Terminating(namespace, name string) bool
	// HasSynced: the manifests were read at least once. Until then no
	// mirror pod is an orphan (the kubelet's sourcesReady.AllReady()
	// before HandlePodCleanups).
	HasSynced() bool
}

var _ StaticPods = (*Source)(nil)

// MirrorConfig configures Mirrors. Every field but Clock and Period is
// required.
type MirrorConfig struct {
	// Client writes the mirror pods (create, delete, status).
	Client corev1client.PodsGetter
	// Pods is the node's pod informer's view: the mirror pods as the API
	// has them.
	Pods corev1listers.PodLister
	// NodeName is this node; NodeUID returns its Node object's UID ("" or
	// an error while it is not known): the mirror pods' owner reference,
	// which NodeRestriction requires.
	NodeName string
	NodeUID  func() (types.UID, error)
	// Static are the static pods.
	Static StaticPods
	// PodStatus, if set, returns a static pod with the engine's latest
	// published status, nil while none was (lifecycle.Engine.PublishedPod),
	// for a pod whose status was published before anything listened
	// (SetStatus is the usual way).
	PodStatus func(types.UID) *v1.Pod
	// Running reports whether the runtime still has a running container
	// or a ready sandbox of the pod with this UID (a static pod's UID is
	// its mirror's kubernetes.io/config.mirror hash). A mirror pod of
	// another static pod than the current one (an orphan, or of an older
	// version) is deleted only once it reports false: after a restart,
	// with the manifest removed or changed while crivk was down, nothing
	// in memory says the old pod still terminates, and the mirror must
	// not go before its containers. An error counts as running.
	Running func(ctx context.Context, uid types.UID) (bool, error)
	// Period is how often everything is reconciled besides the kicks
	// (default 10 s).
	Period time.Duration
	Clock  clock.WithTicker
}

// Mirrors is the kubelet's mirror client and the part of its sync loop
// that keeps mirror pods (pkg/kubelet/pod/mirror_client.go; SyncPod's
// mirror checks; HandlePodCleanups' orphaned mirror pods): for every
// static pod, one mirror pod in the API, a copy with the annotation
// kubernetes.io/config.mirror = its hash and a controller owner reference
// to the Node; a mirror pod marked for deletion, or of another hash, is
// deleted (grace 0, UID precondition) and created again; a mirror pod of
// no static pod is deleted once that pod's termination completed. The
// static pod's status, as the engine publishes it, is written to its
// mirror pod (the kubelet's status manager translating the UID), other
// writers' conditions kept.
type Mirrors struct {
	cfg  MirrorConfig
	kick chan struct{}

	mu sync.Mutex
	// statuses are the latest statuses the engine published of static
	// pods, by static pod UID; written are the statuses last written, by
	// mirror pod UID. Guarded by mu.
	statuses map[types.UID]*v1.Pod
	written  map[types.UID]writtenStatus
}

// writtenStatus is a status the mirror client wrote to a mirror pod and
// the resourceVersions around the write. While the lister still shows the
// object the write replaced (base: a lagging informer) or the one it made
// (result), the same status is not written again. Any other
// resourceVersion is someone else's write since, such as the node
// lifecycle controller's MarkPodsNotReady: the status is compared with
// the lister's and written back if it differs, as the kubelet's status
// manager does for a mirror pod (needsReconcile through the mirror's UID).
type writtenStatus struct {
	status       v1.PodStatus
	base, result string
}

// stillOurs reports whether mirror, as the lister shows it, is the object
// w's write replaced or made, with st the status written.
func (w writtenStatus) stillOurs(mirror *v1.Pod, st *v1.PodStatus) bool {
	rv := mirror.ResourceVersion
	return rv != "" && (rv == w.base || rv == w.result) && apiequality.Semantic.DeepEqual(w.status, *st)
}

// NewMirrors validates cfg and returns the mirror client; Run keeps the
// mirror pods.
func NewMirrors(cfg MirrorConfig) (*Mirrors, error) {
	if cfg.Client == nil || cfg.Pods == nil || cfg.NodeName == "" || cfg.NodeUID == nil || cfg.Static == nil || cfg.Running == nil {
		return nil, errors.New("staticpods: the mirror client needs a client, the pod lister, the node's name and UID, the static pods and the runtime's running pods")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Period <= 0 {
		cfg.Period = 10 * time.Second
	}
	return &Mirrors{cfg: cfg, kick: make(chan struct{}, 1), statuses: map[types.UID]*v1.Pod{}, written: map[types.UID]writtenStatus{}}, nil
}

// Kick makes Run reconcile soon; it never blocks.
func (m *Mirrors) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// SetStatus records a static pod's newest status (the engine's publish)
// for its mirror pod.
func (m *Mirrors) SetStatus(pod *v1.Pod) {
	m.mu.Lock()
	m.statuses[pod.UID] = pod
	m.mu.Unlock()
	m.Kick()
}

// Handler is the informer handler that kicks Run when a mirror pod is
// added, changed or deleted.
func (m *Mirrors) Handler() cache.ResourceEventHandler {
	kickMirror := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*v1.Pod); ok && IsMirror(p) {
			m.Kick()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    kickMirror,
		UpdateFunc: func(_, obj any) { kickMirror(obj) },
		DeleteFunc: kickMirror,
	}
}

// MirrorSeenKicks is the informer handler that calls kick with the static
// pod's UID when a mirror pod is added to the informer's view (its initial
// list included): right after a crivk restart the engine holds a static
// pod's status until its mirror pod, whose status is the API's of it, is
// known, and syncs it again then.
func MirrorSeenKicks(kick func(types.UID)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*v1.Pod); ok && IsMirror(p) {
				kick(types.UID(p.Annotations[AnnotationMirror]))
			}
		},
	}
}

// Run reconciles at every kick and every Period until ctx ends.
func (m *Mirrors) Run(ctx context.Context) {
	tick := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer tick.Stop()
	for {
		if err := m.Reconcile(ctx); err != nil {
			log.G(ctx).WithError(err).Warn("mirror pods: reconcile failed, will retry")
		}
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-tick.C():
		}
	}
}

// Reconcile makes the API's mirror pods match the static pods once (Run's
// loop; tests call it).
func (m *Mirrors) Reconcile(ctx context.Context) error {
	var errs []error
	static := m.cfg.Static.Pods()
	want := map[string]bool{}
	for _, s := range static {
		want[fullName(s)] = true
		if err := m.syncMirror(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	if !m.cfg.Static.HasSynced() {
		// Right after a start the manifests may not have been read yet:
		// every mirror pod would look orphaned, and deleting one drops
		// its status (a new mirror starts without it).
		m.forgetStatuses(static)
		return errors.Join(errs...)
	}
	all, err := m.cfg.Pods.List(labels.Everything())
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, p := range all {
		if !IsMirror(p) || p.Spec.NodeName != m.cfg.NodeName || want[fullName(p)] || m.cfg.Static.Terminating(p.Namespace, p.Name) {
			continue
		}
		if m.stillRunning(ctx, p) {
			continue
		}
		log.G(ctx).WithField("pod", fullName(p)).WithField("uid", p.UID).Info("deleting orphaned mirror pod: no static pod of its name")
		if err := m.deleteMirror(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	m.forgetStatuses(static)
	return errors.Join(errs...)
}

// syncMirror keeps s's mirror pod (SyncPod's mirror checks) and writes
// s's status to it. While an older static pod of s's name terminates
// (its manifest changed), s has not started: the engine's pod workers
// hold the name for the old pod, as the kubelet's hold a static pod's
// full name (startedStaticPodsByFullname), and the kubelet's mirror
// checks run in the new pod's SyncPod only. The old mirror pod is
// therefore left as it is, Running with its UID, for the old pod's whole
// grace period (MirrorPodWithGracePeriod "mirror pod termination should
// satisfy grace period when static pod is updated"), and replaced once
// the old pod's termination completed (Source.Terminated kicks Run).
func (m *Mirrors) syncMirror(ctx context.Context, s *v1.Pod) error {
	if m.cfg.Static.Terminating(s.Namespace, s.Name) {
		return nil
	}
	hash := s.Annotations[AnnotationHash]
	mirror, err := m.cfg.Pods.Pods(s.Namespace).Get(s.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		mirror = nil
	}
	if mirror != nil && !IsMirror(mirror) {
		// Another pod holds the name: the kubelet's create fails the same
		// way; nothing of it is touched.
		return fmt.Errorf("static pod %s: a pod that is not its mirror holds the name (uid %s)", fullName(s), mirror.UID)
	}
	if mirror != nil && mirror.Annotations[AnnotationMirror] != hash && m.stillRunning(ctx, mirror) {
		// An older version's containers still run, unknown to the source
		// (changed while crivk was down): its mirror stays until they
		// are gone, as while Terminating.
		return nil
	}
	if mirror != nil && (mirror.DeletionTimestamp != nil || mirror.Annotations[AnnotationMirror] != hash) {
		log.G(ctx).WithField("pod", fullName(s)).WithField("uid", mirror.UID).Info("deleting mirror pod: marked for deletion or of another version of the static pod; it is created again")
		if err := m.deleteMirror(ctx, mirror); err != nil {
			return err
		}
		mirror = nil
	}
	if mirror == nil {
		if mirror, err = m.createMirror(ctx, s); err != nil || mirror == nil {
			return err
		}
	}
	return m.writeStatus(ctx, s, mirror)
}

// createMirror creates s's mirror pod and returns it; nil without an error
// while the node's UID is not known. An existing mirror pod of the same
// hash is the answer (a lagging informer).
func (m *Mirrors) createMirror(ctx context.Context, s *v1.Pod) (*v1.Pod, error) {
	nodeUID, err := m.cfg.NodeUID()
	if err != nil || nodeUID == "" {
		log.G(ctx).WithError(err).WithField("pod", fullName(s)).Debug("mirror pod waits for the node's UID")
		return nil, nil
	}
	mirror := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, Labels: s.Labels,
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: m.cfg.NodeName, UID: nodeUID, Controller: ptrTrue(),
			}},
		},
		Spec: *s.Spec.DeepCopy(),
	}
	for k, v := range s.Annotations {
		mirror.Annotations[k] = v
	}
	mirror.Annotations[AnnotationMirror] = s.Annotations[AnnotationHash]
	out, err := m.cfg.Client.Pods(s.Namespace).Create(ctx, mirror, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := m.cfg.Client.Pods(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if gerr == nil && IsMirror(cur) && cur.Annotations[AnnotationMirror] == mirror.Annotations[AnnotationMirror] && cur.DeletionTimestamp == nil {
			return cur, nil
		}
		return nil, fmt.Errorf("creating the mirror pod of %s: %w", fullName(s), err)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the mirror pod of %s: %w", fullName(s), err)
	}
	log.G(ctx).WithField("pod", fullName(s)).WithField("uid", out.UID).Info("mirror pod created")
	return out, nil
}

// deleteMirror deletes a mirror pod with grace 0 and its UID as
// precondition (the kubelet's DeleteMirrorPod); gone already is success.
// stillRunning reports whether the static pod that mirror reflects still
// has a running container or a ready sandbox (MirrorConfig.Running): its
// mirror must stay until they are gone. An error counts as running.
func (m *Mirrors) stillRunning(ctx context.Context, mirror *v1.Pod) bool {
	running, err := m.cfg.Running(ctx, types.UID(mirror.Annotations[AnnotationMirror]))
	if err != nil {
		log.G(ctx).WithError(err).WithField("pod", fullName(mirror)).Warn("mirror pod kept: cannot tell whether its static pod's containers are gone")
		return true
	}
	if running {
		log.G(ctx).WithField("pod", fullName(mirror)).WithField("uid", mirror.UID).Debug("mirror pod kept until its static pod's containers are gone")
	}
	return running
}

func (m *Mirrors) deleteMirror(ctx context.Context, mirror *v1.Pod) error {
	err := m.cfg.Client.Pods(mirror.Namespace).Delete(ctx, mirror.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(mirror.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting mirror pod %s (%s): %w", fullName(mirror), mirror.UID, err)
	}
	m.mu.Lock()
	delete(m.written, mirror.UID)
	m.mu.Unlock()
	return nil
}

// writeStatus writes s's newest status to its mirror pod when it differs
// from the mirror's, keeping the conditions other writers own
// (status.WithForeignConditions, crivk's one rule), unless the mirror is
// still the object of crivk's own write of that status (writtenStatus).
func (m *Mirrors) writeStatus(ctx context.Context, s, mirror *v1.Pod) error {
	m.mu.Lock()
	st := m.statuses[s.UID]
	last, wrote := m.written[mirror.UID]
	m.mu.Unlock()
	if st == nil && m.cfg.PodStatus != nil {
		st = m.cfg.PodStatus(s.UID)
	}
	if st == nil {
		return nil
	}
	upd := mirror.DeepCopy()
	upd.Status = *st.Status.DeepCopy()
	upd.Status.Conditions = status.WithForeignConditions(mirror.Status.Conditions, upd.Status.Conditions)
	if apiequality.Semantic.DeepEqual(mirror.Status, upd.Status) || (wrote && last.stillOurs(mirror, &upd.Status)) {
		return nil
	}
	out, err := m.cfg.Client.Pods(mirror.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// The informer brings the current object, whose event kicks
			// the next try.
			return nil
		}
		return fmt.Errorf("writing the status of static pod %s to its mirror pod: %w", fullName(s), err)
	}
	m.mu.Lock()
	m.written[mirror.UID] = writtenStatus{status: upd.Status, base: mirror.ResourceVersion, result: out.ResourceVersion}
	m.mu.Unlock()
	return nil
}

// forgetStatuses drops the statuses of static pods that are gone.
func (m *Mirrors) forgetStatuses(static []*v1.Pod) {
	keep := map[types.UID]bool{}
	for _, s := range static {
		keep[s.UID] = true
	}
	m.mu.Lock()
	for uid := range m.statuses {
		if !keep[uid] {
			delete(m.statuses, uid)
		}
	}
	m.mu.Unlock()
}

func ptrTrue() *bool { t := true; return &t }
