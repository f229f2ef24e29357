package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"github.com/crivk/crivk/internal/incluster"
	"os"
	"path/filepath"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certsv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certmgr "k8s.io/client-go/util/certificate"
)

// clientCertPrefix names the client certificate's files in the store:
// <CertDir>/crivk-client-current.pem links to the newest
// crivk-client-<time>.pem (key and certificate in one file, 0600).
const clientCertPrefix = "crivk-client"

// BootstrapConfig is what NodeClientConfig needs: main fills it from
// --node-name, --kubeconfig, --bootstrap-kubeconfig and <root-dir>/pki.
type BootstrapConfig struct {
	NodeName            string
	Kubeconfig          string // written when absent
	BootstrapKubeconfig string
	CertDir             string
	// Retry bounds the back-off of a bootstrap credential the API server
	// refuses (default 30 s).
	Retry time.Duration
}

// NodeClientConfig returns the rest config of the node's own rotating
// client certificate, obtained through the bootstrap credential when
// needed, and starts its certificate manager (stopped with ctx). It
// returns once a valid certificate is held, or with ctx's error; the
// sequence is doc.go's.
func NodeClientConfig(ctx context.Context, c BootstrapConfig) (*rest.Config, error) {
	if c.Retry == 0 {
		c.Retry = 30 * time.Second
	}
	if err := os.MkdirAll(c.CertDir, 0o700); err != nil {
		return nil, err
	}
	// The server and CA come from --kubeconfig when it can be loaded, from
	// the bootstrap kubeconfig otherwise.
	base, kind := loadKubeconfig(c.Kubeconfig)
	if kind == kubeconfigStatic {
		log.G(ctx).WithField("kubeconfig", c.Kubeconfig).Warn("--kubeconfig holds a valid credential that is not a certificate file: used as it is, without TLS bootstrap or rotation")
		return base, nil
	}
	fromKubeconfig := kind == kubeconfigCertFile
	var certFile, keyFile string
	if fromKubeconfig {
		certFile, keyFile = base.CertFile, base.KeyFile
	}
	fileStore, err := certmgr.NewFileStore(clientCertPrefix, c.CertDir, c.CertDir, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate store %s: %w", c.CertDir, err)
	}
	var store certmgr.FileStore = fileStore
	// The bootstrap kubeconfig names the cluster crivk joins now; it may be
	// absent while a valid certificate is held (only needed then to check
	// the certificate is this cluster's).
	boot, bootErr := loadBootstrapConfig(c.BootstrapKubeconfig)
	if bootErr != nil {
		boot = nil
	}
	if stale, err := setAsideLeftover(ctx, c, fileStore, certFile, boot, bootErr); err != nil {
		return nil, err
	} else if stale {
		store = &freshStore{FileStore: fileStore}
		base, fromKubeconfig = nil, false
	}
	if base == nil {
		if bootErr != nil {
			return nil, fmt.Errorf("--kubeconfig %s cannot be used and --bootstrap-kubeconfig %s cannot be loaded: %w", c.Kubeconfig, c.BootstrapKubeconfig, bootErr)
		}
		base = boot
	}
	server := serverOnly(base)
	nodeCfg := rest.CopyConfig(server)
	nodeCfg.CertFile, nodeCfg.KeyFile = store.CurrentPath(), store.CurrentPath()
	mgr, err := clientCertManager(ctx, c, nodeCfg, store)
	if err != nil {
		return nil, err
	}
	if !unexpired(mgr.Current()) {
		if err := checkBootstrapCredential(ctx, c); err != nil {
			return nil, err
		}
	}
	mgr.Start()
	go func() { <-ctx.Done(); mgr.Stop() }()
	if err := waitForCertificate(ctx, mgr, c.NodeName); err != nil {
		return nil, err
	}
	if !fromKubeconfig {
		if err := writeNodeKubeconfig(c.Kubeconfig, server, store.CurrentPath()); err != nil {
			return nil, err
		}
	}
	return rotatingConfig(ctx, server, mgr)
}

// clientCertManager is the certificate manager of the node's client
// certificate in store, as the kubelet's: CSRs for system:node:<name> with
// the kubelet's signer and usages, sent with the node's own certificate
// (nodeCfg) while it is valid and with the bootstrap credential once it
// has expired.
func clientCertManager(ctx context.Context, c BootstrapConfig, nodeCfg *rest.Config, store certmgr.FileStore) (certmgr.Manager, error) {
	mgr, err := certmgr.NewManager(&certmgr.Config{
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			// The node's own certificate renews itself while it is valid;
			// once expired (an API outage across its renewal), the
			// bootstrap credential asks again, as the kubelet's.
			if unexpired(current) {
				return NewCSRClientset(nodeCfg)
			}
			boot, err := loadBootstrapConfig(c.BootstrapKubeconfig)
			if err != nil {
				return nil, fmt.Errorf("no valid client certificate and --bootstrap-kubeconfig %s cannot be loaded: %w", c.BootstrapKubeconfig, err)
			}
			return NewCSRClientset(boot)
		},
		Template: &x509.CertificateRequest{Subject: pkix.Name{
			CommonName: "system:node:" + c.NodeName, Organization: []string{"system:nodes"},
		}},
		SignerName:       certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:        certmgr.DefaultKubeletClientGetUsages,
		CertificateStore: store,
		Name:             "client",
		Ctx:              &ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	return mgr, nil
}

// InClusterBootstrap is the --bootstrap-kubeconfig value that takes the
// pod's service account as the bootstrap credential (crivk run by a
// DaemonSet, charts/crivk): its token and CA, and the API server of the
// pod's environment, or $CRIVK_API_SERVER when set (a hostNetwork pod on
// a cluster without a service proxy cannot reach the kubernetes Service).
const InClusterBootstrap = "in-cluster"

// loadBootstrapConfig loads the bootstrap kubeconfig, or the in-cluster
// service account for InClusterBootstrap.
func loadBootstrapConfig(path string) (*rest.Config, error) {
	if path != InClusterBootstrap {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	cfg, err := incluster.Config()
	if err != nil {
		return nil, fmt.Errorf("--bootstrap-kubeconfig=%s: %w", InClusterBootstrap, err)
	}
	return cfg, nil
}

// unexpired reports whether c is a certificate still valid now.
func unexpired(c *tls.Certificate) bool {
	if c == nil || len(c.Certificate) == 0 {
		return false
	}
	leaf, err := leafOf(c)
	return err == nil && time.Now().Before(leaf.NotAfter)
}

// kubeconfigKind says what an existing --kubeconfig holds.
type kubeconfigKind int

const (
	kubeconfigNone     kubeconfigKind = iota // absent, unreadable or with an expired certificate
	kubeconfigCertFile                       // a valid client certificate file: rotated in place
	kubeconfigStatic                         // another valid credential: used as it is
)

// loadKubeconfig loads kubeconfig and says whether it can be used.
func loadKubeconfig(kubeconfig string) (*rest.Config, kubeconfigKind) {
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, kubeconfigNone
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, kubeconfigNone
	}
	var pair tls.Certificate
	switch {
	case cfg.CertFile != "":
		pair, err = tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	case len(cfg.CertData) > 0:
		pair, err = tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	case cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.ExecProvider != nil || cfg.AuthProvider != nil:
		return cfg, kubeconfigStatic
	default:
		return nil, kubeconfigNone
	}
	if err != nil || len(pair.Certificate) == 0 {
		return nil, kubeconfigNone
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || time.Now().After(leaf.NotAfter) {
		return nil, kubeconfigNone
	}
	if cfg.CertFile != "" {
		return cfg, kubeconfigCertFile
	}
	return cfg, kubeconfigStatic
}

// serverOnly keeps a config's server and how it is verified, without any
// credential.
func serverOnly(cfg *rest.Config) *rest.Config {
	return &rest.Config{
		Host: cfg.Host, APIPath: cfg.APIPath,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure: cfg.Insecure, ServerName: cfg.ServerName, CAFile: cfg.CAFile, CAData: cfg.CAData,
		},
	}
}

// checkBootstrapCredential makes sure the API server accepts the bootstrap
// credential before the certificate manager uses it: a missing, expired
// or unknown token, or one without the right to create CSRs, is one clear
// log line per attempt and a retry with back-off (never a crash loop).
func checkBootstrapCredential(ctx context.Context, c BootstrapConfig) error {
	backoff := time.Second
	for {
		err := func() error {
			boot, err := loadBootstrapConfig(c.BootstrapKubeconfig)
			if err != nil {
				return fmt.Errorf("no valid client certificate in %s and --bootstrap-kubeconfig cannot be loaded: %w", c.CertDir, err)
			}
			cs, err := certsv1client.NewForConfig(boot)
			if err != nil {
				return err
			}
			_, err = cs.CertificateSigningRequests().List(ctx, metav1.ListOptions{Limit: 1})
			switch {
			case apierrors.IsUnauthorized(err):
				return fmt.Errorf("the API server rejects the bootstrap credential of %s (expired or unknown token): %w", c.BootstrapKubeconfig, err)
			case apierrors.IsForbidden(err):
				return fmt.Errorf("the bootstrap credential of %s may not read CertificateSigningRequests (bind it to the system:node-bootstrapper ClusterRole): %w", c.BootstrapKubeconfig, err)
			}
			return err
		}()
		if err == nil {
			return nil
		}
		log.G(ctx).WithError(err).WithField("retry", backoff).Error("TLS bootstrap: cannot request the node's client certificate")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.Retry)
	}
}

// waitForCertificate waits until the manager holds a valid certificate
// (the CSR approved and signed), logging every 10 s while it waits.
func waitForCertificate(ctx context.Context, mgr certmgr.Manager, node string) error {
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	next := 10 * time.Second
	// A certificate left from before may have expired (crivk was down
	// across its renewal): the manager asks for a new one at once.
	for !unexpired(mgr.Current()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if waited := time.Since(start); waited > next {
			log.G(ctx).WithField("waited", waited.Round(time.Second)).Warnf("TLS bootstrap: waiting for the CertificateSigningRequest of system:node:%s to be approved and signed", node)
			next += 10 * time.Second
		}
	}
	if leaf, err := leafOf(mgr.Current()); err == nil {
		log.G(ctx).WithField("subject", leaf.Subject.String()).WithField("notAfter", leaf.NotAfter.UTC().Format(time.RFC3339)).Info("node client certificate ready")
	}
	return nil
}

// writeNodeKubeconfig writes a kubeconfig (0600) for the node's client
// certificate file, which the certificate manager keeps current.
func writeNodeKubeconfig(path string, server *rest.Config, certFile string) error {
	caData := server.CAData
	if len(caData) == 0 && server.CAFile != "" {
		b, err := os.ReadFile(server.CAFile)
		if err != nil {
			return err
		}
		caData = b
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: server.Host, CertificateAuthorityData: caData, InsecureSkipTLSVerify: server.Insecure, TLSServerName: server.ServerName}
	kc.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: certFile}
	kc.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth"}
	kc.CurrentContext = "default-context"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing --kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
