package nodeagent

import (
	"fmt"
	"time"

	"github.com/crivk/crivk/certificate"
	"k8s.io/client-go/kubernetes"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// apiClients are crivk's API clients, split as the kubelet splits its own
// (cmd/kubelet/app/server.go) so that one kind of traffic cannot starve
// another:
//   - core: pods, their status and the objects they reference, bounded by
//     --kube-api-qps/--kube-api-burst;
//   - events: the event recorder's sink, bounded by --event-qps/--event-burst
//     (the kubelet's --event-qps/--event-burst);
//   - heartbeat: the Node status and the node Lease, never rate limited and
//     timed out after one node status period, so a burst of pod traffic
//     cannot make the node look dead.
type apiClients struct {
	core   corev1client.CoreV1Interface
	events corev1client.EventsGetter
	nodes  corev1client.NodesGetter
	leases coordinationv1client.LeasesGetter
	// tokenReviews and accessReviews check the node API's clients
	// (nodeapi.Auth), on the pods client's limits.
	tokenReviews  authnv1client.TokenReviewsGetter
	accessReviews authzv1client.SubjectAccessReviewsGetter
	// csrs requests the node API's serving certificate
	// (--rotate-server-certificates), on the pods client's limits.
	csrs      kubernetes.Interface
	heartbeat time.Duration

	// runtimeClasses reads RuntimeClasses (runtimeclass), on the
	// pods client's limits.
	runtimeClasses nodev1client.NodeV1Interface
	// resourceClaims reads the ResourceClaims of pods (lifecycle's DRA
	// check), on the pods client's limits.
	resourceClaims resourcev1client.ResourceV1Interface
	// storage writes the node's CSINode (package csi, at a CSI driver's
	// registration), on the pods client's limits.
	storage storagev1client.StorageV1Interface
}

// apiLimits are the client-side limits of apiClients.
type apiLimits struct {
	QPS        float32
	Burst      int
	EventQPS   float32 // 0: no limit, as the kubelet's --event-qps
	EventBurst int
	// Heartbeat is the node status period; the heartbeat client's timeout.
	Heartbeat time.Duration
}

func newAPIClients(base *rest.Config, l apiLimits) (*apiClients, error) {
	if l.QPS <= 0 || l.Burst <= 0 {
		return nil, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive")
	}
	if l.EventQPS < 0 || l.EventBurst < 0 {
		return nil, fmt.Errorf("--event-qps and --event-burst must not be negative")
	}
	build := func(qps float32, burst int, timeout time.Duration) *rest.Config {
		cfg := rest.CopyConfig(base)
		cfg.QPS, cfg.Burst, cfg.Timeout = qps, burst, timeout
		// One limiter per client, shared by its API groups.
		if qps > 0 {
			cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
		} else {
			cfg.QPS, cfg.RateLimiter = -1, nil
		}
		return cfg
	}
	c := &apiClients{heartbeat: l.Heartbeat}
	var err error
	if c.core, err = corev1client.NewForConfig(build(l.QPS, l.Burst, 0)); err != nil {
		return nil, fmt.Errorf("building the API client: %w", err)
	}
	coreCfg := build(l.QPS, l.Burst, 0)
	if c.tokenReviews, err = authnv1client.NewForConfig(coreCfg); err != nil {
		return nil, fmt.Errorf("building the token review client: %w", err)
	}
	if c.accessReviews, err = authzv1client.NewForConfig(coreCfg); err != nil {
		return nil, fmt.Errorf("building the access review client: %w", err)
	}
	if c.csrs, err = certificate.NewCSRClientset(coreCfg); err != nil {
		return nil, fmt.Errorf("building the certificates client: %w", err)
	}
	if c.runtimeClasses, err = nodev1client.NewForConfig(coreCfg); err != nil {
		return nil, fmt.Errorf("building the RuntimeClass client: %w", err)
	}
	if c.resourceClaims, err = resourcev1client.NewForConfig(coreCfg); err != nil {
		return nil, fmt.Errorf("building the ResourceClaim client: %w", err)
	}
	if c.storage, err = storagev1client.NewForConfig(coreCfg); err != nil {
		return nil, fmt.Errorf("building the CSINode client: %w", err)
	}
	if c.events, err = corev1client.NewForConfig(build(l.EventQPS, l.EventBurst, 0)); err != nil {
		return nil, fmt.Errorf("building the event client: %w", err)
	}
	hbCfg := build(0, 0, l.Heartbeat)
	if c.nodes, err = corev1client.NewForConfig(hbCfg); err != nil {
		return nil, fmt.Errorf("building the heartbeat client: %w", err)
	}
	if c.leases, err = coordinationv1client.NewForConfig(hbCfg); err != nil {
		return nil, fmt.Errorf("building the heartbeat client: %w", err)
	}
	return c, nil
}
