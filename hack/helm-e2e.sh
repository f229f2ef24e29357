#!/usr/bin/env bash
# The Helm end-to-end test (issue #19, docs/coexistence.md): the local
# control plane (hack/local-up.sh) with the real kubelet v1.35.4 as node
# NODE_NAME on the cluster's containerd, the crivk image
# imported into the kubelet's containerd (hack/image-crivk.sh, under its
# version and the tag e2e-upgrade), then `go test ./test/helm`: helm install
# / upgrade / uninstall / install of charts/crivk, whose DaemonSet pod
# starts crivk's own containerd (runtime.managed) with the paths, bridge and
# subnet of hack/crivk-runtime.sh, whose stop cleans it up if the test left
# it. Everything started is stopped at the end. Output ends with go test's summary.
# Usage: hack/helm-e2e.sh   (make test-helm; root)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSION=${VERSION:-v1.35.4-crivk.0}
LOGS=${ROOT}/_output/test-logs
mkdir -p "${LOGS}"
cd "${ROOT}"
log() { echo "helm-e2e: $*"; }

# The chart's root dir gets Bidirectional mount propagation: its host path
# must be a shared mount (systemd makes / shared; this machine's is not).
CRIVK_ROOT=/var/lib/crivk
kubelet_pid=
cleanup() {
  set +o errexit
  [ -x _output/bin/helm ] && _output/bin/helm uninstall crivk --namespace crivk-system --wait >/dev/null 2>&1
  if [ -n "${kubelet_pid}" ]; then
    kill -TERM "${kubelet_pid}" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "${kubelet_pid}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${kubelet_pid}" 2>/dev/null
    wait "${kubelet_pid}" 2>/dev/null
  fi
  hack/crivk-runtime.sh stop >"${LOGS}/crivk-runtime-stop.log" 2>&1 || log "stopping crivk's runtime failed, see ${LOGS}/crivk-runtime-stop.log"
  if mountpoint -q "${CRIVK_ROOT}"; then umount -R "${CRIVK_ROOT}" || umount -R -l "${CRIVK_ROOT}"; fi
  rm -rf "${CRIVK_ROOT}" /var/log/crivk-pods
  hack/local-down.sh >"${LOGS}/local-down.log" 2>&1 || log "local-down failed, see ${LOGS}/local-down.log"
}
trap cleanup EXIT

log "installing dependencies and building (log: ${LOGS}/helm-setup.log)"
if ! { hack/install-deps.sh && hack/build.sh && hack/build-kube.sh kubelet helm; } >"${LOGS}/helm-setup.log" 2>&1; then
  tail -n 30 "${LOGS}/helm-setup.log"; exit 1
fi
log "bringing up the local cluster (log: ${LOGS}/helm-local-up.log)"
if ! hack/local-up.sh >"${LOGS}/helm-local-up.log" 2>&1; then
  tail -n 30 "${LOGS}/helm-local-up.log"; exit 1
fi
# shellcheck source=/dev/null
source _output/local/env
mkdir -p "${CRIVK_ROOT}"
mountpoint -q "${CRIVK_ROOT}" || mount --bind "${CRIVK_ROOT}" "${CRIVK_ROOT}"
mount --make-rshared "${CRIVK_ROOT}"
IMAGE=docker.io/library/crivk VERSION=${VERSION} hack/image-crivk.sh "${CONTAINERD_ADDRESS}" >>"${LOGS}/helm-local-up.log" 2>&1
ctr --address "${CONTAINERD_ADDRESS}" -n k8s.io images tag --force "docker.io/library/crivk:${VERSION}" docker.io/library/crivk:e2e-upgrade >/dev/null

log "starting the kubelet as node ${NODE_NAME} (log: ${LOGS}/helm-kubelet.log)"
hack/run-kubelet.sh >"${LOGS}/helm-kubelet.log" 2>&1 &
kubelet_pid=$!

log "go test ./test/helm"
rc=0
CRIVK_HELM_E2E=1 VERSION=${VERSION} CRIVK_RUNTIME_SOCK=/run/crivk-b/containerd.sock \
  CRIVK_RUNTIME_DIR=${ROOT}/_output/runtime-b \
  go test -count=1 -timeout 20m -v ./test/helm/ 2>&1 | tee "${LOGS}/helm-e2e.log" || rc=$?
cleanup >/dev/null 2>&1
trap - EXIT
exit "${rc}"
