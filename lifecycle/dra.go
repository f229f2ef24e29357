package lifecycle

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
)

// Dynamic resource allocation (spec.resourceClaims, GA in 1.34): a pod
// that asks for a device must not run without it. The kubelet prepares a
// pod's claims through the DRA drivers registered on the node before it
// creates the pod's sandbox (kuberuntime's SyncPod calls
// PrepareDynamicResources, the DRA manager's PrepareResources); when that
// fails, it records the Warning FailedPrepareDynamicResources "Failed to
// prepare dynamic resources: <err>" and creates nothing, and the pod
// stays Pending in ContainerCreating (the next sync tries again).
//
// crivk does not prepare claims: DRA drivers' kubelet plugins register
// (package dra keeps them) but nothing calls them yet (issue #48), so no
// claim that a driver allocated can be prepared. prepareResourceClaims makes the kubelet's validation
// pass (its order and its words) and fails where the kubelet would, and
// at the latest where the kubelet would need a driver ("DRA driver <name>
// is not registered", as on a kubelet where the driver is not installed).
// A pod none of whose claims needs a driver (a claim template for which
// no claim is needed, an allocation without devices) runs, as on the
// kubelet.

// reasonFailedPrepareDynamicResources is the kubelet's event reason.
const reasonFailedPrepareDynamicResources = "FailedPrepareDynamicResources"

// errClaimNotFound and errClaimAPIUnsupported are the errors of the
// kubelet's resourceclaim.Name (k8s.io/dynamic-resource-allocation).
var (
	errClaimNotFound       = errors.New("ResourceClaim not created yet")
	errClaimAPIUnsupported = errors.New("none of the supported fields are set")
)

// prepareResourceClaims returns nil when pod may run with its resource
// claims on this node, else the kubelet's error ("prepare dynamic
// resources: ..."). claims may be nil: a claim is then not readable
// ("fetch ResourceClaim <name>: ...").
func prepareResourceClaims(ctx context.Context, claims resourcev1client.ResourceClaimsGetter, pod *v1.Pod) error {
	if err := validateResourceClaims(ctx, claims, pod); err != nil {
		return fmt.Errorf("prepare dynamic resources: %w", err)
	}
	return nil
}

// validateResourceClaims is the kubelet's prepareResources up to the point
// where it needs the claims' drivers.
func validateResourceClaims(ctx context.Context, claims resourcev1client.ResourceClaimsGetter, pod *v1.Pod) error {
	for i := range pod.Spec.ResourceClaims {
		name, mustCheckOwner, err := claimName(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return err
		}
		if name == nil {
			continue // no claim needed
		}
		if claims == nil {
			return fmt.Errorf("fetch ResourceClaim %s: %w", *name, errNoClaimClient)
		}
		claim, err := claims.ResourceClaims(pod.Namespace).Get(ctx, *name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("fetch ResourceClaim %s: %w", *name, err)
		}
		if mustCheckOwner && (claim.Namespace != pod.Namespace || !metav1.IsControlledBy(claim, pod)) {
			return fmt.Errorf("ResourceClaim %s/%s was not created for pod %s/%s (pod is not owner)", claim.Namespace, claim.Name, pod.Namespace, pod.Name)
		}
		if !reservedFor(pod, claim) {
			return fmt.Errorf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", pod.Name, pod.UID, *name, claim.UID)
		}
		if claim.Status.Allocation == nil {
			return fmt.Errorf("ResourceClaim %s: %w", claim.Name, errors.New("not allocated"))
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver == "" {
				return errors.New("DRA driver name is empty")
			}
			// No driver registers with crivk.
			return fmt.Errorf("DRA driver %s is not registered", r.Driver)
		}
	}
	return nil
}

// errNoClaimClient: the engine was given no ResourceClaim client.
var errNoClaimClient = errors.New("no ResourceClaim client configured")

// claimName is the kubelet's resourceclaim.Name: the name of the claim a
// pod's claim entry refers to, nil when none is needed (a template for
// which the controller decided so), and whether the claim must be owned by
// the pod (one made from a template).
func claimName(pod *v1.Pod, c *v1.PodResourceClaim) (*string, bool, error) {
	switch {
	case c.ResourceClaimName != nil:
		return c.ResourceClaimName, false, nil
	case c.ResourceClaimTemplateName != nil:
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.Name == c.Name {
				return s.ResourceClaimName, true, nil
			}
		}
		return nil, false, fmt.Errorf(`pod "%s/%s": %w`, pod.Namespace, pod.Name, errClaimNotFound)
	default:
		return nil, false, fmt.Errorf(`pod "%s/%s", spec.resourceClaim %q: %w`, pod.Namespace, pod.Name, c.Name, errClaimAPIUnsupported)
	}
}

// reservedFor: the claim lists the pod among its consumers.
func reservedFor(pod *v1.Pod, claim *resourceapi.ResourceClaim) bool {
	for _, r := range claim.Status.ReservedFor {
		if r.UID == pod.UID {
			return true
		}
	}
	return false
}
