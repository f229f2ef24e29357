package vknode

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// vkRecorder is the event recorder virtual-kubelet's pod controller gets:
// it drops the controller's own success events (ProviderCreateSuccess,
// ProviderUpdateSuccess, ProviderDeleteSuccess), which a kubelet never
// records, so `kubectl describe pod` shows the kubelet's events only. The
// failure events (Provider*Failed) pass: crivk's provider does not fail
// those calls, so one would be news.
type vkRecorder struct{ record.EventRecorder }

func vkNoise(reason string) bool {
	return strings.HasPrefix(reason, "Provider") && strings.HasSuffix(reason, "Success")
}

func (r vkRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	if !vkNoise(reason) {
		r.EventRecorder.Event(object, eventtype, reason, message)
	}
}

func (r vkRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	if !vkNoise(reason) {
		r.EventRecorder.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

func (r vkRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	if !vkNoise(reason) {
		r.EventRecorder.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}
