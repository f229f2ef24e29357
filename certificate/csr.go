package certificate

import (
	"k8s.io/client-go/kubernetes"
	certsv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certsv1beta1client "k8s.io/client-go/kubernetes/typed/certificates/v1beta1"
	"k8s.io/client-go/rest"
)

// csrClientset is the narrow clientset the certificate manager is given:
// only the certificates API, so that crivk links no other API group's
// client. The embedded interface is never called (nil): the manager and
// client-go's csr helpers use CertificatesV1 and, on servers without v1,
// CertificatesV1beta1.
type csrClientset struct {
	kubernetes.Interface
	v1      certsv1client.CertificatesV1Interface
	v1beta1 certsv1beta1client.CertificatesV1beta1Interface
}

func (c csrClientset) CertificatesV1() certsv1client.CertificatesV1Interface { return c.v1 }
func (c csrClientset) CertificatesV1beta1() certsv1beta1client.CertificatesV1beta1Interface {
	return c.v1beta1
}

// NewCSRClientset is a clientset of the certificates API only, for the
// client and serving certificate managers (main builds the serving one's
// on the pods client's limits).
func NewCSRClientset(cfg *rest.Config) (kubernetes.Interface, error) {
	v1c, err := certsv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	v1b, err := certsv1beta1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return csrClientset{v1: v1c, v1beta1: v1b}, nil
}
