package nodeapi

import (
	"net/http"
	"strings"
)

// readOnlyPaths are the paths of the kubelet's read-only server
// (ListenAndServeKubeletReadOnlyServer: InstallAuthNotRequiredHandlers),
// served from the node API's mux: exact paths, and prefixes ending in "/".
var readOnlyPaths = []string{
	"/pods", "/pods/",
	"/stats/",
	"/metrics", "/metrics/cadvisor", "/metrics/resource", "/metrics/probes",
}

// debugPaths are the kubelet's debugging handlers; its read-only server
// has no configuration and so answers them as disabled
// (InstallDebuggingDisabledHandlers).
var debugPaths = []string{
	"/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/",
	"/runningpods/", "/debug/pprof/", "/logs/",
}

// ReadOnly is the kubelet's read-only port (readOnlyPort,
// --read-only-port): node is the node API's mux, unwrapped (without
// Auth.Wrap), healthz the node's health checks. Without authentication it
// serves /healthz (and /healthz/<check>), /pods, /stats/ and the /metrics
// paths from node; the debugging paths answer 405 "Debug endpoints are
// disabled.", as the kubelet's, and anything else (/configz, /checkpoint)
// 404. The kubelet's read-only /healthz runs its ping, log and syncloop
// checks; crivk's runs the node's (internal/healthz: apiserver, runtime,
// syncloop).
func ReadOnly(node, healthz http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", healthz)
	mux.Handle("/healthz/", healthz)
	for _, p := range readOnlyPaths {
		mux.Handle(p, node)
	}
	disabled := func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Debug endpoints are disabled.", http.StatusMethodNotAllowed)
	}
	for _, p := range debugPaths {
		mux.HandleFunc(p, disabled)
		mux.HandleFunc(strings.TrimSuffix(p, "/"), disabled)
	}
	return mux
}
