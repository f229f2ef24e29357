package apiobjects

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/crivk/crivk/lifecycle"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Reader is the engine's lifecycle.Objects with least privilege: it
// reads only the ConfigMaps and Secrets that the node's pods ask for, each
// through its own watch restricted to that one object (a field selector on
// metadata.name, which the API server's Node authorizer allows for objects
// referenced by the node's pods), never a cluster-wide list. This is the
// kubelet's watch-based ConfigMap/Secret manager.
//
// The first Get of an object starts its watch and reads it directly; later
// Gets are served from the watch's store once it is synced. A change seen
// by a watch kicks the pods of the namespace that reference the object, so
// mounted files follow within seconds. A watch nobody asked for during
// idleTimeout is stopped (its pods are gone).
//
// Services are read as the kubelet reads them, all of them through one
// informer (the Node authorizer grants a node list and watch of every
// Service), since the service-link variables of a pod need every Service
// of its namespace and of the default one.
type Reader struct {
	client corev1client.CoreV1Interface
	clock  clock.WithTicker

	mu sync.Mutex
	// watches by object. Guarded by mu.
	watches map[objectKey]*objectWatch
	// kick syncs a pod at once; pods lists the node's pods of a namespace.
	// Guarded by mu; nil until SetKick.
	kick func(types.UID)
	pods func(namespace string) []*v1.Pod
	// services is every Service of the cluster, for service-link
	// environment variables, filled by servicesCtrl while Run runs.
	services     *serviceCache
	servicesCtrl cache.Controller
}

var _ lifecycle.Objects = (*Reader)(nil)

// idleTimeout: a watch no Get used for this long is stopped. Pods sync at
// least every --sync-interval (10 s), so a live pod's objects stay watched.
const idleTimeout = 2 * time.Minute

// unreferencedAfter: a watch no pod of the node references any more is
// stopped once it has not been used for this long, checked as often. The
// kubelet's watch-based manager stops an object's reflector when the last
// pod referencing it is unregistered (DeleteReference); this is that rule
// read from the node's pods, with a few seconds' grace for a Get made by a
// pod that the informer shows a moment later.
const unreferencedAfter = 5 * time.Second

type objectKind string

const (
	kindConfigMap objectKind = "configmap"
	kindSecret    objectKind = "secret"
)

type objectKey struct {
	kind            objectKind
	namespace, name string
}

type objectWatch struct {
	store    cache.Store
	synced   func() bool
	stop     chan struct{}
	lastUsed time.Time // guarded by Reader.mu
}

// New returns the reader of client's ConfigMaps, Secrets and Services.
// Run runs its janitor and its Service informer.
func New(client corev1client.CoreV1Interface, clk clock.WithTicker) *Reader {
	if clk == nil {
		clk = clock.RealClock{}
	}
	svc, ctrl := newServiceCache(client)
	return &Reader{client: client, clock: clk, watches: map[objectKey]*objectWatch{}, services: svc, servicesCtrl: ctrl}
}

// SetKick installs how changed objects reach pods: pods lists the node's
// pods of a namespace, kick syncs one now.
func (o *Reader) SetKick(pods func(namespace string) []*v1.Pod, kick func(types.UID)) {
	o.mu.Lock()
	o.pods, o.kick = pods, kick
	o.mu.Unlock()
}

// Run keeps the Services cache and stops idle watches until ctx ends, then
// stops all of them.
func (o *Reader) Run(ctx context.Context) {
	go o.servicesCtrl.Run(ctx.Done())
	t := o.clock.NewTicker(unreferencedAfter)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			o.mu.Lock()
			for k, w := range o.watches {
				close(w.stop)
				delete(o.watches, k)
			}
			o.mu.Unlock()
			return
		case <-t.C():
			o.stopIdle()
		}
	}
}

// stopIdle stops the watches no pod references (as the kubelet does when
// the last referencing pod goes) and those unused for idleTimeout.
func (o *Reader) stopIdle() {
	now := o.clock.Now()
	o.mu.Lock()
	pods := o.pods
	var candidates []objectKey
	for k, w := range o.watches {
		if now.Sub(w.lastUsed) >= unreferencedAfter {
			candidates = append(candidates, k)
		}
	}
	o.mu.Unlock()
	stop := map[objectKey]bool{}
	for _, k := range candidates {
		if pods == nil {
			continue
		}
		referenced := false
		for _, p := range pods(k.namespace) {
			if references(p, k) {
				referenced = true
				break
			}
		}
		stop[k] = !referenced
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, w := range o.watches {
		idle := now.Sub(w.lastUsed) >= idleTimeout
		unreferenced := stop[k] && now.Sub(w.lastUsed) >= unreferencedAfter
		if idle || unreferenced {
			close(w.stop)
			delete(o.watches, k)
		}
	}
}

// GetConfigMap returns a ConfigMap a pod of the node references. A missing
// one is a NotFound error saying `configmap "name" not found`, the
// kubelet's words.
func (o *Reader) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := o.get(ctx, objectKey{kindConfigMap, namespace, name})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap), nil
}

// GetSecret returns a Secret a pod of the node references.
func (o *Reader) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := o.get(ctx, objectKey{kindSecret, namespace, name})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret), nil
}

func (o *Reader) get(ctx context.Context, key objectKey) (runtime.Object, error) {
	w := o.watch(key)
	if w.synced() {
		obj, ok, err := w.store.GetByKey(key.namespace + "/" + key.name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, notFound(key)
		}
		return obj.(runtime.Object).DeepCopyObject(), nil
	}
	var obj runtime.Object
	var err error
	switch key.kind {
	case kindConfigMap:
		obj, err = o.client.ConfigMaps(key.namespace).Get(ctx, key.name, metav1.GetOptions{})
	case kindSecret:
		obj, err = o.client.Secrets(key.namespace).Get(ctx, key.name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, notFound(key)
	}
	if err != nil {
		return nil, fmt.Errorf("getting %s %s/%s: %w", key.kind, key.namespace, key.name, err)
	}
	return obj, nil
}

func notFound(key objectKey) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: string(key.kind)}, key.name)
}

// watch returns the watch of key, starting it on first use.
func (o *Reader) watch(key objectKey) *objectWatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w, ok := o.watches[key]; ok {
		w.lastUsed = o.clock.Now()
		return w
	}
	sel := fields.OneTermEqualSelector("metadata.name", key.name).String()
	var lw *cache.ListWatch
	var example runtime.Object
	switch key.kind {
	case kindConfigMap:
		example = &v1.ConfigMap{}
		c := o.client.ConfigMaps(key.namespace)
		lw = listWatchByName(sel, c.List, c.Watch)
	case kindSecret:
		example = &v1.Secret{}
		c := o.client.Secrets(key.namespace)
		lw = listWatchByName(sel, c.List, c.Watch)
	}
	changed := func(any) { o.kickReferencing(key) }
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, o.client),
		ObjectType:    example,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { changed(obj) },
			UpdateFunc: func(_, obj any) { changed(obj) },
			DeleteFunc: changed,
		},
	})
	w := &objectWatch{store: store, synced: ctrl.HasSynced, stop: make(chan struct{}), lastUsed: o.clock.Now()}
	o.watches[key] = w
	go ctrl.Run(w.stop)
	return w
}

// kickReferencing syncs the node's pods that reference key.
func (o *Reader) kickReferencing(key objectKey) {
	o.mu.Lock()
	pods, kick := o.pods, o.kick
	o.mu.Unlock()
	if pods == nil || kick == nil {
		return
	}
	for _, p := range pods(key.namespace) {
		if references(p, key) {
			log.L.WithField("pod", p.Namespace+"/"+p.Name).WithField(string(key.kind), key.name).Debug("referenced object changed; syncing the pod")
			kick(p.UID)
		}
	}
}

// references reports whether pod uses the object in a volume or in its
// containers' environment.
func references(pod *v1.Pod, key objectKey) bool {
	for _, v := range pod.Spec.Volumes {
		switch key.kind {
		case kindConfigMap:
			if v.ConfigMap != nil && v.ConfigMap.Name == key.name {
				return true
			}
		case kindSecret:
			if v.Secret != nil && v.Secret.SecretName == key.name {
				return true
			}
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if key.kind == kindConfigMap && s.ConfigMap != nil && s.ConfigMap.Name == key.name {
					return true
				}
				if key.kind == kindSecret && s.Secret != nil && s.Secret.Name == key.name {
					return true
				}
			}
		}
	}
	if key.kind == kindSecret {
		for _, s := range pod.Spec.ImagePullSecrets {
			if s.Name == key.name {
				return true
			}
		}
	}
	var cs []v1.Container
	cs = append(cs, pod.Spec.InitContainers...)
	cs = append(cs, pod.Spec.Containers...)
	for _, c := range cs {
		for _, e := range c.EnvFrom {
			if key.kind == kindConfigMap && e.ConfigMapRef != nil && e.ConfigMapRef.Name == key.name {
				return true
			}
			if key.kind == kindSecret && e.SecretRef != nil && e.SecretRef.Name == key.name {
				return true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if key.kind == kindConfigMap && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == key.name {
				return true
			}
			if key.kind == kindSecret && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == key.name {
				return true
			}
		}
	}
	return false
}

// ListServices returns the services of namespace (service-link
// environment variables) from the Services cache that Run keeps (shared:
// read only). Before the cache's first list it waits for it, at most
// servicesSyncTimeout.
func (o *Reader) ListServices(ctx context.Context, namespace string) ([]*v1.Service, error) {
	return o.services.list(ctx, namespace)
}

// tokenNotFoundRetries and tokenNotFoundDelay: how often, and how far
// apart, RequestToken asks again after a NotFound for a token bound to a
// pod (about one second in all).
const (
	tokenNotFoundRetries = 5
	tokenNotFoundDelay   = 200 * time.Millisecond
)

// RequestToken asks the TokenRequest API for a token of serviceAccount.
//
// A token bound to a pod that the API answers NotFound for is asked again,
// up to tokenNotFoundRetries times tokenNotFoundDelay apart: the API
// server's NodeRestriction admission looks the pod up in its own informer,
// which can be some milliseconds behind the watch that brought the pod to
// crivk, and crivk mounts a new pod's volumes at once (the kubelet's
// volume reconciler starts 100 ms or more later, and rarely meets it). A
// pod really gone stays NotFound, and the error is the last answer's.
func (o *Reader) RequestToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	for attempt := 0; ; attempt++ {
		tr, err := o.client.ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
		if err == nil {
			return tr, nil
		}
		boundToPod := req.Spec.BoundObjectRef != nil && req.Spec.BoundObjectRef.Kind == "Pod"
		if !apierrors.IsNotFound(err) || !boundToPod || attempt == tokenNotFoundRetries {
			return nil, fmt.Errorf("requesting a token of service account %s/%s: %w", namespace, serviceAccount, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("requesting a token of service account %s/%s: %w", namespace, serviceAccount, err)
		case <-o.clock.After(tokenNotFoundDelay):
		}
	}
}

// listWatchByName lists and watches one object, by a field selector on its
// name.
func listWatchByName[L runtime.Object](sel string, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return watchFn(ctx, opts)
		},
	}
}
