package provider

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/crivk/crivk/lifecycle"
)

// basicObjects is a minimal lifecycle.Objects that reads every object
// straight from the API server (no cache, no watch): enough for the
// environment of containers. The volume work brings the node's real one
// (objects.go); the two are to be reconciled.
type basicObjects struct {
	client kubernetes.Interface
}

// NewBasicObjects returns an Objects reading through client.
func NewBasicObjects(client kubernetes.Interface) lifecycle.Objects {
	return &basicObjects{client: client}
}

// GetConfigMap reads a ConfigMap; not found is the kubelet's
// `configmap "x" not found`.
func (o *basicObjects) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	cm, err := o.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
	}
	return cm, err
}

// GetSecret reads a Secret; not found is the kubelet's `secret "x" not found`.
func (o *basicObjects) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	s, err := o.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
	}
	return s, err
}

// ListServices lists the services of namespace.
func (o *basicObjects) ListServices(ctx context.Context, namespace string) ([]*v1.Service, error) {
	l, err := o.client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*v1.Service, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out, nil
}

// RequestToken is not supported by the basic implementation.
func (o *basicObjects) RequestToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil, fmt.Errorf("service account tokens are not supported by the basic objects reader (%s/%s)", namespace, serviceAccount)
}
