#!/usr/bin/env bash
# The main job: installs what is missing, builds, brings up the local control
# plane and containerd, and runs crivk in the foreground as their node.
# Ctrl-C stops crivk (pods keep running in containerd), then local-down stops
# the rest: it removes the pods' containers from containerd, and keeps for
# the next `make run` the cluster's etcd data (_output/local/etcd: the pods,
# namespaces and nodes made meanwhile, whose pods crivk runs again next
# time), crivk's root dir, the certificates and the images; it says so when
# it stops. `make clean` removes them. A failed local-down makes the exit
# status 1. The tests do not share this state (hack/test.sh: LOCAL_STATE).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# MACHINES=N, N > 1: the cluster of several machines on this one (#45).
if [ "${MACHINES:-1}" != 1 ]; then
  exec "${ROOT}/hack/run-machines.sh" "$@"
fi
"${ROOT}/hack/install-deps.sh"
"${ROOT}/hack/build.sh"
# kubectl v1.37.2 for the README's quick start (the machine's may be older
# than the v1.37 skew allows, or missing).
"${ROOT}/hack/build-kube.sh" kubectl
METRICS_SERVER=${METRICS_SERVER:-1} "${ROOT}/hack/local-up.sh"
# stopped: what local-down kept for the next run.
stopped() {
  local rc=$1 etcd=${ROOT}/_output/local/etcd${LOCAL_STATE:+-${LOCAL_STATE}}
  "${ROOT}/hack/local-down.sh" || { echo "run: ERROR: local-down failed: something of the cluster may still run" >&2; rc=1; }
  echo
  echo "run: stopped. Kept for the next make run: the cluster's etcd data (${etcd#"${ROOT}/"}: every pod,"
  echo "run: namespace and node made in it; crivk runs those pods again next time), crivk's root dir"
  echo "run: (_output/local/crivk), the certificates and the images. Delete the pods first"
  echo "run: (kubectl delete pod bb) to start empty; make clean removes all of it."
  exit "${rc}"
}
trap 'stopped $?' EXIT
echo
echo "run: the cluster is up; in another shell:"
echo "  cd ${ROOT}"
echo "  export KUBECONFIG=\$PWD/_output/local/admin.kubeconfig"
echo "  _output/bin/kubectl get nodes -o wide"
echo "  _output/bin/kubectl run bb --image=registry.k8s.io/e2e-test-images/busybox:1.37.0-2 --image-pull-policy=IfNotPresent -- sh -c 'echo hello; sleep 3600'"
echo "  _output/bin/kubectl logs bb"
echo "run: starting crivk as node crivk-local (Ctrl-C to stop)"
echo
"${ROOT}/hack/run-crivk.sh" "$@" || true
