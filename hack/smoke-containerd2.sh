#!/usr/bin/env bash
# A smoke test of containerd 2 with crivk's config, without a cluster (#44
# item 3): the containerd, runc and CNI plugins of hack/build-runtime.sh
# (_output/bin/runtime, first in PATH so that the shim and runc are these),
# configured by `crivk runtime render` for their version (config version 4,
# registry hosts files), run through the CRI with crictl:
#
#   config      containerd's own `config dump` reads the rendered file as
#               version 4 with crivk's values, and warns about nothing
#   echo        a pod sandbox and a busybox container that echoes and exits 0
#   userns      a pod with a user namespace (CRI userns_options mode POD,
#               container 0 -> host 65536, 65536 ids): /proc/self/uid_map
#               and gid_map inside are "0 65536 65536"
#   image       an image volume (CRI Mount.image, read-only): busybox's
#               /bin/busybox is at the mount path, which cannot be written
#   registry    the registries' hosts.toml files: Debian's docker-registry
#               on NODE_IP:5453 (TLS, a certificate of a CA of the test's
#               own), rendered as crivk_render's REGISTRY_HOST and as the
#               mirror of registry.k8s.io (REGISTRY_MIRROR); a tag pushed
#               there (hack/tools' regtool) is pulled through the CRI both
#               as registry.k8s.io/... (unreachable here: only the mirror
#               can serve it) and by its own name, at the tarball's digest
#
# and, for information, what the CRI reports that crivk's cri package reads
# (RuntimeConfig's cgroup driver, the pinned sandbox image, the runtime
# handlers' features).
#
# Everything is its own, apart from every other containerd on the machine:
# socket /run/crivk-c2/containerd.sock, state and runc root under
# /run/crivk-c2, root and config under _output/runtime-c2, CNI network
# crivk-c2 (bridge crivk-c2, 10.90.0.0/16; local-up's is 10.88.0.0/16,
# crivk-runtime's 10.89.0.0/16), cgroup parent /crivk-smoke-c2. At the end
# (or on failure) it removes its pods, stops its containerd, removes what it
# left (shims, mounts, network namespaces, nat rules: hack/lib/local.sh's
# cleanup_runtime), the bridge and its cgroups; the root (images) stays for
# the next run. Exits non-zero when a step failed.
#
# Usage: hack/smoke-containerd2.sh   (as root)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=smoke-containerd2
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"

RT_BIN=${ROOT}/_output/bin/runtime
export PATH=${RT_BIN}:${PATH}

# The helpers of lib/local.sh (crivk_render, cleanup_runtime, our_shims,
# our_mounts, crictl_ours) work on these.
C=${ROOT}/_output/runtime-c2
LOCAL_DIR=${C}
CONTAINERD_RUN=/run/crivk-c2
CONTAINERD_STATE=${CONTAINERD_RUN}/state
CONTAINERD_SOCK=${CONTAINERD_RUN}/containerd.sock
CRI_ENDPOINT=unix://${CONTAINERD_SOCK}
CONTAINERD_ROOT=${C}/root
CONTAINERD_CONFIG=${C}/config.toml
CONTAINERD_HOSTS_DIR=${C}/certs.d
RUNC_ROOT=${CONTAINERD_RUN}/runc
CNI_BIN_DIR=${RT_BIN}/cni
CNI_CONF_DIR=${C}/net.d
CNI_DATA_DIR=${CONTAINERD_RUN}/cni
CNI_NETWORK=crivk-c2
CNI_BRIDGE=crivk-c2
POD_CIDR=10.90.0.0/16
CRICTL_CONFIG=${C}/crictl.yaml
PIDFILE=${C}/containerd.pid
LOG=${C}/containerd.log
CGROUP_PARENT=/crivk-smoke-c2
WORK=${C}/smoke
NS=smoke-c2
# The registry step's docker-registry (port apart from local-up's 5443 and
# 5444), its CA and certificate: PKI_DIR/ca.crt is what crivk_render
# trusts.
REGISTRY_PORT_C2=5453
REG_DIR=${C}/registry
PKI_DIR=${C}/pki
REGISTRY_PIDFILE=${C}/registry.pid
MIRROR_TAG=e2e-test-images/busybox:smoke-c2

fail() {
  log "ERROR: $*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || fail "run as root (containerd, runc, CNI)"

# ------------------------------------------------------------------ set up

"${ROOT}/hack/build-runtime.sh" | sed -n 's/^build-runtime: building/&/p'
for b in containerd containerd-shim-runc-v2 ctr runc cni/bridge cni/host-local cni/loopback cni/portmap; do
  [ -x "${RT_BIN}/${b}" ] || fail "${RT_BIN}/${b} missing after hack/build-runtime.sh"
done
[ "$(readlink -f "$(command -v containerd-shim-runc-v2)")" = "${RT_BIN}/containerd-shim-runc-v2" ] || fail "the shim in PATH is not ${RT_BIN}'s"
"${ROOT}/hack/build-crictl.sh" >/dev/null

# our_containerd: the PID of a containerd with our config (this script's,
# or one a killed run left).
our_containerd() {
  local pid
  pid=$(cat "${PIDFILE}" 2>/dev/null) || return 0
  pid_alive "${pid}" || return 0
  case "$(cmdline_of "${pid}")" in *"${CONTAINERD_CONFIG}"*) echo "${pid}" ;; esac
}

# our_registry: the PID of the docker-registry with our config.
our_registry() {
  local pid
  pid=$(cat "${REGISTRY_PIDFILE}" 2>/dev/null) || return 0
  pid_alive "${pid}" || return 0
  case "$(cmdline_of "${pid}")" in *"${REG_DIR}/config.yml"*) echo "${pid}" ;; esac
}

stop_all() {
  local pid
  pid=$(our_registry)
  if [ -n "${pid}" ]; then
    stop_pids docker-registry "${pid}"
  fi
  rm -f "${REGISTRY_PIDFILE}"
  pid=$(our_containerd)
  if [ -n "${pid}" ] && [ -S "${CONTAINERD_SOCK}" ]; then
    remove_all_pods
  fi
  if [ -n "${pid}" ]; then
    stop_pids containerd "${pid}"
  fi
  rm -f "${PIDFILE}"
  cleanup_runtime || warn "cleanup left something (see above)"
  if ip link show "${CNI_BRIDGE}" >/dev/null 2>&1; then
    if ip link delete "${CNI_BRIDGE}"; then
      log "bridge ${CNI_BRIDGE} deleted"
    else
      warn "cannot delete bridge ${CNI_BRIDGE}"
    fi
  fi
  local cg
  for cg in /sys/fs/cgroup/*"${CGROUP_PARENT}" /sys/fs/cgroup"${CGROUP_PARENT}"; do
    [ -d "${cg}" ] || continue
    # Children first (runc removes a container's own on delete).
    find "${cg}" -depth -type d -exec rmdir {} \; 2>/dev/null || warn "cgroup ${cg} not removed"
  done
  if [ -z "$(our_mounts)" ]; then
    rm -rf "${CONTAINERD_RUN}"
  fi
}

stop_all # a previous run's left-overs
trap 'set +o errexit; stop_all' EXIT

mkdir -p "${C}" "${CNI_CONF_DIR}" "${CONTAINERD_RUN}" "${WORK}"
rm -rf "${WORK:?}"/* "${REG_DIR}" "${PKI_DIR}"

# The registry step's PKI, made before the config: the hosts files name the
# CA. NODE_IP: the source address of the default route (not a loopback
# address, for which containerd would skip TLS verification by itself).
NODE_IP=$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}')
case "${NODE_IP}" in "" | 127.*) fail "no routable IPv4 address for the registry step" ;; esac
REGISTRY_HOST=${NODE_IP}:${REGISTRY_PORT_C2}
REGISTRY_MIRROR=1
REGISTRY_MIRROR_HOST=${REGISTRY_HOST}
mkdir -p "${PKI_DIR}" "${REG_DIR}/data"
(
  cd "${PKI_DIR}"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=crivk-smoke-c2-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout registry.key -out registry.csr -subj /CN=crivk-smoke-c2-registry 2>/dev/null
  printf 'subjectAltName=IP:%s\n' "${NODE_IP}" >registry.ext
  openssl x509 -req -in registry.csr -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" -days 2 -sha256 \
    -extfile registry.ext -out registry.crt 2>/dev/null
)

containerd_config >"${CONTAINERD_CONFIG}"
registry_hosts
cni_conflist >"${CNI_CONF_DIR}/10-${CNI_NETWORK}.conflist"
printf 'runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 30\n' "${CRI_ENDPOINT}" "${CRI_ENDPOINT}" >"${CRICTL_CONFIG}"
log "$(containerd --version)"
log "config ${CONTAINERD_CONFIG}: $(grep -m1 '^version' "${CONTAINERD_CONFIG}")"

setsid containerd --config "${CONTAINERD_CONFIG}" >"${LOG}" 2>&1 </dev/null &
echo $! >"${PIDFILE}"
log "started containerd (pid $!), log ${LOG}"
ready=false
for _ in $(seq 1 150); do
  if crictl_ours info -o go-template --template '{{range .status.conditions}}{{.type}}={{.status}} {{end}}' 2>/dev/null |
    grep -q 'RuntimeReady=true NetworkReady=true'; then
    ready=true
    break
  fi
  pid_alive "$(cat "${PIDFILE}")" || break
  sleep 0.2
done
if [ "${ready}" != true ]; then
  tail -20 "${LOG}" >&2
  fail "containerd at ${CONTAINERD_SOCK} is not ready (RuntimeReady and NetworkReady)"
fi
log "containerd ready: $(crictl_ours version | awk '/RuntimeName|RuntimeVersion/ {printf "%s ", $2}')"
# ctr warns on each call that cgroup v1 is deprecated (a fact of the host):
# that line is left out.
without_cgroup_v1_warning() { grep -v 'support for cgroup v1 is deprecated' >&2 || true; }
ctr_ours() { ctr --address "${CONTAINERD_SOCK}" -n k8s.io "$@" 2> >(without_cgroup_v1_warning); }
"${ROOT}/hack/images.sh" "${CONTAINERD_SOCK}" 2> >(without_cgroup_v1_warning) | sed 's/^/  /'

# ----------------------------------------------------------------- steps

passed=()
failed=()

# step NAME FUNCTION: runs FUNCTION in a subshell with errexit (every
# command must succeed) and records its result; the next step runs anyway.
step() {
  local name=$1 rc
  log "--- ${name}"
  set +o errexit
  (
    set -o errexit
    "$2"
  )
  rc=$?
  set -o errexit
  if [ "${rc}" -eq 0 ]; then
    log "PASS ${name}"
    passed+=("${name}")
  else
    log "FAIL ${name} (exit ${rc})"
    failed+=("${name}")
  fi
}

# pod_json NAME [USERNS]: a pod sandbox config (USERNS=userns: a user
# namespace of its own, container ids 0-65535 on host ids 65536-131071).
pod_json() {
  local userns=""
  if [ "${2:-}" = userns ]; then
    userns=', "security_context": {"namespace_options": {"userns_options": {"mode": 0,
      "uids": [{"host_id": 65536, "container_id": 0, "length": 65536}],
      "gids": [{"host_id": 65536, "container_id": 0, "length": 65536}]}}}'
  fi
  mkdir -p "${WORK}/logs/$1"
  cat >"${WORK}/$1-pod.json" <<EOF
{
  "metadata": {"name": "$1", "namespace": "${NS}", "uid": "${NS}-$1", "attempt": 0},
  "hostname": "$1",
  "log_directory": "${WORK}/logs/$1",
  "linux": {"cgroup_parent": "${CGROUP_PARENT}"${userns}}
}
EOF
  echo "${WORK}/$1-pod.json"
}

# json_string S: S as a JSON string (S has no control characters).
json_string() {
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "${s}"
}

# ctr_json POD SCRIPT [USERNS] [MOUNTS]: a busybox container of POD that
# runs sh -c SCRIPT (with the pod's user namespace, and MOUNTS, a JSON list).
ctr_json() {
  local security="" mounts=""
  if [ "${3:-}" = userns ]; then
    security=', "security_context": {"namespace_options": {"userns_options": {"mode": 0,
      "uids": [{"host_id": 65536, "container_id": 0, "length": 65536}],
      "gids": [{"host_id": 65536, "container_id": 0, "length": 65536}]}}}'
  fi
  [ -z "${4:-}" ] || mounts=", \"mounts\": $4"
  cat >"${WORK}/$1-ctr.json" <<EOF
{
  "metadata": {"name": "$1"},
  "image": {"image": "${BUSYBOX_IMAGE}"},
  "command": ["/bin/sh", "-c", $(json_string "$2")],
  "log_path": "$1.log",
  "linux": {"resources": {}${security}}${mounts}
}
EOF
  echo "${WORK}/$1-ctr.json"
}

# run_to_exit POD-JSON CTR-JSON: runs the pod and its container until the
# container exits; prints the container's log; fails unless it exited 0.
run_to_exit() {
  local pod ctr state code
  pod=$(crictl_ours runp "$1")
  ctr=$(crictl_ours create "${pod}" "$2" "$1")
  crictl_ours start "${ctr}" >/dev/null
  for _ in $(seq 1 150); do
    state=$(crictl_ours inspect -o go-template --template '{{.status.state}}' "${ctr}")
    [ "${state}" != CONTAINER_EXITED ] || break
    sleep 0.2
  done
  code=$(crictl_ours inspect -o go-template --template '{{.status.exitCode}}' "${ctr}")
  crictl_ours logs "${ctr}" 2>&1 | sed 's/^/  | /'
  [ "${state}" = CONTAINER_EXITED ] || {
    echo "container ${ctr} is ${state}, not exited" >&2
    return 1
  }
  [ "${code}" = 0 ] || {
    echo "container ${ctr} exited ${code}" >&2
    return 1
  }
  echo "${ctr}" >"${WORK}/last-ctr"
}

# logs_have LINE: the last container's log has LINE.
logs_have() {
  crictl_ours logs "$(cat "${WORK}/last-ctr")" 2>&1 | grep -qxF -- "$1" || {
    echo "the log lacks \"$1\"" >&2
    return 1
  }
}

config() {
  local dump err
  dump=$(containerd --config "${CONTAINERD_CONFIG}" config dump 2>"${WORK}/dump.err")
  err=$(grep -v '^$' "${WORK}/dump.err" || true)
  if [ -n "${err}" ]; then
    echo "containerd config dump said: ${err}" >&2
    return 1
  fi
  local want
  for want in "version = 4" "sandbox = '${PAUSE_IMAGE}'" "config_path = '${CONTAINERD_HOSTS_DIR}'" \
    "bin_dirs = ['${CNI_BIN_DIR}']" "conf_dir = '${CNI_CONF_DIR}'" "Root = '${RUNC_ROOT}'" "SystemdCgroup = false" \
    "restrict_oom_score_adj = true" "netns_mounts_under_state_dir = true" "address = '${CONTAINERD_SOCK}'" \
    "address = '${CONTAINERD_SOCK}.ttrpc'" "stream_server_port = '0'" "path = '${CONTAINERD_ROOT}/opt'"; do
    grep -qF -- "${want}" <<<"${dump}" || {
      echo "containerd config dump lacks ${want}" >&2
      return 1
    }
  done
  # containerd's own list of what it runs deprecated (a config key of
  # 1.x, the mirrors...): nothing but the host's cgroup v1, which is no
  # config's.
  local deprecations
  deprecations=$(ctr --address "${CONTAINERD_SOCK}" deprecations list 2>/dev/null)
  while IFS= read -r l; do echo "  deprecations: ${l}"; done <<<"${deprecations}"
  if tail -n +2 <<<"${deprecations}" | grep -v 'io.containerd.deprecation/cgroup-v1' | grep -q .; then
    echo "containerd lists a deprecation other than cgroup v1" >&2
    return 1
  fi
  # Its warnings and errors since it started.
  grep -E 'level=(warning|error|fatal)' "${LOG}" | cut -c1-240 | sed 's/^/  log: /' || true
}

echo_pod() {
  run_to_exit "$(pod_json echo)" "$(ctr_json echo 'echo hello from containerd 2; id -u')"
  logs_have "hello from containerd 2"
}

userns_pod() {
  run_to_exit "$(pod_json userns userns)" \
    "$(ctr_json userns 'cat /proc/self/uid_map /proc/self/gid_map | tr -s " " | sed "s/^ //"; id -u' userns)"
  logs_have "0 65536 65536"
  [ "$(crictl_ours logs "$(cat "${WORK}/last-ctr")" 2>&1 | grep -cxF '0 65536 65536')" = 2 ] || {
    echo "uid_map and gid_map are not both 0 65536 65536" >&2
    return 1
  }
  # The pause process, seen from the host, runs as host uid 65536.
  local pod pid
  pod=$(crictl_ours pods -q --name '^userns$' --namespace "${NS}")
  pid=$(crictl_ours inspectp -o go-template --template '{{.info.pid}}' "${pod}")
  awk '/^Uid:/ {print "  pause on the host: uid " $2}' "/proc/${pid}/status"
  [ "$(awk '/^Uid:/ {print $2}' "/proc/${pid}/status")" = 65536 ]
}

image_volume() {
  run_to_exit "$(pod_json image)" \
    "$(ctr_json image 'ls -l /img/bin/busybox; test -x /img/bin/busybox && echo image volume ok; touch /img/x 2>/dev/null && echo writable || echo read-only' \
      "" "[{\"container_path\": \"/img\", \"readonly\": true, \"image\": {\"image\": \"${BUSYBOX_IMAGE}\"}}]")"
  logs_have "image volume ok"
  logs_have "read-only"
}

registry() {
  local regtool=${ROOT}/_output/bin/regtool digest got ref
  command -v docker-registry >/dev/null || {
    echo "docker-registry is missing (REGISTRY_MIRROR=1 hack/install-deps.sh)" >&2
    return 1
  }
  if ss -Hltn "sport = :${REGISTRY_PORT_C2}" | grep -q .; then
    echo "port ${REGISTRY_PORT_C2} is in use" >&2
    return 1
  fi
  sed 's|^|  hosts.toml: |' "${CONTAINERD_HOSTS_DIR}/registry.k8s.io/hosts.toml"
  cat >"${REG_DIR}/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: ${REG_DIR}/data
http:
  addr: ${REGISTRY_HOST}
  tls:
    certificate: ${PKI_DIR}/registry.crt
    key: ${PKI_DIR}/registry.key
EOF
  start_detached "${REGISTRY_PIDFILE}" "${REG_DIR}/registry.log" "$(command -v docker-registry)" serve "${REG_DIR}/config.yml"
  for _ in $(seq 1 100); do
    ! curl -sf --max-time 2 --cacert "${PKI_DIR}/ca.crt" "https://${REGISTRY_HOST}/v2/" >/dev/null || break
    sleep 0.2
  done
  [ -x "${regtool}" ] || (cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -o "${regtool}" ./cmd/regtool)
  digest=$(cat "${ROOT}/_output/images/busybox.tar.digest")
  "${regtool}" push -ca "${PKI_DIR}/ca.crt" "${ROOT}/_output/images/busybox.tar" "${REGISTRY_HOST}/${MIRROR_TAG}" >/dev/null
  # (ctr removes a name; the CRI's RemoveImage would remove every name of
  # the image, the 1.37.0-2 tag too.)
  for ref in "registry.k8s.io/${MIRROR_TAG}" "${REGISTRY_HOST}/${MIRROR_TAG}"; do
    ctr_ours images rm "${ref}" >/dev/null 2>&1 || true
    crictl_ours pull "${ref}" | sed 's/^/  /'
    got=$(crictl_ours inspecti -o go-template --template '{{range .status.repoDigests}}{{.}} {{end}}' "${ref}")
    echo "  ${ref}: ${got}"
    grep -qF "@${digest}" <<<"${got}" || {
      echo "${ref} is not at the tarball's digest ${digest}" >&2
      return 1
    }
    ctr_ours images rm "${ref}" >/dev/null
  done
}

# report: what crivk's cri package reads and containerd 2 answers
# differently from 1.6 (information, not a step).
report() {
  log "--- report (information)"
  crictl_ours runtime-config 2>&1 | sed 's/^/  runtime-config: /' || true
  crictl_ours images --pinned 2>&1 | sed 's/^/  pinned: /' || true
  # crivk's cri.Runtime.SandboxImage reads sandboxImage from the verbose
  # Status's config, as containerd 1.6 reports it.
  crictl_ours info -o go-template --template '  verbose Status config.sandboxImage: {{index .config "sandboxImage"}}' 2>&1 || true
  crictl_ours info -o go-template --template '  verbose Status config.enableUnprivilegedPorts: {{index .config "enableUnprivilegedPorts"}}' 2>&1 || true
  crictl_ours info -o go-template \
    --template '{{range .runtimeHandlers}}  handler "{{index . "name"}}": {{index . "features"}}{{"\n"}}{{end}}' 2>&1 || true
}

step config config
step echo echo_pod
step userns userns_pod
step image image_volume
step registry registry
report

log "passed: ${passed[*]:-none}; failed: ${failed[*]:-none}"
[ "${#failed[@]}" -eq 0 ]
