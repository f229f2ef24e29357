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

func sandboxLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+4)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
	l[LabelManagedBy] = managedByValue
	return l
}

func containerLabels(pod *v1.Pod, name string, typ ContainerType) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: name,
		LabelContainerType: string(typ),
		LabelManagedBy:     managedByValue,
	}
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
