// Command etcd is etcd v3.7.0's own server, built from the module proxy
// (go.etcd.io/etcd/server/v3, the version k8s.io/kubernetes v1.37.2
// requires in this module's go.mod), for the local cluster's
// LOCAL_ETCD=built (hack/local-up.sh; hack/build-kube.sh etcd builds it
// into _output/bin/etcd).
//
// Why not Debian's etcd-server: it is 3.4.23, older than the 3.4.31 the
// API server needs for watch progress requests (RequestWatchProgress).
// Without them a watch cache whose resource sees no writes lags etcd's
// revision, and the API server ends a watch that asks for a newer
// resourceVersion with "Too large resource version"; the node e2e suite's
// MirrorPod "when kubelet restarts" spec then waits forever
// (docs/environment.md, docs/conformance.md).
//
// It adds nothing: etcdmain.Main is the entry point of upstream's etcd
// binary (server/v3's own main.go). A main package of this module imports
// it so that go mod tidy keeps in go.mod and go.sum what building it needs
// (etcdmain's imports beyond what k8s.io/kubernetes uses of etcd, such as
// go-grpc-middleware v1 and groupcache). Flags, environment variables
// (ETCD_*) and the gateway and grpc-proxy subcommands are etcd's. The
// version it reports (etcd --version, /version) is the one compiled into
// go.etcd.io/etcd/api/v3/version; the git SHA is "Not provided", as for any
// etcd built with go build.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
