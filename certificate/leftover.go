package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/client-go/rest"
	certmgr "k8s.io/client-go/util/certificate"
)

// leftover is the verdict on the client certificate a previous run left
// (in the store under <root-dir>/pki, or named by --kubeconfig), taken
// before the certificate manager starts with it. doc.go's "A root dir left
// by another node or cluster" says why these checks and no others.
type leftover int

const (
	// leftoverNone: no certificate, or an expired one; the bootstrap runs
	// as it always did.
	leftoverNone leftover = iota
	// leftoverUsable: this node's, and the current API server accepts it
	// (or could not be asked: kept, as before this check existed).
	leftoverUsable
	// leftoverOtherNode: issued for another node name.
	leftoverOtherNode
	// leftoverOtherCluster: the current API server refuses it (401): it
	// was signed by a CA this cluster does not trust.
	leftoverOtherCluster
)

func (l leftover) String() string {
	switch l {
	case leftoverNone:
		return "none"
	case leftoverUsable:
		return "usable"
	case leftoverOtherNode:
		return "another node's"
	case leftoverOtherCluster:
		return "another cluster's"
	}
	return fmt.Sprintf("leftover(%d)", int(l))
}

// stale says whether the certificate must not be used.
func (l leftover) stale() bool { return l == leftoverOtherNode || l == leftoverOtherCluster }

// probeTimeout bounds the one request that asks the current API server
// whether it accepts a left-over certificate.
const probeTimeout = 10 * time.Second

// checkLeftover judges cur, the certificate the manager would start with,
// for the node nodeName of the cluster whose API server current names
// (the bootstrap kubeconfig's server and CA; nil: it cannot be loaded, and
// only the node name is checked). detail says what was found, for the log
// line; inconclusive is set when the API server could not be asked.
func checkLeftover(ctx context.Context, cur *tls.Certificate, nodeName string, current *rest.Config) (verdict leftover, detail string, inconclusive error) {
	if !unexpired(cur) {
		return leftoverNone, "", nil
	}
	leaf, err := leafOf(cur)
	if err != nil {
		return leftoverNone, "", nil
	}
	want := "system:node:" + nodeName
	if leaf.Subject.CommonName != want {
		return leftoverOtherNode, fmt.Sprintf("a certificate for %s, not %s", leaf.Subject.CommonName, want), nil
	}
	if current == nil {
		return leftoverUsable, "", nil
	}
	accepted, err := acceptedBy(ctx, current, cur)
	switch {
	case err != nil:
		return leftoverUsable, "", err
	case !accepted:
		return leftoverOtherCluster, fmt.Sprintf("a certificate for %s issued by %s, which the API server %s refuses (401 Unauthorized: it does not trust that CA)", leaf.Subject.CommonName, leaf.Issuer.String(), current.Host), nil
	}
	return leftoverUsable, "", nil
}

// leafOf parses the first certificate of c unless it is parsed already.
func leafOf(c *tls.Certificate) (*x509.Certificate, error) {
	if c.Leaf != nil {
		return c.Leaf, nil
	}
	if len(c.Certificate) == 0 {
		return nil, errors.New("no certificate")
	}
	return x509.ParseCertificate(c.Certificate[0])
}

// acceptedBy asks the API server of server (verified with its CA) for
// /version, presenting cert as the client certificate, whatever CAs the
// server names as acceptable (as the rotating transport does). The API
// server authenticates every request before it authorizes it, /version
// included, and answers 401 to a client certificate it cannot verify even
// where anonymous requests are allowed; any other HTTP answer means it
// authenticated the certificate. A transport error or a 5xx is returned as
// an error: nothing can be concluded from it.
func acceptedBy(ctx context.Context, server *rest.Config, cert *tls.Certificate) (bool, error) {
	probe := serverOnly(server)
	tlsCfg, err := rest.TLSConfigFor(probe)
	if err != nil {
		return false, err
	}
	if tlsCfg == nil {
		return false, fmt.Errorf("the API server %s is not reached over TLS", server.Host)
	}
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	base, _, err := rest.DefaultServerUrlFor(probe)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base.String(), "/")+"/version", nil)
	if err != nil {
		return false, err
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsCfg, TLSHandshakeTimeout: probeTimeout}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return false, nil
	case resp.StatusCode >= 500:
		return false, fmt.Errorf("the API server %s answered %s", server.Host, resp.Status)
	}
	return true, nil
}

// setAsideLeftover judges the certificate the store holds (checkLeftover)
// and says whether it must be set aside: the node then starts afresh, as
// if the root dir were empty. A stale certificate with no bootstrap
// credential to replace it is an error naming the conflict. The log line
// names what was found and what is done.
func setAsideLeftover(ctx context.Context, c BootstrapConfig, store certmgr.FileStore, kubeconfigCert string, boot *rest.Config, bootErr error) (bool, error) {
	cur, err := store.Current()
	if err != nil {
		// No certificate (NoCertKeyError), or one that does not load: the
		// manager reports the latter, as before.
		return false, nil
	}
	path := leftoverPath(store, kubeconfigCert)
	verdict, detail, inconclusive := checkLeftover(ctx, cur, c.NodeName, boot)
	if inconclusive != nil {
		log.G(ctx).WithError(inconclusive).WithField("certificate", path).Warn("TLS bootstrap: could not ask the API server whether it accepts the client certificate left under the root dir: it is used, as it is this node's")
	}
	if !verdict.stale() {
		return false, nil
	}
	if bootErr != nil {
		return false, fmt.Errorf("the client certificate %s is %s (%s) and --bootstrap-kubeconfig %s cannot be loaded to request this node's: %w", path, verdict, detail, c.BootstrapKubeconfig, bootErr)
	}
	log.G(ctx).WithField("certificate", path).WithField("kubeconfig", c.Kubeconfig).WithField("node", c.NodeName).
		Warnf("TLS bootstrap: the client certificate left under the root dir is %s (%s): it is not used; a new one is requested with the bootstrap credential, and --kubeconfig is written for it once signed", verdict, detail)
	return true, nil
}

// leftoverPath names the file the store's certificate came from, for the
// log line: the store's current pair when it exists, else the certificate
// file --kubeconfig names.
func leftoverPath(store certmgr.FileStore, kubeconfigCert string) string {
	if _, err := os.Stat(store.CurrentPath()); err == nil || kubeconfigCert == "" {
		return store.CurrentPath()
	}
	return kubeconfigCert
}

// freshStore is a certificate store whose left-over certificate is hidden
// until the manager stores a new one: the manager starts without a
// certificate and requests one with the bootstrap credential. Nothing is
// deleted; the new pair replaces the current link, as at every rotation.
type freshStore struct {
	certmgr.FileStore
	mu      sync.Mutex
	updated bool // guarded by mu
}

var _ certmgr.FileStore = (*freshStore)(nil)

func (s *freshStore) Current() (*tls.Certificate, error) {
	s.mu.Lock()
	updated := s.updated
	s.mu.Unlock()
	if !updated {
		e := certmgr.NoCertKeyError("the left-over certificate is not used (another node's or another cluster's)")
		return nil, &e
	}
	return s.FileStore.Current()
}

func (s *freshStore) Update(cert, key []byte) (*tls.Certificate, error) {
	c, err := s.FileStore.Update(cert, key)
	if err == nil {
		s.mu.Lock()
		s.updated = true
		s.mu.Unlock()
	}
	return c, err
}
