// Package certificate owns the node's certificates: the client certificate
// crivk talks to the API server with (TLS bootstrap and rotation), and the
// serving certificate of its node API (from the cluster, or self-signed).
// It is the kubelet's pkg/kubelet/certificate and its bootstrap package,
// written over client-go's certificate manager
// (k8s.io/client-go/util/certificate, imported here as certmgr).
//
// # Who calls what
//
// cmd/crivk calls, once, at start:
//
//  1. NodeClientConfig(ctx, BootstrapConfig{...}) with --bootstrap-kubeconfig
//     (without it main loads --kubeconfig itself): the rest config of every
//     API client. Blocks until the node holds a valid client certificate.
//  2. NewCSRClientset(cfg): the certificates-only clientset that the serving
//     certificate manager requests with (main builds it on the pods client's
//     limits).
//  3. For the node API's TLS options, one of
//     ServingCertManager + WithCertificateManager (--rotate-server-certificates),
//     or EnsureServingCert + WithKeyPair (--tls-cert-file, or self-signed);
//     with --client-ca-file, LoadCAPool + WithClientCA.
//
// Everything after that runs in goroutines this package starts, stopped by
// the ctx given to NodeClientConfig and ServingCertManager.
//
// # The client certificate: bootstrap and rotation
//
// As the kubelet's --bootstrap-kubeconfig with --rotate-certificates:
//
//	NodeClientConfig
//	  --kubeconfig holds another valid credential (a token, inline data)
//	      ──> used as it is: no bootstrap, no rotation (a warning says so)
//	  the certificate left under <root-dir>/pki, or named by --kubeconfig,
//	  valid and this node's ──> used; server and CA from --kubeconfig
//	  none, or expired
//	      ──> checkBootstrapCredential: the bootstrap credential (a token,
//	          or the pod's service account for --bootstrap-kubeconfig=
//	          in-cluster) may list CSRs? else one error line and a retry
//	          with back-off up to BootstrapConfig.Retry, never an exit
//	      ──> the manager creates a CSR for CN=system:node:<node-name>,
//	          O=system:nodes, signer kubernetes.io/kube-apiserver-client-kubelet;
//	          the controller-manager approves and signs it
//	      ──> key and certificate written (0600) to
//	          <root-dir>/pki/crivk-client-current.pem; --kubeconfig written
//	          (0600) to point at that file, with the bootstrap server and CA
//	  waitForCertificate (a line every 10 s while the CSR waits)
//	  rotatingConfig ──> the returned config
//
//	afterwards (certmgr goroutine):
//	  at 70-90 % of the certificate's life, a new CSR with the node's own
//	  credential (auto-approved for system:nodes as selfnodeclient); an
//	  expired certificate (an API outage across its renewal) asks with the
//	  bootstrap credential again, as the kubelet's
//	closeOnRotation (this package's goroutine):
//	  every API connection presents the manager's current certificate; when
//	  it changes, all connections are closed so that they reconnect with it
//	  (the kubelet's updateTransport)
//
// # The serving certificate
//
// With --rotate-server-certificates (the kubelet's serverTLSBootstrap):
// a CSR for system:node:<node-name> in system:nodes with the signer
// kubernetes.io/kubelet-serving and the node's addresses as subject
// alternative names, made with the node's own credential (the Node
// authorizer allows it), stored as <root-dir>/pki/crivk-server-current.pem
// and renewed by certmgr. Approving it is the cluster's decision (the
// controller-manager does not approve serving certificates by itself);
// until then every handshake fails with ErrNoServingCert, the kubelet's
// "no serving certificate available for the kubelet". Without the flag,
// --tls-cert-file/--tls-private-key-file, or a self-signed pair generated
// once under <root-dir>/pki (crivk.crt, crivk.key), as the kubelet does.
// The node API asks for client certificates of --client-ca-file without
// requiring one: provider.Auth verifies them and answers 401 itself.
//
// # What it must never do
//
//   - Never exit because the bootstrap credential is refused or the CSR is
//     not approved yet: it logs and waits (a crash loop helps nobody).
//   - Never write a key or a kubeconfig readable by others than its owner
//     (0600, directory 0700).
//   - Never keep a connection open with a certificate that was rotated away.
//   - Never approve a CSR, nor request one for another node name.
//   - Never hold pod or node-status logic; it knows nothing of the engine.
package certificate
