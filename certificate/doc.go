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
//	  valid: setAsideLeftover (below)
//	      this node's and this cluster's ──> used; server and CA from
//	          --kubeconfig (from the bootstrap kubeconfig if it has none)
//	      another node's or another cluster's ──> one warning naming it,
//	          then as if none (with no bootstrap credential: an error
//	          naming the conflict)
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
// # A root dir left by another node or cluster
//
// <root-dir> outlives crivk: a chart reinstalled with another nodeName, or
// on a machine whose root dir holds another cluster's files, finds a
// certificate and a kubeconfig that are valid but not its own. Used as
// they are, the node would talk as another node (NodeRestriction refuses
// it the Node it registers), or to the other cluster's API server, or be
// refused by this one. Before the certificate manager starts,
// setAsideLeftover judges the certificate the store would start with
// (checkLeftover, a table test in leftover_test.go):
//
//  1. Its subject is not CN=system:node:<node-name>: another node's. A
//     rotation would not repair it: client-go's manager would renew at once
//     (the name no longer matches its template) but with the old node's
//     own credential, and nodes may only have CSRs for themselves approved
//     (selfnodeclient); meanwhile every request would be the old node's.
//  2. The current API server, the bootstrap kubeconfig's, verified with
//     that kubeconfig's CA, answers 401 to a GET /version that presents
//     the certificate: another cluster's. The API server authenticates
//     every request before authorizing it and answers 401 to a client
//     certificate it cannot verify, even where anonymous requests are
//     allowed. Comparing CA files instead would be wrong both ways: the CA
//     that verifies the API server need not be the one that signs kubelet
//     client certificates (--cluster-signing-*), and two kubeconfigs may
//     name one cluster through different addresses or CA bundles. The API
//     server is the one authority on whether it accepts the certificate.
//     When it cannot be asked (no bootstrap kubeconfig, unreachable, a
//     5xx, at most probeTimeout), the certificate is kept as before, with a
//     warning when the request failed.
//
// A stale certificate is set aside, never deleted: the store hides it
// (freshStore) until the new pair is stored, the bootstrap credential
// requests this node's certificate from this cluster, and --kubeconfig is
// written again with the bootstrap kubeconfig's server and CA. The files
// of the old one stay in <root-dir>/pki as evidence.
// TestNodeClientConfigStartsAfresh runs both cases, and the node's own
// certificate kept without a CSR, against a fake API server;
// TestNodeClientConfigStaleWithoutBootstrap the error that names the
// conflict when no bootstrap credential can replace it.
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
// requiring one: nodeapi.Auth verifies them and answers 401 itself.
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
