#!/usr/bin/env bash
# Machines on this one (#45, phase 1 of hack/README.md "Several machines on
# one"): each machine mN is a set of namespaces held by a PID 1 of its own,
# with its own network on a host bridge, its own /run, /var/lib/{kubelet,
# crivk,containerd,...}, /etc/cni/net.d and /var/log, and its own
# containerd 2. A node agent per machine (agent, below) and the routes to
# the nodes' pod subnets (routes) are written for phase 2 and not run yet;
# the control plane is hack/local-up.sh's (MACHINES=N).
#
#   up N           brings up m1..mN (a machine already up is kept)
#   down           stops every machine and removes what up made, but the
#                  machines' logs (_output/machines/mN/log)
#   exec mN CMD... runs CMD in mN (its namespaces and cgroup, PATH with the
#                  runtime and _output/bin first, crictl and ctr pointed at
#                  its containerd), from the current directory
#   status         each machine: holder, hostname, address, containerd, agent
#   agent mN kubelet|crivk [ARG...]
#                  starts mN's node agent in the background, in the machine:
#                  hack/run-kubelet.sh or hack/run-crivk.sh with AGENT_ENV
#                  (_output/machines/mN/agent.env, written here): node mN at
#                  its LAN address, the machine's containerd, root dir
#                  /var/lib/kubelet or /var/lib/crivk, pod logs /var/log/pods,
#                  cgroup root /crivk-machines/mN, --cluster-dns CLUSTER_DNS and
#                  --cluster-domain CLUSTER_DOMAIN (hack/lib/local.sh), the label
#                  machines.crivk.io/network=owner (the network DaemonSets'
#                  nodeSelector), TLS bootstrap with local-up's token, and a
#                  serving certificate of the cluster CA for mN and its address
#                  (_output/local/pki/node-serving-mN.*); ARGs go to the agent.
#                  Its log is /var/log/AGENT.log (_output/machines/mN/log), its
#                  PID in the machine's /run/agent.pid. Needs the cluster of
#                  `MACHINES=N hack/local-up.sh`. NOT RUN YET (#45 phase 2).
#   routes         on the host, a route to each Node's spec.podCIDR via its
#                  InternalIP on crivk-lan (the API server reaches pods);
#                  they go with the bridge at down. NOT RUN YET (phase 3).
#
# A machine mN:
#
#   holder     _output/bin/machine-init (hack/tools/cmd/machine-init), PID 1
#              of `unshare --net --mount --uts --pid --fork --mount-proc
#              --propagation slave --kill-child`; its host PID in
#              _output/machines/mN/pid, checked (alive, that executable,
#              `-name mN`, PID 1 of a PID namespace of its own) before
#              anything is done to the machine. It reaps orphans; when it
#              exits the kernel kills every process of the machine, and the
#              namespaces go with them (the veth, the machine's mounts,
#              iptables rules and routes).
#   hostname   mN (UTS namespace)
#   network    veth crivk-mN on the host bridge crivk-lan (10.91.0.1/24),
#              eth0 10.91.0.(10+N)/24 in the machine, default route via
#              10.91.0.1, lo up, net.ipv4.ip_forward=1 and
#              net.bridge.bridge-nf-call-iptables=1 in its network namespace
#   mounts     propagation slave (the host's mounts are private on this
#              machine, so nothing propagates either way); a tmpfs on /run;
#              _output/machines/mN/<dir> bound on the paths of BINDS below,
#              /var/lib/kubelet and /var/lib/crivk then made shared (a
#              kubelet's mount propagation); _output/bin/runtime/cni
#              read-only on /opt/cni/bin; a sysfs of the machine's network
#              namespace on /sys, with the host's /sys/fs/cgroup moved back
#              under it (moved aside first: once the new sysfs covers /sys
#              the old cgroup mounts cannot be reached)
#   cgroups    /crivk-machines/mN/system in every hierarchy of
#              /sys/fs/cgroup holds the holder, so every process of the
#              machine (containerd, shims, what `exec` runs); pods go where
#              their CRI client says (the machine has no cgroup namespace:
#              paths are the host's)
#   containerd hack/build-runtime.sh's (v2.4.2) with the config `crivk
#              runtime render` writes for it (hack/lib/local.sh's
#              crivk_render) at /etc/containerd/config.toml: socket
#              /run/containerd/containerd.sock, state /run/containerd, root
#              /var/lib/containerd, runc root /run/containerd/runc, CNI
#              /opt/cni/bin and /etc/cni/net.d (empty: the network is not
#              ready until a conflist is written there), registry hosts
#              /etc/containerd/certs.d; log /var/log/containerd.log; the
#              test images imported (hack/images.sh with its socket)
#
# Everything of a machine is found from _output/machines/mN and the
# holder's PID, never by a name alone. The host gets: the bridge, one veth
# end per machine, the cgroups under /crivk-machines, and the mount points
# of BINDS that did not exist (empty directories, listed in
# _output/machines/mountpoints and removed by down when empty).
#
# Usage: hack/machines.sh up N | down | exec mN CMD... | status |
#        agent mN kubelet|crivk [ARG...] | routes   (as root)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=machines
# The machines run containerd 2 (build-runtime.sh), whatever lane the
# caller's environment names for the single node.
CONTAINERD=built
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"

SELF=${ROOT}/hack/machines.sh
MACHINES_DIR=${ROOT}/_output/machines
MACHINE_INIT=${BIN_DIR}/machine-init
LAN_BRIDGE=crivk-lan
LAN_GATEWAY=10.91.0.1
LAN_PREFIX=24
CGROUP_PARENT=/crivk-machines
MAX_MACHINES=200
MOUNTPOINTS=${MACHINES_DIR}/mountpoints

# BINDS: DIR:PATH, _output/machines/mN/DIR bound on PATH in mN.
BINDS=(
  kubelet:/var/lib/kubelet
  crivk:/var/lib/crivk
  containerd:/var/lib/containerd
  crivk-containerd:/var/lib/crivk-containerd
  cni:/var/lib/cni
  net.d:/etc/cni/net.d
  etc-crivk-containerd:/etc/crivk-containerd
  etc-containerd:/etc/containerd
  log:/var/log
)
SHARED_PATHS=(/var/lib/kubelet /var/lib/crivk)
CNI_BIN_PATH=/opt/cni/bin

# The machine's containerd, at its paths inside the machine.
M_SOCK=/run/containerd/containerd.sock
M_STATE=/run/containerd
M_ROOT=/var/lib/containerd
M_CONFIG=/etc/containerd/config.toml
M_LOG=/var/log/containerd.log
M_PIDFILE=/run/containerd/containerd.pid
# crictl's config (the machine's /etc/crictl.yaml would be the host's).
M_CRICTL_CONFIG=/etc/containerd/crictl.yaml
# The node agent's PID (agent), in the machine.
M_AGENT_PIDFILE=/run/agent.pid
# The label the network add-ons' DaemonSets select (hack/network/*.yaml).
NETWORK_OWNER_LABEL=machines.crivk.io/network=owner

fail() {
  log "ERROR: $*" >&2
  exit 1
}

usage() {
  echo "usage: hack/machines.sh up N | down | exec mN CMD... | status | agent mN kubelet|crivk [ARG...] | routes" >&2
  exit 2
}

# ------------------------------------------------------------ a machine

mdir() { echo "${MACHINES_DIR}/$1"; }

# machine_number mN: N.
machine_number() { echo "${1#m}"; }

# machine_ip mN: its LAN address.
machine_ip() { echo "10.91.0.$((10 + $(machine_number "$1")))"; }

valid_machine() {
  [[ $1 =~ ^m[1-9][0-9]*$ ]] && [ "$(machine_number "$1")" -le "${MAX_MACHINES}" ]
}

# is_holder mN PID: PID is mN's holder: alive, running our machine-init
# with -name mN, PID 1 of a PID namespace that is not ours.
is_holder() {
  local exe nspid
  pid_alive "$2" || return 1
  exe=$(readlink "/proc/$2/exe" 2>/dev/null) || return 1
  [ "${exe}" = "${MACHINE_INIT}" ] || [ "${exe}" = "${MACHINE_INIT} (deleted)" ] || return 1
  case " $(cmdline_of "$2")" in *" -name $1 "*) ;; *) return 1 ;; esac
  nspid=$(awk '/^NSpid:/ {print $NF}' "/proc/$2/status" 2>/dev/null)
  [ "${nspid}" = 1 ] && [ "$(readlink "/proc/$2/ns/pid")" != "$(readlink /proc/self/ns/pid)" ]
}

# holder_pid mN: the PID in mN's pid file if it is mN's holder.
holder_pid() {
  local pid
  pid=$(cat "$(mdir "$1")/pid" 2>/dev/null) || return 0
  if [ -n "${pid}" ] && is_holder "$1" "${pid}"; then
    echo "${pid}"
  fi
}

# stray_holders: "mN PID" for every process running our machine-init.
stray_holders() {
  local p name
  for p in $(pids_running "${MACHINE_INIT}"); do
    name=$(cmdline_of "${p}" | sed -n 's/.* -name \(m[0-9]*\) .*/\1/p')
    [ -n "${name}" ] && is_holder "${name}" "${p}" && echo "${name} ${p}"
  done
  return 0
}

# in_machine mN HOLDER CMD...: CMD in the machine's namespaces and its
# cgroup (this process joins it first: nsenter does not change cgroups),
# in the current directory.
in_machine() {
  local m=$1 h=$2
  shift 2
  (
    exec 9>&- # up's and down's lock is not the machine's
    cgroup_join "${CGROUP_PARENT}/${m}/system" "${BASHPID}"
    exec nsenter --target "${h}" --mount --net --uts --pid --wd="${PWD}" -- \
      env PATH="${RUNTIME_BIN_DIR}:${BIN_DIR}:${PATH}" MACHINE="${m}" \
      CRI_CONFIG_FILE="${M_CRICTL_CONFIG}" CONTAINERD_ADDRESS="${M_SOCK}" CONTAINERD_NAMESPACE=k8s.io "$@"
  )
}

# --------------------------------------------------------------- cgroups

# cgroup_hierarchies: the mounted hierarchies (v1 controllers, the named
# systemd one and the unified cgroup2).
cgroup_hierarchies() {
  local d
  for d in /sys/fs/cgroup/*/; do
    [ -f "${d}cgroup.procs" ] && echo "${d%/}"
  done
  return 0
}

# cgroup_make PATH: creates PATH (and its parents) in every hierarchy; a
# new cpuset gets its parent's cpus and mems (empty ones admit no process).
cgroup_make() {
  local h d part f parts
  while IFS= read -r h; do
    d=${h}
    IFS=/ read -ra parts <<<"${1#/}"
    for part in "${parts[@]}"; do
      [ -d "${d}/${part}" ] || mkdir "${d}/${part}"
      for f in cpuset.cpus cpuset.mems; do
        if [ -f "${d}/${part}/${f}" ] && [ -z "$(cat "${d}/${part}/${f}")" ]; then
          cat "${d}/${f}" >"${d}/${part}/${f}"
        fi
      done
      d=${d}/${part}
    done
  done < <(cgroup_hierarchies)
}

# cgroup_join PATH PID: moves PID (a process of ours) into PATH.
cgroup_join() {
  local h
  while IFS= read -r h; do
    echo "$2" >"${h}$1/cgroup.procs"
  done < <(cgroup_hierarchies)
}

# cgroup_pids PATH: the processes in PATH and below, in any hierarchy.
cgroup_pids() {
  local h
  while IFS= read -r h; do
    if [ -d "${h}$1" ]; then
      find "${h}$1" -name cgroup.procs -exec cat {} +
    fi
  done < <(cgroup_hierarchies) | sort -un
}

# cgroup_remove PATH: removes PATH and below, deepest first.
cgroup_remove() {
  local h
  while IFS= read -r h; do
    [ -d "${h}$1" ] || continue
    find "${h}$1" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ ! -d "${h}$1" ] || warn "cgroup ${h}$1 not removed"
  done < <(cgroup_hierarchies)
}

# --------------------------------------------------------------- network

lan_up() {
  local other
  if ! ip link show "${LAN_BRIDGE}" >/dev/null 2>&1; then
    other=$(ip -4 -o addr show | awk -v b="${LAN_BRIDGE}" '$4 ~ /^10\.91\.0\./ && $2 != b {print $2}')
    [ -z "${other}" ] || fail "10.91.0.0/24 is already on ${other}"
    ip link add "${LAN_BRIDGE}" type bridge
    log "bridge ${LAN_BRIDGE} created"
  fi
  ip addr replace "${LAN_GATEWAY}/${LAN_PREFIX}" dev "${LAN_BRIDGE}"
  ip link set "${LAN_BRIDGE}" up
}

# machine_network mN HOLDER: the veth and the machine's side of it.
machine_network() {
  local m=$1 h=$2 veth=crivk-$1
  if ip link show "${veth}" >/dev/null 2>&1; then
    ip link delete "${veth}" # a veth of an earlier machine mN
  fi
  ip link add "${veth}" type veth peer name eth0 netns "${h}"
  ip link set "${veth}" master "${LAN_BRIDGE}" up
  nsenter --target "${h}" --net -- sh -ec "
    [ \"\$(readlink /proc/self/ns/net)\" != '$(readlink /proc/self/ns/net)' ] || { echo 'in the host network namespace' >&2; exit 1; }
    ip link set lo up
    ip addr add $(machine_ip "${m}")/${LAN_PREFIX} dev eth0
    ip link set eth0 up
    ip route add default via ${LAN_GATEWAY}
    sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1"
}

# ---------------------------------------------------------------- mounts

# mountpoints_make: the mount points of BINDS and /opt/cni/bin missing on
# the host, made (and listed in MOUNTPOINTS, deepest last) so that the
# machines can mount on them.
mountpoints_make() {
  local b p missing=()
  for b in "${BINDS[@]}" "x:${CNI_BIN_PATH}"; do
    p=${b#*:}
    while [ ! -e "${p}" ]; do
      missing=("${p}" "${missing[@]}")
      p=$(dirname "${p}")
    done
  done
  for p in "${missing[@]}"; do
    [ -e "${p}" ] && continue
    mkdir "${p}"
    echo "${p}" >>"${MOUNTPOINTS}"
    log "made mount point ${p} on the host"
  done
}

# mountpoints_remove: those MOUNTPOINTS lists, deepest first, if empty.
mountpoints_remove() {
  local p
  [ -f "${MOUNTPOINTS}" ] || return 0
  while IFS= read -r p; do
    [ -n "${p}" ] || continue
    if mountpoint -q "${p}" || ! rmdir "${p}" 2>/dev/null; then
      [ ! -e "${p}" ] || warn "mount point ${p} kept (not empty)"
    fi
  done < <(tac "${MOUNTPOINTS}" | awk '!seen[$0]++')
  rm -f "${MOUNTPOINTS}"
}

# setup_mounts mN HOST-MNT: run in the machine's mount and network
# namespaces (nsenter, through `machines.sh _mounts mN HOST-MNT`); refuses
# to run in the host's mount namespace, HOST-MNT.
setup_mounts() {
  local m=$1 d b p
  d=$(mdir "${m}")
  [ "$(readlink /proc/self/ns/mnt)" != "$2" ] || fail "_mounts: in the host's mount namespace"
  # The namespace began as a copy of every mount of the host's (all
  # private here: PID 1 is not systemd, which would make them shared, so
  # --propagation slave gives no propagation either way). The copies
  # under the paths the machine gets its own of (the host's containerd's
  # and kubelet's: container root filesystems, sandbox network namespaces
  # and /dev/shm under /run, pod volumes under /var/lib/kubelet) are
  # detached here, deepest first, so that the machine does not hold them
  # after the host has unmounted its own (an unmount in this namespace
  # does not reach the host's). A copy that another covers (the host's
  # kubelet binds /var/lib/kubelet on itself after mounting under it)
  # cannot be reached by its path until the covering one has gone: hence
  # rounds, until one detaches nothing.
  local prefixes=(/run "${CNI_BIN_PATH}") mps mp detached
  for b in "${BINDS[@]}"; do
    prefixes+=("${b#*:}")
  done
  while :; do
    mps=$(awk '{print $5}' /proc/self/mountinfo | while IFS= read -r mp; do
      mp=$(printf '%b' "${mp}")
      for p in "${prefixes[@]}"; do
        case "${mp}" in "${p}" | "${p}"/*) printf '%s %s\n' "${#mp}" "${mp}" && break ;; esac
      done
    done | sort -rn -k1,1 | cut -d' ' -f2-)
    [ -n "${mps}" ] || break
    detached=0
    while IFS= read -r mp; do
      ! umount -l "${mp}" 2>/dev/null || detached=$((detached + 1))
    done <<<"${mps}"
    if [ "${detached}" = 0 ]; then
      warn "${m}: host mounts left in the machine: ${mps//$'\n'/ }"
      break
    fi
  done
  mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
  for b in "${BINDS[@]}"; do
    mount --bind "${d}/${b%%:*}" "${b#*:}"
  done
  for p in "${SHARED_PATHS[@]}"; do
    mount --make-shared "${p}"
  done
  mount -o bind,ro "${RUNTIME_BIN_DIR}/cni" "${CNI_BIN_PATH}"
  # A sysfs mounted here shows this network namespace's devices. It
  # covers the host's /sys, and with it the cgroup mounts under
  # /sys/fs/cgroup, which could not be reached again: they are moved
  # aside first, then back under the new sysfs.
  mkdir /run/host-cgroup
  mount --move /sys/fs/cgroup /run/host-cgroup
  mount -t sysfs sysfs /sys
  mount --move /run/host-cgroup /sys/fs/cgroup
  rmdir /run/host-cgroup
}

# ------------------------------------------------------------ containerd

# render_containerd mN: the machine's containerd config (crivk_render,
# with the machine's paths).
render_containerd() {
  local d
  d=$(mdir "$1")
  # crivk_render reads these (bash's dynamic scope).
  # shellcheck disable=SC2034
  local CONTAINERD_ROOT=${M_ROOT} CONTAINERD_STATE=${M_STATE} CONTAINERD_SOCK=${M_SOCK}
  local RUNC_ROOT=${M_STATE}/runc CNI_BIN_DIR=${CNI_BIN_PATH} CNI_CONF_DIR=/etc/cni/net.d
  local CNI_DATA_DIR=/var/lib/cni/networks CONTAINERD_HOSTS_DIR=/etc/containerd/certs.d
  local REGISTRY_HOST="" REGISTRY_MIRROR=0
  crivk_render config >"${d}/etc-containerd/config.toml.new"
  mv -f "${d}/etc-containerd/config.toml.new" "${d}/etc-containerd/config.toml"
}

# containerd_pid mN HOLDER: the machine's containerd's PID in the
# machine's PID namespace, if it runs.
containerd_pid() {
  # shellcheck disable=SC2016 # the child's $0, $1 and ${p}
  in_machine "$1" "$2" sh -c '
    p=$(cat "$0" 2>/dev/null) || exit 0
    [ "$(readlink "/proc/${p}/exe")" = "$1" ] && echo "${p}"; exit 0' \
    "${M_PIDFILE}" "${RUNTIME_BIN_DIR}/containerd"
}

containerd_up() {
  local m=$1 h=$2 ready=false
  printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 30\n' "${M_SOCK}" "${M_SOCK}" \
    >"$(mdir "${m}")/etc-containerd/${M_CRICTL_CONFIG##*/}"
  if [ -n "$(containerd_pid "${m}" "${h}")" ]; then
    log "${m}: containerd already runs"
    return 0
  fi
  render_containerd "${m}"
  # setsid -f: containerd's parent exits at once, so it is re-parented to
  # the holder, and nsenter returns.
  # shellcheck disable=SC2016 # $0, $1 and $@ are the child's
  in_machine "${m}" "${h}" setsid -f sh -c 'p=$0 l=$1; shift; mkdir -p "${p%/*}" && echo $$ >"$p" && exec "$@" >>"$l" 2>&1 </dev/null' \
    "${M_PIDFILE}" "${M_LOG}" containerd --config "${M_CONFIG}"
  for _ in $(seq 1 150); do
    if in_machine "${m}" "${h}" crictl info -o go-template --template '{{range .status.conditions}}{{.type}}={{.status}} {{end}}' 2>/dev/null |
      grep -q 'RuntimeReady=true'; then
      ready=true
      break
    fi
    sleep 0.2
  done
  [ "${ready}" = true ] || {
    tail -20 "$(mdir "${m}")/log/containerd.log" >&2
    fail "${m}: containerd is not ready"
  }
  log "${m}: containerd $(in_machine "${m}" "${h}" containerd --version | awk '{print $3}') up (pid $(containerd_pid "${m}" "${h}") in ${m})"
  # ctr warns on each call that cgroup v1 is deprecated (the host's).
  in_machine "${m}" "${h}" "${ROOT}/hack/images.sh" "${M_SOCK}" 2> >(grep -v 'support for cgroup v1 is deprecated' >&2) |
    sed "s/^/  ${m}: /"
}

# ----------------------------------------------------------- node agent

# agent_pid mN HOLDER: the PID (in the machine) of mN's node agent, if it
# runs: the recorded process runs our kubelet or crivk.
agent_pid() {
  # shellcheck disable=SC2016 # the child's $0, $1, $2 and ${p}
  in_machine "$1" "$2" sh -c '
    p=$(cat "$0" 2>/dev/null) || exit 0
    e=$(readlink "/proc/${p}/exe") || exit 0
    case "${e}" in "$1" | "$1 (deleted)" | "$2" | "$2 (deleted)") echo "${p}" ;; esac; exit 0' \
    "${M_AGENT_PIDFILE}" "${BIN_DIR}/kubelet" "${BIN_DIR}/crivk"
}

# agent mN kubelet|crivk ARG...: starts mN's node agent (the header says
# how). Written for #45 phase 2; not run yet.
agent() {
  local m=$1 kind=$2 h d dir script pid
  shift 2
  case "${kind}" in
    kubelet) script=run-kubelet.sh dir=/var/lib/kubelet ;;
    crivk) script=run-crivk.sh dir=/var/lib/crivk ;;
    *) usage ;;
  esac
  valid_machine "${m}" || fail "no machine '${m}'"
  h=$(holder_pid "${m}")
  [ -n "${h}" ] || fail "${m} is not up"
  d=$(mdir "${m}")
  if [ ! -f "${LOCAL_DIR}/env" ] || [ ! -s "${PKI_DIR}/ca.key" ]; then
    fail "no cluster: run MACHINES=N hack/local-up.sh first"
  fi
  pid=$(agent_pid "${m}" "${h}")
  [ -z "${pid}" ] || fail "${m}: a node agent already runs (pid ${pid} in ${m})"
  [ -x "${BIN_DIR}/${kind}" ] || fail "no ${BIN_DIR}/${kind}: hack/build-kube.sh kubelet or hack/build.sh"
  # The API server does not verify it (no --kubelet-certificate-authority),
  # but it names the node as a client that verifies would ask.
  cert "node-serving-${m}" "/O=system:nodes/CN=system:node:${m}" serverAuth "DNS:${m}, IP:$(machine_ip "${m}")"
  {
    echo "# Written by hack/machines.sh agent: node ${m}'s settings, sourced by"
    echo "# hack/${script} after the cluster's env (AGENT_ENV)."
    printf '%s=%q\n' NODE_NAME "${m}" NODE_IP "$(machine_ip "${m}")" CRI_ENDPOINT "unix://${M_SOCK}" \
      NODE_SERVING_CERT "${PKI_DIR}/node-serving-${m}.crt" NODE_SERVING_KEY "${PKI_DIR}/node-serving-${m}.key" \
      AGENT_DIR "${dir}" AGENT_POD_LOGS_DIR /var/log/pods AGENT_CGROUP_ROOT "${CGROUP_PARENT}/${m}" \
      AGENT_CLUSTER_DNS "${CLUSTER_DNS}" AGENT_CLUSTER_DOMAIN "${CLUSTER_DOMAIN}" \
      AGENT_NODE_LABELS "${NETWORK_OWNER_LABEL}"
  } >"${d}/agent.env"
  # As containerd_up starts containerd: setsid -f, so the agent is
  # re-parented to the holder; the script execs the agent, whose PID the
  # shell wrote.
  # shellcheck disable=SC2016 # $0, $1 and $@ are the child's
  in_machine "${m}" "${h}" setsid -f sh -c 'p=$0 l=$1; shift; echo $$ >"$p" && exec "$@" >>"$l" 2>&1 </dev/null' \
    "${M_AGENT_PIDFILE}" "/var/log/${kind}.log" env AGENT_ENV="${d}/agent.env" "${ROOT}/hack/${script}" "$@"
  for _ in $(seq 1 50); do
    pid=$(agent_pid "${m}" "${h}")
    [ -z "${pid}" ] || break
    sleep 0.2
  done
  if [ -z "${pid}" ]; then
    tail -20 "${d}/log/${kind}.log" >&2
    fail "${m}: ${kind} did not start"
  fi
  log "${m}: ${kind} started (pid ${pid} in ${m}; log ${d}/log/${kind}.log)"
}

# routes: a host route to each Node's podCIDR via its InternalIP, when that
# is a machine's address. Written for #45 phase 3; not run yet.
routes() {
  local cidr ip n=0
  [ -f "${LOCAL_DIR}/admin.kubeconfig" ] || fail "no cluster: run MACHINES=N hack/local-up.sh first"
  "${ROOT}/hack/build-kube.sh" kubectl >/dev/null
  while read -r cidr ip; do
    if [ -z "${cidr}" ] || [ -z "${ip}" ]; then continue; fi
    case "${ip}" in "${LAN_GATEWAY%.*}".*) ;; *) continue ;; esac
    ip route replace "${cidr}" via "${ip}" dev "${LAN_BRIDGE}"
    log "route ${cidr} via ${ip}"
    n=$((n + 1))
  done < <("${BIN_DIR}/kubectl" --kubeconfig "${LOCAL_DIR}/admin.kubeconfig" get nodes \
    -o jsonpath='{range .items[*]}{.spec.podCIDR}{" "}{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}')
  log "${n} route(s) to the nodes' pod subnets"
}

# ------------------------------------------------------------- up, down

machine_up() {
  local m=$1 d h u b
  d=$(mdir "${m}")
  h=$(holder_pid "${m}")
  if [ -n "${h}" ] && [ -f "${d}/ready" ]; then
    log "${m}: up (holder ${h})"
    containerd_up "${m}" "${h}"
    return 0
  fi
  if [ -n "${h}" ]; then
    log "${m}: holder ${h} left half set up: stopping it"
    machine_down "${m}"
  fi
  machine_clean "${m}"
  mkdir -p "${d}"
  for b in "${BINDS[@]}"; do
    mkdir -p "${d}/${b%%:*}"
  done
  cgroup_make "${CGROUP_PARENT}/${m}/system"
  rm -f "${d}/unshare.pid"
  setsid "${SELF}" _holder "${m}" >>"${d}/log/machine-init.log" 2>&1 </dev/null 9>&- &
  for _ in $(seq 1 100); do
    u=$(cat "${d}/unshare.pid" 2>/dev/null || true)
    if [ -n "${u}" ]; then
      h=$(awk '{print $1}' "/proc/${u}/task/${u}/children" 2>/dev/null || true)
      [ -z "${h}" ] || ! is_holder "${m}" "${h}" || break
    fi
    h=
    sleep 0.1
  done
  [ -n "${h}" ] || fail "${m}: no holder after 10 s (see ${d}/log/machine-init.log)"
  echo "${h}" >"${d}/pid"
  log "${m}: holder ${h} (unshare ${u})"
  # With --pid too: mount reads /proc/self, which the machine's /proc has
  # only for its own processes.
  nsenter --target "${h}" --mount --net --pid -- "${SELF}" _mounts "${m}" "$(readlink /proc/self/ns/mnt)"
  nsenter --target "${h}" --uts -- hostname "${m}"
  machine_network "${m}" "${h}"
  touch "${d}/ready"
  log "${m}: hostname $(in_machine "${m}" "${h}" hostname), eth0 $(machine_ip "${m}")/${LAN_PREFIX} on ${LAN_BRIDGE}"
  containerd_up "${m}" "${h}"
}

# holder_main mN: started by up under setsid; joins the machine's cgroup,
# records its PID and becomes unshare, whose child is the holder.
holder_main() {
  local m=$1 d
  d=$(mdir "${m}")
  cgroup_join "${CGROUP_PARENT}/${m}/system" "$$"
  echo "$$" >"${d}/unshare.pid"
  exec unshare --net --mount --uts --pid --fork --mount-proc --propagation slave --kill-child -- \
    "${MACHINE_INIT}" -name "${m}"
}

# machine_down mN: removes the machine's pods, stops the holder (and so
# every process of the machine), then removes its cgroups, veth and state
# (not its log).
machine_down() {
  local m=$1 h pods
  d=$(mdir "${m}")
  h=$(holder_pid "${m}")
  if [ -n "${h}" ]; then
    if [ -n "$(containerd_pid "${m}" "${h}")" ]; then
      pods=$(in_machine "${m}" "${h}" crictl pods -q 2>/dev/null) || true
      if [ -n "${pods}" ]; then
        log "${m}: removing $(wc -l <<<"${pods}") pod sandbox(es)"
        # shellcheck disable=SC2086 # word splitting intended
        in_machine "${m}" "${h}" crictl stopp ${pods} >/dev/null || warn "${m}: crictl stopp failed"
        # shellcheck disable=SC2086
        in_machine "${m}" "${h}" crictl rmp -f ${pods} >/dev/null || warn "${m}: crictl rmp failed"
      fi
    fi
    # machine-init sends SIGTERM to every process of the machine and
    # exits once they have (or after its grace, 5 s); the kernel kills
    # the rest with it.
    stop_pids "${m} (holder)" "${h}"
  fi
  machine_clean "${m}"
}

# machine_clean mN: what a machine leaves once its holder is gone.
machine_clean() {
  local m=$1 d left b
  d=$(mdir "${m}")
  # The holder's parent, unshare, exits once the holder has.
  for _ in $(seq 1 50); do
    left=$(cgroup_pids "${CGROUP_PARENT}/${m}")
    [ -n "${left}" ] || break
    sleep 0.1
  done
  if [ -n "${left}" ]; then
    fail "${m}: processes still in ${CGROUP_PARENT}/${m}: ${left//$'\n'/ }"
  fi
  cgroup_remove "${CGROUP_PARENT}/${m}"
  if ip link show "crivk-${m}" >/dev/null 2>&1; then
    ip link delete "crivk-${m}" && log "${m}: veth crivk-${m} deleted"
  fi
  [ -d "${d}" ] || return 0
  for b in "${BINDS[@]}"; do
    [ "${b%%:*}" = log ] || rm -rf "${d:?}/${b%%:*}"
  done
  rm -f "${d}/pid" "${d}/unshare.pid" "${d}/ready" "${d}/agent.env"
}

up() {
  local n=$1 i b
  if ! [[ ${n} =~ ^[1-9][0-9]*$ ]] || [ "${n}" -gt "${MAX_MACHINES}" ]; then
    fail "up N: N from 1 to ${MAX_MACHINES}, not '${n}'"
  fi
  for b in containerd containerd-shim-runc-v2 ctr runc cni/bridge cni/host-local cni/loopback cni/portmap; do
    if [ ! -x "${RUNTIME_BIN_DIR}/${b}" ]; then
      nice -n 19 ionice -c3 "${ROOT}/hack/build-runtime.sh"
      break
    fi
  done
  nice -n 19 ionice -c3 "${ROOT}/hack/build-crictl.sh" >/dev/null
  (cd "${ROOT}/hack/tools" && nice -n 19 ionice -c3 env CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${MACHINE_INIT}.new" ./cmd/machine-init)
  # A machine's holder keeps running the old file: replaced, not rewritten.
  if cmp -s "${MACHINE_INIT}.new" "${MACHINE_INIT}"; then
    rm -f "${MACHINE_INIT}.new"
  else
    mv -f "${MACHINE_INIT}.new" "${MACHINE_INIT}"
  fi
  [ -x "${BIN_DIR}/crivk" ] || nice -n 19 ionice -c3 "${ROOT}/hack/build.sh"
  mkdir -p "${MACHINES_DIR}"
  mountpoints_make
  lan_up
  for ((i = 1; i <= n; i++)); do
    machine_up "m${i}"
  done
  log "up: $(for ((i = 1; i <= n; i++)); do printf 'm%d %s  ' "${i}" "$(machine_ip "m${i}")"; done)"
}

down() {
  local d m h
  for d in "${MACHINES_DIR}"/m*/; do
    [ -d "${d}" ] || continue
    m=$(basename "${d}")
    valid_machine "${m}" || continue
    machine_down "${m}"
  done
  while read -r m h; do
    [ -n "${m}" ] || continue
    warn "holder ${h} of ${m} was not recorded: stopping it"
    stop_pids "${m} (holder)" "${h}"
    machine_clean "${m}"
  done < <(stray_holders)
  if ip link show "${LAN_BRIDGE}" >/dev/null 2>&1; then
    ip link delete "${LAN_BRIDGE}" && log "bridge ${LAN_BRIDGE} deleted"
  fi
  [ -n "$(cgroup_pids "${CGROUP_PARENT}")" ] || cgroup_remove "${CGROUP_PARENT}"
  mountpoints_remove
  log "down; logs kept in ${MACHINES_DIR}/m*/log"
}

status() {
  local d m h c a
  if ip -4 -o addr show dev "${LAN_BRIDGE}" >/dev/null 2>&1; then
    echo "${LAN_BRIDGE}: $(ip -4 -o addr show dev "${LAN_BRIDGE}" | awk '{print $4}'), ports: $(ip -o link show master "${LAN_BRIDGE}" | awk -F': ' '{print $2}' | sed 's/@.*//' | tr '\n' ' ')"
  else
    echo "${LAN_BRIDGE}: none"
  fi
  for d in "${MACHINES_DIR}"/m*/; do
    [ -d "${d}" ] || continue
    m=$(basename "${d}")
    valid_machine "${m}" || continue
    h=$(holder_pid "${m}")
    if [ -z "${h}" ]; then
      echo "${m}: down"
      continue
    fi
    c=$(in_machine "${m}" "${h}" crictl version 2>/dev/null | awk '/RuntimeVersion/ {print $2}') || true
    a=$(agent_pid "${m}" "${h}")
    [ -z "${a}" ] || a="$(in_machine "${m}" "${h}" cat "/proc/${a}/comm" 2>/dev/null) (pid ${a})"
    echo "${m}: holder ${h}, hostname $(in_machine "${m}" "${h}" hostname), eth0 $(in_machine "${m}" "${h}" ip -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}'), containerd ${c:-not running}, agent ${a:-none}$([ -f "${d}/ready" ] || echo ', NOT READY')"
  done
}

main() {
  [ $# -gt 0 ] || usage
  local cmd=$1
  shift
  [ "$(id -u)" = 0 ] || fail "run as root"
  case "${cmd}" in
    up | down)
      mkdir -p "${MACHINES_DIR}"
      exec 9>"${MACHINES_DIR}/.lock"
      flock -n 9 || fail "another hack/machines.sh up or down runs"
      if [ "${cmd}" = up ]; then
        [ $# = 1 ] || usage
        up "$1"
      else
        [ $# = 0 ] || usage
        down
      fi
      ;;
    exec)
      [ $# -ge 2 ] || usage
      valid_machine "$1" || fail "no machine '$1'"
      local h
      h=$(holder_pid "$1")
      [ -n "${h}" ] || fail "$1 is not up"
      local m=$1
      shift
      in_machine "${m}" "${h}" "$@"
      ;;
    status) status ;;
    agent)
      [ $# -ge 2 ] || usage
      agent "$@"
      ;;
    routes)
      [ $# = 0 ] || usage
      routes
      ;;
    _holder) holder_main "$1" ;;
    _mounts) setup_mounts "$1" "$2" ;;
    *) usage ;;
  esac
}

main "$@"
