package cri

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations crivk puts on sandboxes and containers. The keys are
// the kubelet's (pkg/kubelet/types/labels.go, kuberuntime/labels.go), so the
// runtime's own tooling shows crivk's pods the way it shows the kubelet's.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
	LabelContainerType = "io.kubernetes.container.type"

	// LabelManagedBy marks what crivk created, so that crivk never touches
	// sandboxes of another agent sharing the runtime.
	LabelManagedBy = "io.crivk.managed-by"
	managedByValue = "crivk"

	// LabelNode names the node of a multi-node crivk that created a
	// sandbox or container (Config.Node, docs/scale.md): a node lists,
	// syncs and collects only its own. A single-node crivk never writes
	// it.
	LabelNode = "io.crivk.node"

	AnnotationContainerHash             = "io.kubernetes.container.hash"
	AnnotationRestartCount              = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath    = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy  = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPodTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerType             = "io.crivk.container.type"
)

// ContainerType tells regular and init containers apart in the runtime.
type ContainerType string

const (
	ContainerTypeRegular ContainerType = "container"
	ContainerTypeInit    ContainerType = "init"
	// ContainerTypeEphemeral: an ephemeral container (kubectl debug),
	// started once and never restarted.
	ContainerTypeEphemeral ContainerType = "ephemeral"
)

// OwnedSelector is the label selector of the sandboxes and containers that
// node owns: crivk's (LabelManagedBy) and, when node is not empty (a node
// of a multi-node crivk), that node's (LabelNode). With node empty (a
// single-node crivk) it is every crivk object, with a node label or
// without: a single-node crivk adopts what earlier versions made. Every
// listing of "my" objects uses it; a new map each call.
func OwnedSelector(node string) map[string]string {
	sel := map[string]string{LabelManagedBy: managedByValue}
	if node != "" {
		sel[LabelNode] = node
	}
	return sel
}

// owned is OwnedSelector of r's node.
func (r *Runtime) owned() map[string]string { return OwnedSelector(r.cfg.Node) }

// Owned is the label selector of r's own objects, OwnedSelector of
// Config.Node, for the readers of the raw services (nodeapi/stats).
func (r *Runtime) Owned() map[string]string { return r.owned() }

// ownsLabels reports whether an object with labels is r's: any crivk
// object for a single-node crivk, the node's own for a node of many.
func (r *Runtime) ownsLabels(labels map[string]string) bool {
	for k, v := range r.owned() {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// sandboxLabels are the pod's labels and crivk's; node, when not empty,
// is written as LabelNode over a pod label of that key.
func sandboxLabels(pod *v1.Pod, node string) map[string]string {
	l := make(map[string]string, len(pod.Labels)+5)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
	l[LabelManagedBy] = managedByValue
	if node != "" {
		l[LabelNode] = node
	}
	return l
}

func containerLabels(pod *v1.Pod, name string, typ ContainerType, node string) map[string]string {
	l := map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: name,
		LabelContainerType: string(typ),
		LabelManagedBy:     managedByValue,
	}
	if node != "" {
		l[LabelNode] = node
	}
	return l
}

func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int) map[string]string {
	a := map[string]string{
		AnnotationRestartCount:             strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	return a
}

// PodRef identifies a pod in the runtime. It is all KillPod needs, so that a
// pod can be cleaned up from what the runtime reports when its spec is gone.
type PodRef struct {
	UID       types.UID
	Name      string
	Namespace string
}

// String gives the identity used in logs and errors: ns/name (uid).
func (r PodRef) String() string {
	return r.Namespace + "/" + r.Name + " (" + string(r.UID) + ")"
}

// RefOf returns the runtime identity of pod.
func RefOf(pod *v1.Pod) PodRef {
	return PodRef{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
}
