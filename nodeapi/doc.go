// Package nodeapi is the node's HTTPS API (port 10250), the kubelet's
// pkg/kubelet/server: what the API server's node proxy, `kubectl logs`,
// `exec`, `attach`, `port-forward`, metrics-server and cluster tools ask
// of a node. It answers with the kubelet's paths, query parameters, status
// codes and messages, so that a client cannot tell crivk from a kubelet.
//
// # Routes
//
// New returns the handler of these routes (a request's path is matched as
// net/http.ServeMux patterns):
//
//	GET       /containerLogs/{namespace}/{pod}/{container}   logs.go: the container's CRI log file with
//	                                                          the kubelet's options (400 undecodable,
//	                                                          422 invalid, 404 unknown pod or container)
//	GET       /pods, /pods/                                   the API's pods bound to this node (the
//	                                                          informer's view, Config.APIPods)
//	GET       /runningpods/                                   the engine's pods with the status it last
//	                                                          generated (Config.Engine)
//	GET       /healthz                                        "ok"
//	GET, POST /exec/{namespace}/{pod}[/{uid}]/{container}     streaming.go: the runtime's stream URL
//	GET, POST /attach/{namespace}/{pod}[/{uid}]/{container}   proxied (400, 404, 429, 500 as the
//	GET, POST /portForward/{namespace}/{pod}[/{uid}]          kubelet; docs/streaming.md)
//	POST      /run/{namespace}/{pod}[/{uid}]/{container}
//	GET       /stats/summary                                  package stats: the kubelet's Summary
//	GET       /metrics/resource                               package stats: the resource metrics
//	GET       /metrics/cadvisor                               package stats: the cAdvisor container
//	                                                          metrics (501 without pod cgroups)
//	          /stats/... (any other)                          501 Not Implemented
//	          anything else                                   404
//
// Two more paths are on the same mux (Config.ProbeMetrics and
// Config.Metrics): /metrics/probes (ProbeMetrics.Handler, the prober's
// prober_probe_total) and /metrics (the agent's kubelet-named metrics).
// Every request but their scrapes is logged at debug level with its
// answer's code.
//
// # The read-only port
//
// ReadOnly (readonly.go) is the kubelet's read-only server
// (readOnlyPort, --read-only-port): the same mux, without Auth.Wrap, over
// plain HTTP (ServeReadOnly), limited to /healthz, /pods, /stats/ and the
// /metrics paths; the debugging paths answer 405 "Debug endpoints are
// disabled.", everything else 404. It is off unless the port is set.
//
// # Authentication and authorisation
//
// Auth (auth.go) is the kubelet's filter without k8s.io/apiserver: a
// client certificate verified against the client CA, then a bearer token
// checked with a TokenReview, then anonymous only when allowed; 401 when
// none authenticates. The user is then authorised with a
// SubjectAccessReview of nodes/<subresource> named after this node, the
// fine-grained subresource first (pods, healthz, stats, metrics, log) and
// then nodes/proxy, as the kubelet v1.35; 403 names the attributes, never
// pod data. Decisions are cached with the kubelet's webhook TTLs. New does
// not wrap its handler: the caller puts Auth.Wrap in front of the whole mux
// (including /metrics and /metrics/probes), as the kubelet's filter sits in
// front of all its paths.
//
// # What the caller does
//
//  1. NewAuth(AuthConfig) with the client CA, the TokenReview and
//     SubjectAccessReview clients and the node's name.
//  2. New(Config) with the engine's pods, the API's pods and the runtime's
//     calls, each a small interface declared here or in package stats.
//  3. Serve the handler, the whole node API, with ServeTLS (listen.go:
//     behind Auth.Wrap, over TLS with the serving certificate and the
//     client CA), and without Auth on the read-only port (ReadOnly,
//     ServeReadOnly). Both servers are this package's: each binds its
//     port before it returns and serves until the context ends.
//
// # What it must never do
//
//   - Never decide a pod's status. /runningpods/ shows the status the engine
//     generated; logs and streams read the runtime's state of a pod only to
//     find a container's log file, its running instance or its ready sandbox.
//   - Never start, stop, restart or remove a container or a sandbox: exec,
//     attach and portForward ask the runtime for a stream and proxy it, /run
//     runs a command in a container that already runs. The pod's lifecycle
//     is the engine's (package lifecycle).
//   - Never write to the API server: its only calls there are the
//     TokenReviews and SubjectAccessReviews of the filter.
//   - Never terminate a stream protocol: stdin, tty, resize and the exit
//     status pass between the client and the runtime's stream server
//     untouched (k8s.io/apimachinery's UpgradeAwareHandler).
//   - Never serve a request the filter did not authorise (the caller's
//     duty, step 3 above), but on the read-only port the operator turned
//     on, and there only its read-only paths (ReadOnly), as the kubelet.
//   - Never import package provider (virtual-kubelet's pod interface) or
//     virtual-kubelet's node/api: crivk serves its own node API, so the
//     provider needs no GetContainerLogs or RunInContainer, and node/api's
//     k8s.io/apiserver HTTP stack stays out of the binary.
package nodeapi
