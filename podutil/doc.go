// Package podutil holds rules the kubelet derives from a pod's spec alone
// and that more than one of crivk's packages need: the QoS class, the
// container resources and CPU conversions, sidecars (restartable init
// containers), whether an exited container restarts (its restartPolicy
// and restartPolicyRules over the pod's) and whether its exit restarts
// the whole pod in place (the rule action RestartAllContainers), the
// pod's hostname and domain,
// the downward API's resource values, $(VAR) expansion, the resolution
// of a probe's or hook's port, whether a pod is static (from a file) and
// the API's default pull policy of an image.
// It also holds ErrExecTimedOut, the one error the runtime (cri) returns and
// the prober tests for, so that the prober needs no import of cri.
// The pod's requests (PodRequests, PodRequest: the kubelet's rule,
// component-helpers' resource.PodRequests) are here too, so that
// admission, preemption and resize count them one way.
// It is a leaf: it imports only k8s.io/api, apimachinery and
// component-helpers, never another crivk package, and it does no I/O.
package podutil
