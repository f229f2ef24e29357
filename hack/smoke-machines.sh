#!/usr/bin/env bash
# A smoke test of hack/machines.sh (#45 phase 1, "A machine"), without a
# cluster: `machines.sh up 2`, then
#
#   holders     both holders run (machines.sh status), each PID 1 of its
#               machine, and `exec mN hostname` prints mN
#   lan         m1 pings m2 over crivk-lan, the host pings both
#   mounts      in m1: the machine's /run, /var/lib/*, /etc/cni/net.d,
#               /var/log and /opt/cni/bin are its own, /sys/class/net
#               shows its devices, /sys/fs/cgroup the host's hierarchies,
#               /var/lib/kubelet is shared
#   runtime     crictl in m1 talks to m1's containerd (v2.4.2, cgroupfs,
#               RuntimeReady; NetworkReady false: no conflist yet); m1's
#               containerd and m2's are two (socket, root, processes)
#   pod         a bridge/host-local conflist (10.244.1.0/24) in m1's
#               /etc/cni/net.d makes its network ready; a pod sandbox
#               (crictl runp, cgroup parent /crivk-machines/m1/pods) gets
#               an address there; m2 does not see it; m2 cannot reach it
#               until it routes 10.244.1.0/24 via m1 (what flannel host-gw
#               will do), then pings it
#
# then `machines.sh down`, after which none of it is left: no holder or
# process of a machine, no crivk-lan or crivk-mN link, no /crivk-machines
# cgroup, no machine state but the logs. Refuses to start while machines
# are up (hack/machines.sh down first). Exits non-zero when a step failed.
#
# Usage: hack/smoke-machines.sh   (as root)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
M=${ROOT}/hack/machines.sh
WORK=${ROOT}/_output/machines-smoke
POD_CIDR=10.244.1.0/24

log() { echo "smoke-machines: $*"; }
fail() {
  log "ERROR: $*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || fail "run as root"
if "${M}" status | grep -q ': holder'; then
  fail "machines are up; hack/machines.sh down first"
fi

passed=()
failed=()

# step NAME FUNCTION: as hack/smoke-containerd2.sh's.
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

# want WHAT GOT EXPECTED: fails unless GOT is EXPECTED.
want() {
  echo "  $1: $2"
  [ "$2" = "$3" ] || {
    echo "  $1: want $3" >&2
    return 1
  }
}

x() { "${M}" exec "$@"; }

holders() {
  "${M}" status | sed 's/^/  /'
  local m
  for m in m1 m2; do
    [ "$("${M}" status | grep -c "^${m}: holder")" = 1 ]
    want "${m} hostname" "$(x "${m}" hostname)" "${m}"
    want "${m} PID 1" "$(x "${m}" cat /proc/1/comm)" machine-init
  done
}

lan() {
  x m1 busybox ping -c 2 -W 2 10.91.0.12 | sed -n 's/^/  m1: /; /packets/p'
  busybox ping -c 1 -W 2 10.91.0.11 | sed -n 's/^/  host: /; /packets/p'
  busybox ping -c 1 -W 2 10.91.0.12 | sed -n 's/^/  host: /; /packets/p'
  x m1 busybox ping -c 1 -W 2 10.91.0.12 >/dev/null && busybox ping -c 1 -W 2 10.91.0.11 >/dev/null &&
    busybox ping -c 1 -W 2 10.91.0.12 >/dev/null
}

mounts() {
  local p src
  for p in /var/lib/kubelet /var/lib/crivk /var/lib/containerd /var/lib/crivk-containerd /var/lib/cni /etc/cni/net.d \
    /etc/crivk-containerd /etc/containerd /var/log; do
    src=$(x m1 findmnt -n -o SOURCE --mountpoint "${p}" | tail -1)
    echo "  ${p}: ${src}"
    case "${src}" in *"[${ROOT}/_output/machines/m1/"*) ;; *) return 1 ;; esac
  done
  want /opt/cni/bin "$(x m1 findmnt -n -o SOURCE,OPTIONS --mountpoint /opt/cni/bin | awk '{split($2, o, ","); print $1, o[1]}')" \
    "/dev/vda[${ROOT}/_output/bin/runtime/cni] ro"
  want /run "$(x m1 findmnt -n -o FSTYPE --mountpoint /run)" tmpfs
  # The host's pod volumes and container mounts (under /var/lib/kubelet
  # and /run; the count on the host is in the label) are not held in m1.
  want "host's kubelet and containerd mounts in m1 (host: $(grep -cE ' /var/lib/kubelet/| /run/' /proc/self/mountinfo))" \
    "$(x m1 sh -c "grep -E ' /var/lib/kubelet/| /run/' /proc/self/mountinfo | grep -cv ' /run/containerd/' || true")" 0
  want "/var/lib/kubelet propagation" "$(x m1 findmnt -n -o PROPAGATION --mountpoint /var/lib/kubelet | tail -1)" shared
  want "/var/lib/crivk propagation" "$(x m1 findmnt -n -o PROPAGATION --mountpoint /var/lib/crivk | tail -1)" shared
  want /sys/class/net "$(x m1 ls /sys/class/net | tr '\n' ' ')" "eth0 lo "
  want /sys/fs/cgroup "$(x m1 findmnt -n -l -o TARGET -R /sys/fs/cgroup | tr '\n' ' ')" "$(findmnt -n -l -o TARGET -R /sys/fs/cgroup | tr '\n' ' ')"
  want "m1's cgroup (memory)" "$(x m1 grep -o 'memory:.*' /proc/self/cgroup)" "memory:/crivk-machines/m1/system"
}

runtime() {
  x m1 crictl version | sed 's/^/  /'
  want "m1 runtime" "$(x m1 crictl version | awk '/RuntimeVersion/ {print $2}')" v2.4.2
  want "m1 cgroup driver" "$(x m1 crictl runtime-config | awk '/cgroup driver/ {print $3}')" CGROUPFS
  want "m1 conditions" "$(x m1 crictl info -o go-template --template '{{range .status.conditions}}{{.type}}={{.status}} {{end}}')" \
    "RuntimeReady=true NetworkReady=false ContainerdHasNoDeprecationWarnings=false "
  x m1 crictl info -o go-template --template '  lastCNILoadStatus: {{.lastCNILoadStatus}}{{"\n"}}  cni: {{.config.cni.binDirs}} {{.config.cni.confDir}}{{"\n"}}  rootDir: {{.config.rootDir}} stateDir: {{.config.stateDir}}{{"\n"}}'
  # Two containerds: each machine's socket is on its own /run (a tmpfs:
  # the device differs), its root its own directory.
  local s1 s2
  s1=$(x m1 stat -c '%d:%i' /run/containerd/containerd.sock /var/lib/containerd | tr '\n' ' ')
  s2=$(x m2 stat -c '%d:%i' /run/containerd/containerd.sock /var/lib/containerd | tr '\n' ' ')
  echo "  socket and root (device:inode): m1 ${s1}, m2 ${s2}"
  [ "${s1%% *}" != "${s2%% *}" ] && [ "${s1#* }" != "${s2#* }" ]
}

pod() {
  mkdir -p "${WORK}"
  cat >"${WORK}/10-machines-smoke.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "machines-smoke",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "${POD_CIDR}"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  x m1 cp "${WORK}/10-machines-smoke.conflist" /etc/cni/net.d/
  local ready=""
  for _ in $(seq 1 50); do
    ready=$(x m1 crictl info -o go-template --template '{{range .status.conditions}}{{if eq .type "NetworkReady"}}{{.status}}{{end}}{{end}}')
    [ "${ready}" != true ] || break
    sleep 0.2
  done
  want "m1 NetworkReady" "${ready}" true
  cat >"${WORK}/pod.json" <<EOF
{
  "metadata": {"name": "probe", "namespace": "machines-smoke", "uid": "machines-smoke-probe", "attempt": 0},
  "hostname": "probe",
  "log_directory": "/var/log/pods/machines-smoke-probe",
  "linux": {"cgroup_parent": "/crivk-machines/m1/pods"}
}
EOF
  local id ip
  id=$(x m1 crictl runp "${WORK}/pod.json")
  ip=$(x m1 crictl inspectp -o go-template --template '{{.status.network.ip}}' "${id}")
  x m1 crictl pods | sed 's/^/  m1: /'
  echo "  sandbox ${id:0:13}: ip ${ip}"
  case "${ip}" in 10.244.1.*) ;; *) return 1 ;; esac
  want "m2 sandboxes" "$(x m2 crictl pods -q | wc -l)" 0
  want "m2 processes" "$(x m2 ps -eo comm= | sort | tr '\n' ' ')" "containerd machine-init ps "
  if x m2 busybox ping -c 1 -W 2 "${ip}" >/dev/null; then
    echo "  m2 reached ${ip} without a route" >&2
    return 1
  fi
  echo "  m2 -> ${ip} without a route: no answer"
  x m2 ip route add "${POD_CIDR}" via 10.91.0.11
  echo "  m2: ip route add ${POD_CIDR} via 10.91.0.11"
  x m2 busybox ping -c 2 -W 2 "${ip}" | sed -n 's/^/  m2: /; /bytes from\|packets/p'
  x m2 busybox ping -c 1 -W 2 "${ip}" >/dev/null
}

# left: what down must have removed, printed; fails when anything is.
left() {
  local l=()
  [ -z "$(find /proc -mindepth 2 -maxdepth 2 -name exe -lname "${ROOT}/_output/bin/*" 2>/dev/null)" ] ||
    l+=("processes of ${ROOT}/_output/bin")
  ! ip link show crivk-lan >/dev/null 2>&1 || l+=("bridge crivk-lan")
  ! ip -o link show | grep -q 'crivk-m[0-9]' || l+=("veths crivk-mN")
  [ -z "$(ls -d /sys/fs/cgroup/*/crivk-machines 2>/dev/null)" ] || l+=("cgroups /crivk-machines")
  ! grep -qF "${ROOT}/_output/machines" /proc/mounts || l+=("mounts under _output/machines")
  [ -z "$(find "${ROOT}/_output/machines" -mindepth 2 -maxdepth 2 ! -name log)" ] || l+=("machine state")
  echo "  left: ${l[*]:-nothing}"
  [ "${#l[@]}" = 0 ]
}

trap '"${M}" down >/dev/null 2>&1 || true' EXIT
"${M}" up 2
step holders holders
step lan lan
step mounts mounts
step runtime runtime
step pod pod
log "--- down"
"${M}" down
trap - EXIT
step left left
rm -rf "${WORK}"

log "passed: ${passed[*]:-none}; failed: ${failed[*]:-none}"
[ "${#failed[@]}" -eq 0 ]
