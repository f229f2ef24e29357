package apiobjects

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GetPersistentVolumeClaim reads a claim a pod of the node uses, straight
// from the API server at every call, as the kubelet's volume manager does
// (desired_state_of_world_populator's getPVCExtractPV): a claim's binding
// and deletion must be current when a pod's volumes are set up, and the
// Node authorizer allows a node to get the claims of its pods. Errors are
// the client's (apierrors.IsNotFound for a missing claim).
func (o *Reader) GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	return o.client.PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// GetPersistentVolume reads the volume bound to a claim of a pod of the
// node, as GetPersistentVolumeClaim (the kubelet's getPVSpec).
func (o *Reader) GetPersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	return o.client.PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}
