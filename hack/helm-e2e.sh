#!/usr/bin/env bash
# The Helm end-to-end test (issues #19, #32, #34; docs/coexistence.md):
#
#   1. removes what an earlier run left on the host, and says what: a
#      kubelet of run-kubelet.sh, the chart's runtime (any containerd on its
#      socket, hack/crivk-runtime.sh stop: shims, runc containers, mounts,
#      bridge crivk1), the chart's root dir /var/lib/crivk and pod log dir;
#   2. makes the release (hack/release.sh: _output/release/, checked against
#      its SHA256SUMS), or, where the script does not exist yet, falls back
#      to charts/crivk and hack/image-crivk.sh's image, saying so;
#   3. brings up the local control plane (hack/local-up.sh) with the real
#      kubelet v1.37.2 as node NODE_NAME on the cluster's containerd, into
#      which the release's image tarball is imported (also tagged
#      e2e-upgrade);
#   4. runs `go test ./test/helm` (its tests remove the cluster's
#      left-overs first: release, nodes, pods), which installs the
#      packaged chart; the DaemonSet pod starts crivk's own containerd
#      (runtime.managed) with the paths, bridge and subnet of
#      hack/crivk-runtime.sh, and crivk reads the chart's configuration
#      file (its ConfigMap, --config): the tests read the running crivk's
#      /configz through the node proxy for a config: value they set;
#   5. on failure, names the evidence each failed test left in
#      _output/test-logs/helm/<test>/ (collected before any clean-up; a go
#      test that died without collecting gets _output/test-logs/helm/script/);
#   6. stops everything it started; a step of it that fails (the
#      release's uninstall, the kubelet or crivk's runtime still running,
#      local-down) fails the tier, named, its output in cleanup.log.
#
# Logs: _output/test-logs/helm/{setup,release,local-up,kubelet,go-test,
# cleanup}.log. Output ends with go test's summary (and the evidence lines).
# Usage: hack/helm-e2e.sh   (make test-helm; root)
# Environment: HELM_E2E_RUN=regexp limits the tests to those go test -run
# selects; HELM_E2E_SET=k=v[,k=v] adds chart values over the test's (to
# force a failure: HELM_E2E_SET=apiServer=https://192.0.2.1:6443).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSION=${VERSION:-v1.37.2-crivk.0}
LOG_PREFIX=helm-e2e
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"
# shellcheck source=hack/lib/evidence.sh
source "${ROOT}/hack/lib/evidence.sh"
LOGS=${ROOT}/_output/test-logs/helm
# An earlier run's evidence would be taken for this run's.
rm -rf "${LOGS}"
mkdir -p "${LOGS}"
cd "${ROOT}"

# The chart's root dir gets Bidirectional mount propagation: its host path
# must be a shared mount (systemd makes / shared; this machine's is not).
CRIVK_ROOT=/var/lib/crivk
CRIVK_POD_LOGS=/var/log/crivk-pods
# The chart runtime's socket and bridge (hack/crivk-runtime.sh's): fixed
# paths, whichever checkout ran it.
RUNTIME_SOCK=/run/crivk-b/containerd.sock
RUNTIME_BRIDGE=crivk1

# ---------------------------------------------------------- clean start

# config_of PID: the --config argument of a containerd's command line.
config_of() {
  local prev='' arg
  while IFS= read -r -d '' arg; do
    if [ "${prev}" = --config ]; then echo "${arg}"; return 0; fi
    case "${arg}" in --config=*) echo "${arg#--config=}"; return 0 ;; esac
    prev=${arg}
  done <"/proc/$1/cmdline" 2>/dev/null
  return 0
}

# leftover_kubelets: kubelets of hack/run-kubelet.sh (any checkout).
leftover_kubelets() {
  local f p
  for f in /proc/[0-9]*/cmdline; do
    p=${f#/proc/}
    p=${p%/cmdline}
    [ "${p}" != $$ ] || continue
    case "$(tr '\0' ' ' <"${f}" 2>/dev/null)" in
      *kubelet\ *--config=*/_output/local/kubelet/config.yaml*) echo "${p}" ;;
    esac
  done
  return 0
}

# leftover_runtimes: containerds (of either lane) whose config serves the
# chart runtime's socket (an earlier run's, of any checkout).
leftover_runtimes() {
  local p cfg bin
  while IFS= read -r bin; do
    [ -n "${bin}" ] || continue
    for p in $(pids_running "${bin}"); do
      cfg=$(config_of "${p}")
      [ -n "${cfg}" ] && grep -qF "address = \"${RUNTIME_SOCK}\"" "${cfg}" 2>/dev/null && echo "${p}"
    done
  done < <(component_bins containerd)
  return 0
}

# clean_start: removes the host's left-overs of an earlier run, one line
# each; the cluster's (release, nodes, pods) are the go test's (cleanStart).
clean_start() {
  local pids n=0 out
  pids=$(leftover_kubelets)
  if [ -n "${pids}" ]; then
    # shellcheck disable=SC2086 # word splitting intended
    stop_pids "left-over kubelet" ${pids} >>"${LOGS}/cleanup.log" 2>&1
    log "clean start: removed a left-over kubelet of hack/run-kubelet.sh (pid ${pids//$'\n'/ })"
    n=$((n + 1))
  fi
  pids=$(leftover_runtimes)
  if [ -n "${pids}" ]; then
    # shellcheck disable=SC2086
    stop_pids "left-over chart runtime" ${pids} >>"${LOGS}/cleanup.log" 2>&1
    log "clean start: removed a left-over chart runtime: containerd on ${RUNTIME_SOCK} (pid ${pids//$'\n'/ })"
    n=$((n + 1))
  fi
  local bridge=false
  ! ip link show "${RUNTIME_BRIDGE}" >/dev/null 2>&1 || bridge=true
  if ! out=$(hack/crivk-runtime.sh stop 2>&1); then
    echo "${out}" >>"${LOGS}/cleanup.log"
    log "ERROR: cleaning up the chart runtime's left-overs failed (hack/crivk-runtime.sh stop):"
    echo "${out}" | tail -n 20
    return 1
  fi
  echo "${out}" >>"${LOGS}/cleanup.log"
  # What crivk-runtime.sh stop found (shims, runc containers, mounts, iptables rules).
  while IFS= read -r line; do
    case "${line}" in
      *"stopping "* | *"removed "* | *unmounted*) log "clean start: ${line#crivk-runtime: }"; n=$((n + 1)) ;;
    esac
  done <<<"${out}"
  if [ "${bridge}" = true ]; then
    log "clean start: removed the left-over bridge ${RUNTIME_BRIDGE}"
    n=$((n + 1))
  fi
  if [ -d "${CRIVK_ROOT}" ]; then
    local what
    what=$(find "${CRIVK_ROOT}" -mindepth 1 -maxdepth 2 -printf '%P ' 2>/dev/null | head -c 300)
    if mountpoint -q "${CRIVK_ROOT}"; then umount -R "${CRIVK_ROOT}" || umount -R -l "${CRIVK_ROOT}"; fi
    rm -rf "${CRIVK_ROOT}"
    if [ -n "${what}" ]; then
      log "clean start: removed the left-over root dir ${CRIVK_ROOT} (${what% })"
      n=$((n + 1))
    fi
  fi
  if [ -d "${CRIVK_POD_LOGS}" ]; then
    rm -rf "${CRIVK_POD_LOGS}"
    log "clean start: removed the left-over pod log dir ${CRIVK_POD_LOGS}"
    n=$((n + 1))
  fi
  [ "${n}" -gt 0 ] || log "clean start: nothing left on the host by an earlier run"
}

kubelet_pid=
# cleanup stops everything the tier started, in cleanup.log; each step that
# fails (the release's uninstall, a kubelet or a chart runtime still
# running afterwards, local-down) is named on the output and in
# cleanup.log, and makes it return 1: a clean-up that fails fails the tier
# (what it left is what the next run would find). The release is
# uninstalled only when it exists (the tests uninstall their own).
cleanup() {
  set +o errexit
  local failed=() pids
  {
    if [ -x _output/bin/helm ] && [ -n "${KUBECONFIG:-}" ] &&
      _output/bin/helm status crivk --namespace crivk-system >/dev/null 2>&1; then
      _output/bin/helm uninstall crivk --namespace crivk-system --wait --timeout 5m ||
        failed+=("helm uninstall crivk --wait")
    fi
    if [ -n "${kubelet_pid}" ]; then
      kill -TERM "${kubelet_pid}" 2>/dev/null
      for _ in $(seq 1 100); do kill -0 "${kubelet_pid}" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "${kubelet_pid}" 2>/dev/null
      wait "${kubelet_pid}" 2>/dev/null
    fi
    pids=$(leftover_kubelets)
    [ -z "${pids}" ] || failed+=("the kubelet still runs (pid ${pids//$'\n'/ })")
    hack/crivk-runtime.sh stop || failed+=("hack/crivk-runtime.sh stop")
    pids=$(leftover_runtimes)
    [ -z "${pids}" ] || failed+=("crivk's runtime (containerd on ${RUNTIME_SOCK}) still runs (pid ${pids//$'\n'/ })")
    if mountpoint -q "${CRIVK_ROOT}"; then umount -R "${CRIVK_ROOT}" || umount -R -l "${CRIVK_ROOT}"; fi
    rm -rf "${CRIVK_ROOT}" "${CRIVK_POD_LOGS}" || failed+=("removing ${CRIVK_ROOT} ${CRIVK_POD_LOGS}")
    hack/local-down.sh || failed+=("hack/local-down.sh")
    local f
    for f in "${failed[@]}"; do echo "${LOG_PREFIX}: CLEAN-UP FAILED: ${f}"; done
  } >>"${LOGS}/cleanup.log" 2>&1
  [ ${#failed[@]} -gt 0 ] || return 0
  for f in "${failed[@]}"; do log "ERROR: clean-up failed: ${f} (see ${LOGS#"${ROOT}/"}/cleanup.log)"; done
  return 1
}
# However the script ends, a failed clean-up fails it.
trap 'rc=$?; cleanup || rc=1; exit "${rc}"' EXIT

log "clean start (log: ${LOGS#"${ROOT}/"}/cleanup.log)"
clean_start

log "installing dependencies and building (log: ${LOGS#"${ROOT}/"}/setup.log)"
if ! { hack/install-deps.sh && hack/build.sh && hack/build-kube.sh kubelet helm; } >"${LOGS}/setup.log" 2>&1; then
  tail -n 30 "${LOGS}/setup.log"; exit 1
fi

# ---------------------------------------------------------- the release

RELEASE=${ROOT}/_output/release
if [ -f hack/release.sh ]; then
  log "making the release ${VERSION} (hack/release.sh; log: ${LOGS#"${ROOT}/"}/release.log)"
  if ! VERSION=${VERSION} bash hack/release.sh >"${LOGS}/release.log" 2>&1; then
    tail -n 30 "${LOGS}/release.log"; exit 1
  fi
  if ! (cd "${RELEASE}" && sha256sum --quiet -c SHA256SUMS) >>"${LOGS}/release.log" 2>&1; then
    log "ERROR: ${RELEASE}/SHA256SUMS does not match the artifacts:"; tail -n 10 "${LOGS}/release.log"; exit 1
  fi
  # The newest packaged chart (an earlier release's may be beside it).
  CHART=$(ls -t "${RELEASE}"/crivk-*.tgz 2>/dev/null | head -n 1)
  [ -n "${CHART}" ] || { log "ERROR: the release has no packaged chart ${RELEASE}/crivk-*.tgz"; exit 1; }
  [ "$(ls "${RELEASE}"/crivk-*.tgz | wc -l)" -eq 1 ] || log "several packaged charts in ${RELEASE}: the newest, $(basename "${CHART}")"
  IMAGE_TAR=${RELEASE}/crivk-image-${VERSION}.oci.tar
  DIGEST_FILE=${RELEASE}/crivk-image-${VERSION}.digest
  [ -f "${IMAGE_TAR}" ] || { log "ERROR: the release has no image tarball ${IMAGE_TAR}"; exit 1; }
  if [ -f "${DIGEST_FILE}" ]; then
    digest=$(tr -d ' \n' <"${DIGEST_FILE}")
    if ! { tar -tf "${IMAGE_TAR}" | grep -qF "blobs/sha256/${digest#sha256:}" ||
      tar -xOf "${IMAGE_TAR}" index.json | grep -qF "${digest}"; }; then
      log "ERROR: ${DIGEST_FILE} says ${digest}, which the image tarball ${IMAGE_TAR} does not hold"; exit 1
    fi
  fi
  log "release: chart ${CHART#"${ROOT}/"}, image ${IMAGE_TAR#"${ROOT}/"}${digest:+ (${digest})}, SHA256SUMS verified"
else
  CHART=${ROOT}/charts/crivk
  IMAGE_TAR=${ROOT}/_output/images/crivk.tar
  log "FALLBACK: hack/release.sh does not exist in this checkout: installing the SOURCE chart charts/crivk and hack/image-crivk.sh's image, not a release's artifacts"
  IMAGE=docker.io/library/crivk VERSION=${VERSION} hack/image-crivk.sh >>"${LOGS}/setup.log" 2>&1 ||
    { tail -n 30 "${LOGS}/setup.log"; exit 1; }
fi

# ---------------------------------------------------------- the cluster

log "bringing up the local cluster (log: ${LOGS#"${ROOT}/"}/local-up.log)"
if ! hack/local-up.sh >"${LOGS}/local-up.log" 2>&1; then
  tail -n 30 "${LOGS}/local-up.log"; exit 1
fi
# shellcheck source=/dev/null
source _output/local/env
mkdir -p "${CRIVK_ROOT}"
mountpoint -q "${CRIVK_ROOT}" || mount --bind "${CRIVK_ROOT}" "${CRIVK_ROOT}"
mount --make-rshared "${CRIVK_ROOT}"

# The image's name is the tarball's (the io.containerd.image.name of its
# index.json), which the import gives it: read from the tarball, since
# what ctr prints differs between containerd 1.6 ("unpacking NAME
# (DIGEST)...") and 2.x (a progress table), then checked in the runtime.
if ! out=$(ctr --address "${CONTAINERD_ADDRESS}" -n k8s.io images import --no-unpack=false "${IMAGE_TAR}" 2>&1); then
  log "ERROR: importing ${IMAGE_TAR}: ${out}"; exit 1
fi
echo "${out}" >>"${LOGS}/local-up.log"
IMAGE_NAME=$(tar -xOf "${IMAGE_TAR}" index.json | sed -n 's/.*"io\.containerd\.image\.name":"\([^"]*\)".*/\1/p')
[ -n "${IMAGE_NAME}" ] || { log "ERROR: ${IMAGE_TAR}'s index.json names no image (io.containerd.image.name)"; exit 1; }
ctr --address "${CONTAINERD_ADDRESS}" -n k8s.io images ls -q "name==${IMAGE_NAME}" | grep -qxF "${IMAGE_NAME}" ||
  { log "ERROR: ${IMAGE_NAME} is not in the runtime after importing ${IMAGE_TAR} (ctr import: ${out})"; exit 1; }
ctr --address "${CONTAINERD_ADDRESS}" -n k8s.io images tag --force "${IMAGE_NAME}" "${IMAGE_NAME%:*}:e2e-upgrade" >/dev/null
log "imported ${IMAGE_NAME} (and ${IMAGE_NAME%:*}:e2e-upgrade) into the kubelet's containerd"

log "starting the kubelet as node ${NODE_NAME} (log: ${LOGS#"${ROOT}/"}/kubelet.log)"
hack/run-kubelet.sh >"${LOGS}/kubelet.log" 2>&1 &
kubelet_pid=$!

# ---------------------------------------------------------- the tests

log "go test ./test/helm (log: ${LOGS#"${ROOT}/"}/go-test.log; skips checked against hack/allowed-skips.txt)"
# go test -json through hack/tools/cmd/skipcheck, as hack/test.sh's tiers:
# printed as go test -v prints, and a skip not on the list fails.
SKIPCHECK=${ROOT}/_output/bin/skipcheck
if ! (cd "${ROOT}/hack/tools" && go build -o "${SKIPCHECK}" ./cmd/skipcheck) >"${LOGS}/skipcheck-build.log" 2>&1; then
  cat "${LOGS}/skipcheck-build.log"
  log "ERROR: building hack/tools/cmd/skipcheck failed"; exit 1
fi
rc=0
CRIVK_HELM_E2E=1 VERSION=${VERSION} CRIVK_HELM_CHART=${CHART} CRIVK_IMAGE=${IMAGE_NAME} \
  CRIVK_RUNTIME_SOCK=${RUNTIME_SOCK} CRIVK_RUNTIME_DIR=${ROOT}/_output/runtime-b \
  KUBELET_POD_LOG_DIR=${LOCAL_DIR}/pods HELM_KUBELET_LOG=${LOGS}/kubelet.log \
  go test -json -count=1 -timeout 20m -v -run "${HELM_E2E_RUN:-.}" ./test/helm/ 2>&1 |
  "${SKIPCHECK}" -v -allowed hack/allowed-skips.txt -log "${LOGS}/go-test.log" || rc=$?

if [ "${rc}" -ne 0 ]; then
  if [ -z "$(evidence_dirs "${LOGS}")" ]; then
    # The go test died before its tests collected (a panic, its timeout):
    # what the cluster and host show now.
    log "go test left no evidence: collecting the cluster's into ${LOGS#"${ROOT}/"}/script/"
    dump_evidence "${LOGS}/script" -kubeconfig "${KUBECONFIG}" -node "crivk-${NODE_NAME}" -node "${NODE_NAME}" \
      -pods crivk-system -pods helm-e2e -copy runtime/containerd.log="${ROOT}/_output/runtime-b/containerd.log" \
      -copy kubelet.log="${LOGS}/kubelet.log" -note "go test ./test/helm exited ${rc} without collecting evidence"
  fi
  print_evidence "${LOG_PREFIX}" helm
  log "the tier's own logs: ${LOGS#"${ROOT}/"}/{setup,local-up,kubelet,go-test,cleanup}.log"
fi
trap - EXIT
cleanup || rc=1
exit "${rc}"
