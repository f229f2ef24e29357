#!/usr/bin/env bash
# The main job: installs what is missing, builds, brings up the local control
# plane and containerd, and runs crivk in the foreground as their node.
# Ctrl-C stops crivk (pods keep running in containerd), then local-down stops
# the rest.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"${ROOT}/hack/install-deps.sh"
"${ROOT}/hack/build.sh"
# kubectl v1.35.4 for the README's quick start (the machine's may be older
# than the v1.35 skew allows, or missing).
"${ROOT}/hack/build-kube.sh" kubectl
METRICS_SERVER=${METRICS_SERVER:-1} "${ROOT}/hack/local-up.sh"
trap '"${ROOT}/hack/local-down.sh"' EXIT
echo
echo "run: the cluster is up; in another shell:"
echo "  cd ${ROOT}"
echo "  export KUBECONFIG=\$PWD/_output/local/admin.kubeconfig"
echo "  _output/bin/kubectl get nodes -o wide"
echo "  _output/bin/kubectl run bb --image=registry.k8s.io/e2e-test-images/busybox:1.37.0-1 --image-pull-policy=IfNotPresent -- sh -c 'echo hello; sleep 3600'"
echo "  _output/bin/kubectl logs bb"
echo "run: starting crivk as node crivk-local (Ctrl-C to stop)"
echo
"${ROOT}/hack/run-crivk.sh" "$@" || true
