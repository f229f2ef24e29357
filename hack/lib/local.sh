# shellcheck shell=bash
# shellcheck disable=SC2034 # variables are used by the scripts that source this
# Shared by hack/local-up.sh and hack/local-down.sh (sourced, not run): the
# layout of the local cluster and the helpers that find, start, stop and clean
# up its processes. The caller sets ROOT and LOG_PREFIX.
#
# Everything the local cluster owns is found from these paths, never by a
# process name alone: a process is ours only when its executable is the
# expected binary AND its command line mentions LOCAL_DIR (or, for shims, our
# containerd socket). That keeps a system containerd/etcd on the same machine,
# and their shims and mounts, out of reach.

LOCAL_DIR=${ROOT}/_output/local
BIN_DIR=${ROOT}/_output/bin
PID_DIR=${LOCAL_DIR}/pids
LOG_DIR=${LOCAL_DIR}/logs
PKI_DIR=${LOCAL_DIR}/pki
# LOCAL_ETCD (hack/local-up.sh): system runs Debian's etcd-server (3.4) from
# PATH with its data in LOCAL_DIR/etcd; built runs etcd 3.7.0 of hack/tools
# (hack/build-kube.sh etcd, BIN_DIR/etcd) with its data in
# LOCAL_DIR/etcd-3.6 (the name of the 3.6.5 it replaced: 3.7 upgrades a 3.6
# data dir, one minor up). etcd 3.6 upgrades only from 3.5: on a 3.4 data dir it
# panics ("detected disallowed v2 WAL for stage --v2-deprecation=write-only").
# Each kind keeps its own data, so switching back finds the other's as it
# was left.
LOCAL_ETCD=${LOCAL_ETCD:-system}
if [ "${LOCAL_ETCD}" = built ]; then
  ETCD_DIR=${LOCAL_DIR}/etcd-3.6
else
  ETCD_DIR=${LOCAL_DIR}/etcd
fi
# CONTAINERD (hack/local-up.sh): the container runtime's lane. built (the
# default) runs containerd 2, its shim, ctr, runc and the CNI plugins of
# hack/build-runtime.sh from RUNTIME_BIN_DIR, which comes first in PATH for
# every script that sources this (so containerd's shim and the shim's runc,
# both looked up in PATH, and ctr are these too); its root and config live
# in LOCAL_DIR/containerd2. system runs Debian's containerd 1.6, runc and
# containernetworking-plugins from PATH (/usr/lib/cni), root and config in
# LOCAL_DIR/containerd. Each lane keeps its own root (containerd 1.6 does
# not read back what 2.x wrote), so switching finds the other's images as
# they were left; the socket, state and runc root are the same paths, and
# only one lane's containerd runs at a time (local-up stops the other's,
# and its shims, first: component_bins, our_shims).
CONTAINERD=${CONTAINERD:-built}
case "${CONTAINERD}" in
  built | system) ;;
  *) echo "CONTAINERD must be built or system, not '${CONTAINERD}'" >&2; exit 2 ;;
esac
RUNTIME_BIN_DIR=${ROOT}/_output/bin/runtime
if [ "${CONTAINERD}" = built ]; then
  case ":${PATH}:" in
    *":${RUNTIME_BIN_DIR}:"*) ;;
    *) PATH=${RUNTIME_BIN_DIR}:${PATH} ;;
  esac
  export PATH
fi
# LOCAL_STATE=NAME: a cluster state of its own, apart from `make run`'s:
# etcd keeps its data in ETCD_DIR-NAME (_output/local/etcd-NAME), so what a
# user made in the cluster (pods, namespaces, nodes) is not there.
# hack/test.sh's cluster tiers run with LOCAL_STATE=test and
# hack/walkthrough.sh with LOCAL_STATE=walkthrough; `FRESH=1
# hack/local-down.sh` empties it (and the node's state, see there).
LOCAL_STATE=${LOCAL_STATE:-}
case "${LOCAL_STATE}" in
  -* | *[!a-z0-9-]*) echo "LOCAL_STATE must be empty or a lower-case name, not '${LOCAL_STATE}'" >&2; exit 2 ;;
esac
ETCD_DIR=${ETCD_DIR}${LOCAL_STATE:+-${LOCAL_STATE}}
CNI_CONF_DIR=${LOCAL_DIR}/cni/net.d

# Unix socket paths are limited to 108 bytes and the checkout may live
# anywhere, so sockets and runtime state live under a short fixed directory.
CRIVK_RUN_DIR=${CRIVK_RUN_DIR:-/run/crivk}
if [ "${CONTAINERD}" = built ]; then
  CONTAINERD_DIR=${LOCAL_DIR}/containerd2
else
  CONTAINERD_DIR=${LOCAL_DIR}/containerd
fi
CONTAINERD_CONFIG=${CONTAINERD_DIR}/config.toml
CONTAINERD_ROOT=${CONTAINERD_DIR}/root
CONTAINERD_RUN=${CRIVK_RUN_DIR}/containerd
CONTAINERD_STATE=${CONTAINERD_RUN}/state
CONTAINERD_SOCK=${CONTAINERD_RUN}/containerd.sock
CRI_ENDPOINT=unix://${CONTAINERD_SOCK}
# runc's state root for our containerd's shims (runc options "Root"); the
# shim appends the containerd namespace (k8s.io).
RUNC_ROOT=${CRIVK_RUN_DIR}/runc
CNI_DATA_DIR=${CRIVK_RUN_DIR}/cni/networks
if [ "${CONTAINERD}" = built ]; then
  CNI_BIN_DIR=${RUNTIME_BIN_DIR}/cni
else
  CNI_BIN_DIR=/usr/lib/cni
fi
# containerd 2's registry.config_path: the registries' <host>/hosts.toml
# (crivk_render hosts); containerd 1 takes them in its config.toml.
CONTAINERD_HOSTS_DIR=${CONTAINERD_DIR}/certs.d

CNI_NETWORK=crivk
CNI_BRIDGE=${CNI_BRIDGE:-crivk0}
POD_CIDR=${POD_CIDR:-10.88.0.0/16}
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
# MACHINES=N (N > 1): the cluster of several machines on this one (#45,
# hack/README.md "Several machines on one"; hack/run-machines.sh): the
# control plane on the host, no containerd nor node there, the nodes in
# machines m1..mN (hack/machines.sh). Unset or 1: the single node.
MACHINES=${MACHINES:-1}
case "${MACHINES}" in
  "" | 0 | *[!0-9]*) echo "MACHINES must be a number from 1, not '${MACHINES}'" >&2; exit 2 ;;
esac
# The networks of the cluster of machines (#45, hack/README.md "Several
# machines on one"): the pod network, which the controller manager cuts
# into a /NODE_CIDR_MASK_SIZE per node (flannel's Network, kube-proxy's
# clusterCIDR: hack/network.sh renders hack/network/*.yaml with them), and
# the cluster DNS: the kube-dns Service's IP, in SERVICE_CIDR, and the
# domain (the agents' --cluster-dns and --cluster-domain). The single node
# uses none of them.
CLUSTER_CIDR=10.244.0.0/16
NODE_CIDR_MASK_SIZE=24
CLUSTER_DNS=10.96.0.10
CLUSTER_DOMAIN=cluster.local
NODE_NAME=${NODE_NAME:-crivk-local}
PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
BUSYBOX_IMAGE=registry.k8s.io/e2e-test-images/busybox:1.37.0-2

ETCD_CLIENT_PORT=2479
ETCD_PEER_PORT=2480
APISERVER_PORT=6443
CONTROLLER_MANAGER_PORT=10357
SCHEDULER_PORT=10359
METRICS_SERVER_PORT=4443
REGISTRY_PORT=5443
REGISTRY_MIRROR_PORT=5444
SA_ISSUER=https://kubernetes.default.svc.cluster.local

# Start order; local-down stops in reverse.
COMPONENTS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler docker-registry registry-mirror metrics-server)

CRICTL=${BIN_DIR}/crictl
CRICTL_CONFIG=${LOCAL_DIR}/crictl.yaml

log() { echo "${LOG_PREFIX}: $*"; }
warn() { echo "${LOG_PREFIX}: WARNING: $*" >&2; }

# component_bin NAME: the absolute executable a component runs from
# (registry-mirror is a second docker-registry; etcd is the one LOCAL_ETCD
# names).
component_bin() {
  case "$1" in
    etcd)
      if [ "${LOCAL_ETCD}" = built ]; then
        echo "${BIN_DIR}/etcd"
      else
        readlink -f "$(command -v etcd)"
      fi
      ;;
    containerd)
      if [ "${CONTAINERD}" = built ]; then
        echo "${RUNTIME_BIN_DIR}/containerd"
      else
        readlink -f "$(command -v containerd)"
      fi
      ;;
    containerd-shim-runc-v2)
      if [ "${CONTAINERD}" = built ]; then
        echo "${RUNTIME_BIN_DIR}/containerd-shim-runc-v2"
      else
        readlink -f "$(command -v containerd-shim-runc-v2)"
      fi
      ;;
    docker-registry) readlink -f "$(command -v "$1")" ;;
    registry-mirror) readlink -f "$(command -v docker-registry)" ;;
    *) echo "${BIN_DIR}/$1" ;;
  esac
}

# component_bins NAME: every executable a process of NAME may run, one a
# line: component_bin's, and for etcd that of either LOCAL_ETCD (for
# containerd and its shim that of either CONTAINERD), so that a process of
# the other kind is still ours: local-up stops it before it starts the one
# asked for, and local-down and fault.sh, which are not told which kind
# runs, find it.
component_bins() {
  case "$1" in
    etcd)
      LOCAL_ETCD=system component_bin etcd || true
      LOCAL_ETCD=built component_bin etcd
      ;;
    containerd | containerd-shim-runc-v2)
      CONTAINERD=system PATH=${PATH//${RUNTIME_BIN_DIR}:/} component_bin "$1" || true
      CONTAINERD=built component_bin "$1"
      ;;
    *) component_bin "$1" ;;
  esac
}

# component_mark NAME: what NAME's command line holds, and no other
# component's of the same binary: docker-registry and registry-mirror run
# one binary, each with its own directory's config.yml.
component_mark() {
  case "$1" in
    docker-registry) echo "${LOCAL_DIR}/registry/" ;;
    registry-mirror) echo "${LOCAL_DIR}/registry-mirror/" ;;
    *) echo "${LOCAL_DIR}/" ;;
  esac
}

# pid_alive PID: true for a running (not zombie) process.
pid_alive() {
  local state
  [ -r "/proc/$1/stat" ] || return 1
  state=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "${state}" ] && [ "${state}" != Z ] && [ "${state}" != X ]
}

# cmdline_of PID: the command line with spaces between arguments.
cmdline_of() {
  tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null || true
}

# is_ours NAME PID: PID runs one of NAME's binaries (component_bins,
# possibly since replaced on disk) with LOCAL_DIR (component_mark) on its
# command line.
is_ours() {
  local exe bin
  pid_alive "$2" || return 1
  exe=$(readlink "/proc/$2/exe" 2>/dev/null) || return 1
  while IFS= read -r bin; do
    [ -n "${bin}" ] || continue
    if [ "${exe}" = "${bin}" ] || [ "${exe}" = "${bin} (deleted)" ]; then
      case "$(cmdline_of "$2")" in *"$(component_mark "$1")"*) return 0 ;; esac
      return 1
    fi
  done < <(component_bins "$1")
  return 1
}

# recorded_pid NAME: the PID in NAME's PID file if that process is ours.
recorded_pid() {
  local pid
  pid=$(cat "${PID_DIR}/$1.pid" 2>/dev/null) || return 0
  if [ -n "${pid}" ] && is_ours "$1" "${pid}"; then
    echo "${pid}"
  fi
}

# pids_running EXE: PIDs whose executable is EXE (or EXE replaced on disk).
pids_running() {
  [ -n "$1" ] || return 0
  find /proc -mindepth 2 -maxdepth 2 -name exe -printf '%h %l\n' 2>/dev/null |
    awk -v exe="$1" '{
      pid = substr($1, 7); target = substr($0, length($1) + 2)
      if (target == exe || target == exe " (deleted)") print pid
    }'
}

# all_pids NAME: every process of component NAME, recorded or stray (a lost
# PID file, an earlier run's leftover).
all_pids() {
  local bin p
  while IFS= read -r bin; do
    for p in $(pids_running "${bin}"); do
      is_ours "$1" "${p}" && echo "${p}"
    done
  done < <(component_bins "$1")
  return 0
}

# start_detached PIDFILE LOGFILE CMD...: starts CMD in a session of its own
# (setsid), stdout and stderr appended to LOGFILE, and writes CMD's PID to
# PIDFILE. The child writes its own PID before it execs CMD, so the PID is
# CMD's whether or not setsid forked (it does when its caller leads a
# process group; $! is then setsid's, which exits at once) and however slow
# the exec. Returns 1 when no PID was written within 30 s.
start_detached() {
  local pidfile=$1 logfile=$2 tmp
  shift 2
  tmp=${pidfile}.starting
  rm -f "${tmp}" "${tmp}.w"
  # shellcheck disable=SC2016 # $$, $0 and $@ are the child's
  setsid sh -c 'echo $$ >"$0.w" && mv -f "$0.w" "$0" && exec "$@"' "${tmp}" "$@" >>"${logfile}" 2>&1 </dev/null &
  for _ in $(seq 1 300); do
    [ -s "${tmp}" ] && break
    sleep 0.1
  done
  [ -s "${tmp}" ] || return 1
  mv -f "${tmp}" "${pidfile}"
}

# stop_pids LABEL PID...: SIGTERM, then SIGKILL whatever is left after 10s.
stop_pids() {
  local label=$1 p alive
  shift
  [ $# -gt 0 ] || return 0
  log "stopping ${label} (pid $*)"
  kill -TERM "$@" 2>/dev/null || true
  for _ in $(seq 1 100); do
    alive=()
    for p in "$@"; do pid_alive "${p}" && alive+=("${p}"); done
    [ ${#alive[@]} -gt 0 ] || return 0
    sleep 0.1
  done
  warn "${label} still running after 10s, sending SIGKILL to ${alive[*]}"
  kill -KILL "${alive[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do
    alive=()
    for p in "$@"; do pid_alive "${p}" && alive+=("${p}"); done
    [ ${#alive[@]} -gt 0 ] || return 0
    sleep 0.1
  done
  warn "${label} did not exit: ${alive[*]}"
}

# stop_component NAME: stops every process of NAME and removes its PID file.
stop_component() {
  local pids
  pids=$(all_pids "$1")
  # shellcheck disable=SC2086 # word splitting intended
  stop_pids "$1" ${pids}
  rm -f "${PID_DIR}/$1.pid" "${PID_DIR}/$1.args"
}

# our_shims: containerd-shim-runc-v2 processes started by our containerd
# (their `-address` argument is our socket).
our_shims() {
  local p prev arg bin
  while IFS= read -r bin; do
    [ -n "${bin}" ] || continue
    for p in $(pids_running "${bin}"); do
      pid_alive "${p}" || continue
      prev=
      while IFS= read -r -d '' arg; do
        if [ "${prev}" = -address ] && [ "${arg}" = "${CONTAINERD_SOCK}" ]; then
          echo "${p}"
          break
        fi
        prev=${arg}
      done <"/proc/${p}/cmdline" 2>/dev/null || true
    done
  done < <(component_bins containerd-shim-runc-v2)
  return 0
}

# our_mounts: mount points under our containerd's state dir and under
# LOCAL_DIR (containerd root), deepest first.
our_mounts() {
  local m
  while read -r _ m _; do
    m=$(printf '%b' "${m}") # /proc/mounts escapes spaces as \040
    case "${m}" in
      "${CONTAINERD_RUN}"/* | "${LOCAL_DIR}"/*) printf '%s %s\n' "${#m}" "${m}" ;;
    esac
  done </proc/mounts | sort -rn -k1,1 | cut -d' ' -f2-
}

# cleanup_runtime: removes what a stopped or crashed containerd of ours left
# behind: runc containers (and so their processes), shims, mounts (container
# rootfs, sandbox /dev/shm, network namespaces), netns files and sockets.
# Only call it when our containerd is not running.
cleanup_runtime() {
  local ns id shims m left a shim_sockets n=0
  # Each shim's socket lives under /run/containerd/s/ (named by a hash of our
  # socket path and the sandbox ID); a SIGKILLed shim leaves it behind. The
  # bundle's address file says which file is ours.
  shim_sockets=$(sed 's|^unix://||' "${CONTAINERD_STATE}"/io.containerd.runtime.v2.task/*/*/address 2>/dev/null) || true
  if [ -d "${RUNC_ROOT}" ]; then
    for ns in "${RUNC_ROOT}"/*/; do
      [ -d "${ns}" ] || continue
      for id in $(runc --root "${ns%/}" list -q 2>/dev/null); do
        runc --root "${ns%/}" delete --force "${id}" >/dev/null 2>&1 ||
          warn "runc delete --force ${id} failed"
        n=$((n + 1))
      done
    done
    [ "${n}" -eq 0 ] || log "removed ${n} left-over runc container(s)"
  fi
  shims=$(our_shims)
  # shellcheck disable=SC2086 # word splitting intended
  stop_pids "left-over containerd-shim-runc-v2" ${shims}
  for a in ${shim_sockets}; do
    [ ! -S "${a}" ] || rm -f "${a}"
  done
  while IFS= read -r m; do
    [ -n "${m}" ] || continue
    umount "${m}" 2>/dev/null || umount -l "${m}" 2>/dev/null || warn "cannot unmount ${m}"
    log "unmounted ${m}"
  done < <(our_mounts)
  left=$(our_mounts)
  if [ -n "${left}" ]; then
    warn "still mounted: ${left}"
    return 1
  fi
  rm -rf "${CONTAINERD_STATE}/io.containerd.grpc.v1.cri/netns"
  rm -f "${CONTAINERD_SOCK}" "${CONTAINERD_SOCK}.ttrpc"
  sweep_cni_iptables
}

# crictl_ours ARGS...: crictl against our containerd.
crictl_ours() {
  local config=()
  # Without a config file crictl warns that /etc/crictl.yaml is missing.
  [ ! -f "${CRICTL_CONFIG}" ] || config=(--config "${CRICTL_CONFIG}")
  "${CRICTL}" "${config[@]}" --runtime-endpoint "${CRI_ENDPOINT}" --image-endpoint "${CRI_ENDPOINT}" --timeout 30s "$@"
}

# remove_all_pods: stops and removes every CRI pod sandbox (and so every
# container) in our containerd, which must be running.
remove_all_pods() {
  local pods
  pods=$(crictl_ours pods -q 2>/dev/null) || {
    warn "cannot list pod sandboxes"
    return 0
  }
  [ -n "${pods}" ] || return 0
  log "removing $(echo "${pods}" | wc -l) pod sandbox(es)"
  # shellcheck disable=SC2086 # word splitting intended
  crictl_ours stopp ${pods} >/dev/null || warn "crictl stopp failed"
  # shellcheck disable=SC2086
  crictl_ours rmp -f ${pods} >/dev/null || warn "crictl rmp failed"
}

# sweep_cni_iptables: deletes the nat rules that the bridge (ipMasq) and
# portmap CNI plugins made for our network, and the per-sandbox chains they
# jump to. For after a crash only: CNI DEL cannot remove them once the pod's
# network namespace is gone (bridge skips its ipMasq teardown without a netns
# path). Every rule of ours carries the comment `name: "crivk" id: "<sandbox>"`
# and the per-sandbox chains are CNI-<hash>, CNI-DN-<hash>, CNI-SN-<hash>; the
# shared CNI-HOSTPORT-* chains are kept.
sweep_cni_iptables() {
  local rules line chain target script chains=()
  command -v iptables-save >/dev/null || return 0
  rules=$(iptables-save -t nat 2>/dev/null | grep -F -- "name: \\\"${CNI_NETWORK}\\\" id: " | grep '^-A ') || return 0
  script='*nat'$'\n'
  while IFS= read -r line; do
    chain=$(awk '{print $2}' <<<"${line}")
    target=$(sed -n 's/.* -j \(CNI-[A-Za-z0-9-]*\).*/\1/p' <<<"${line}")
    case "${chain}" in
      CNI-HOSTPORT-*) script+="-D ${line#-A }"$'\n' ;;
      CNI-*) chains+=("${chain}") ;;
      *) script+="-D ${line#-A }"$'\n' ;;
    esac
    case "${target}" in
      "" | CNI-HOSTPORT-*) ;;
      *) chains+=("${target}") ;;
    esac
  done <<<"${rules}"
  for chain in $(printf '%s\n' "${chains[@]}" | sort -u); do
    script+="-F ${chain}"$'\n'"-X ${chain}"$'\n'
  done
  script+='COMMIT'$'\n'
  if iptables-restore --noflush <<<"${script}"; then
    log "removed left-over iptables rules of CNI network ${CNI_NETWORK} ($(wc -l <<<"${rules}") rules)"
  else
    warn "could not remove left-over iptables rules of CNI network ${CNI_NETWORK}"
  fi
}

# remove_metrics_apiservice: deletes metrics-server's APIService (an
# aggregated API without a backend stalls namespace deletion); quiet when
# the API server does not answer or has none.
remove_metrics_apiservice() {
  curl -s -o /dev/null --max-time 10 --cacert "${PKI_DIR}/ca.crt" \
    --cert "${PKI_DIR}/admin.crt" --key "${PKI_DIR}/admin.key" -X DELETE \
    "https://127.0.0.1:${APISERVER_PORT}/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io" || true
}

# ------------------------------------------------------ containerd and CNI

# crivk_render WHAT prints one of the files of the project's containerds
# (WHAT: config, the config.toml; cni, the CNI conflist; hosts writes the
# registries' hosts.toml files under CONTAINERD_HOSTS_DIR for containerd 2
# and prints their paths) with crivk's own template (`crivk runtime
# render`, internal/subcmd/hostruntime/files.go), the one charts/crivk's
# runtime container writes, for the containerd in PATH (its --version picks
# the config's version) from CONTAINERD_ROOT, CONTAINERD_STATE,
# CONTAINERD_SOCK, RUNC_ROOT, CNI_BIN_DIR, CNI_CONF_DIR, CNI_DATA_DIR,
# CNI_NETWORK, CNI_BRIDGE, POD_CIDR, CONTAINERD_HOSTS_DIR and PAUSE_IMAGE; with REGISTRY_HOST set,
# the local registry's certificate (of the cluster CA in PKI_DIR) is trusted
# for that host; with REGISTRY_MIRROR=1 and REGISTRY_MIRROR_HOST set, pulls
# of registry.k8s.io images try https://REGISTRY_MIRROR_HOST first (its
# certificate of the same CA trusted too): hack/local-up.sh's mirror.
# crivk is built first when _output/bin/crivk is missing or too old to
# render.
crivk_render() {
  local args=(runtime render -what "$1" -written-by "hack/${LOG_PREFIX}.sh"
    -containerd "$(component_bin containerd)"
    -root "${CONTAINERD_ROOT}" -state "${CONTAINERD_STATE}" -socket "${CONTAINERD_SOCK}"
    -sandbox-image "${PAUSE_IMAGE}" -restrict-oom-score-adj -runc-root "${RUNC_ROOT}"
    -cni-bin-dir "${CNI_BIN_DIR}" -cni-conf-dir "${CNI_CONF_DIR}" -cni-data-dir "${CNI_DATA_DIR}"
    -network "${CNI_NETWORK}" -bridge "${CNI_BRIDGE}" -pod-cidr "${POD_CIDR}"
    -registry-config-path "${CONTAINERD_HOSTS_DIR}")
  if [ -n "${REGISTRY_HOST:-}" ]; then
    args+=(-registry-host "${REGISTRY_HOST}" -registry-ca "${PKI_DIR}/ca.crt")
  fi
  if [ "${REGISTRY_MIRROR:-0}" = 1 ] && [ -n "${REGISTRY_MIRROR_HOST:-}" ]; then
    [ -n "${REGISTRY_HOST:-}" ] || args+=(-registry-ca "${PKI_DIR}/ca.crt")
    args+=(-registry-mirror "registry.k8s.io=https://${REGISTRY_MIRROR_HOST}")
  fi
  if ! "${BIN_DIR}/crivk" "${args[@]}" 2>/dev/null; then
    "${ROOT}/hack/build.sh" >&2 || return
    "${BIN_DIR}/crivk" "${args[@]}"
  fi
}

# containerd_config prints the config.toml of one of the project's
# containerds (local-up's, and crivk-runtime's second one): crivk_render.
containerd_config() { crivk_render config; }

# cni_conflist prints the CNI network CNI_NETWORK: a bridge CNI_BRIDGE with
# host-local IPAM in POD_CIDR (state in CNI_DATA_DIR), and portmap.
cni_conflist() { crivk_render cni; }

# registry_hosts writes containerd 2's registry hosts files (crivk_render
# hosts; none for containerd 1). containerd reads them at each pull.
registry_hosts() { crivk_render hosts >/dev/null; }

# ------------------------------------------------------------ certificates

# cert NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]: a key pair signed by
# the CA in PKI_DIR (hack/local-up.sh makes it), (re)generated when missing, made for another subject/SANs, not
# signed by the current CA or expiring within a day.
cert() {
  local name=$1 subj=$2 usage=$3 sans=${4:-}
  local key=${PKI_DIR}/$1.key crt=${PKI_DIR}/$1.crt spec="${subj}|${usage}|${sans}"
  if [ -s "${key}" ] && [ -s "${crt}" ] && [ "$(cat "${PKI_DIR}/${name}.spec" 2>/dev/null)" = "${spec}" ] &&
    openssl verify -CAfile "${PKI_DIR}/ca.crt" "${crt}" >/dev/null 2>&1 &&
    openssl x509 -noout -checkend 86400 -in "${crt}" >/dev/null 2>&1; then
    return 0
  fi
  log "generating certificate ${name} (${subj}${sans:+ ${sans}})"
  [ -s "${key}" ] || (umask 077 && openssl genrsa -out "${key}" 2048 2>/dev/null)
  {
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature, keyEncipherment"
    echo "extendedKeyUsage = ${usage}"
    [ -z "${sans}" ] || echo "subjectAltName = ${sans}"
  } >"${PKI_DIR}/${name}.ext"
  openssl req -new -key "${key}" -subj "${subj}" -out "${PKI_DIR}/${name}.csr"
  openssl x509 -req -in "${PKI_DIR}/${name}.csr" -CA "${PKI_DIR}/ca.crt" -CAkey "${PKI_DIR}/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 3650 -sha256 \
    -extfile "${PKI_DIR}/${name}.ext" -out "${crt}" 2>/dev/null
  rm -f "${PKI_DIR}/${name}.csr" "${PKI_DIR}/${name}.ext"
  echo "${spec}" >"${PKI_DIR}/${name}.spec"
}
