#!/bin/bash
# Runs in the cgroup v2 guest (installed as /usr/local/sbin/crivk-vm-smoke;
# `hack/vm.sh smoke` runs it over ssh). Checks that the guest is the cgroup v2
# machine the lane needs, then, when hack/build-runtime.sh's runtime was
# installed by hack/vm.sh build, starts containerd 2 with the cgroupfs driver
# and runs one pod through crictl: a busybox container with a memory and a
# CPU limit that prints its cgroup and limits and gets an address from the
# CNI bridge. Stops the pod and containerd again. Prints "ok:" or "FAIL:" per
# check and each step's time; exits 1 when a check failed.
set -o errexit -o nounset -o pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

fail=0
ok() { echo "ok: $*"; }
bad() {
  echo "FAIL: $*"
  fail=1
}
# check WHAT COMMAND...: ok or FAIL for WHAT by COMMAND's status.
check() {
  local what=$1
  shift
  if "$@"; then ok "${what}"; else bad "${what}"; fi
}
ms() { date +%s%3N; }

# --- cgroup v2 ----------------------------------------------------------------
check "/proc/self/cgroup is $(cat /proc/self/cgroup)" [ "$(cat /proc/self/cgroup)" = "0::/" ]
check "/sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup)" [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]
controllers=$(cat /sys/fs/cgroup/cgroup.controllers)
for c in cpu memory pids io cpuset; do
  check "controller ${c} available (${controllers})" grep -qw "${c}" /sys/fs/cgroup/cgroup.controllers
  check "controller ${c} enabled for the root's children" grep -qw "${c}" /sys/fs/cgroup/cgroup.subtree_control
done
for p in cpu memory io; do
  check "/proc/pressure/${p}: $(head -n 1 "/proc/pressure/${p}" 2>&1)" [ -r "/proc/pressure/${p}" ]
done
check "no cgroup v1 hierarchy mounted" [ -z "$(awk '$3 == "cgroup"' /proc/mounts)" ]

# --- containerd 2 with the cgroupfs driver -------------------------------------
if ! command -v containerd >/dev/null; then
  echo "skip: no containerd in the guest (hack/build-runtime.sh, then hack/vm.sh build)"
  exit "${fail}"
fi

dir=$(mktemp -d /tmp/smoke.XXXXXX)
cpid=
pod=
cleanup() {
  if [ -n "${pod}" ]; then
    crictl stopp "${pod}" >/dev/null 2>&1 || true
    crictl rmp "${pod}" >/dev/null 2>&1 || true
  fi
  if [ -n "${cpid}" ]; then
    kill -TERM "${cpid}" 2>/dev/null || true
    wait "${cpid}" 2>/dev/null || true
  fi
  rm -rf "${dir}"
}
trap cleanup EXIT

t0=$(ms)
setsid containerd --config /etc/containerd/config.toml >/var/log/containerd.log 2>&1 </dev/null &
cpid=$!
until ctr version >/dev/null 2>&1; do
  kill -0 "${cpid}" 2>/dev/null || {
    tail -n 20 /var/log/containerd.log
    bad "containerd exited"
    exit 1
  }
  [ $(($(ms) - t0)) -lt 180000 ] || {
    bad "containerd not answering after 180 s"
    exit 1
  }
  sleep 0.5
done
ok "containerd answers after $(($(ms) - t0)) ms: $(ctr version | awk '/Server:/ {s=1} s && /Version:/ {print $2; exit}')"
deprecations=$(ctr deprecations list 2>&1)
check "ctr deprecations list names no cgroup v1 (${deprecations:-none})" \
  bash -c '! grep -qi cgroup <<<"$1"' _ "${deprecations}"
for tar in /opt/crivk-vm/images/*.tar; do
  [ -f "${tar}" ] || continue
  ctr -n k8s.io images import "${tar}" >/dev/null
done
driver=$(crictl runtime-config 2>/dev/null | sed -n 's/^cgroup driver: *//p')
check "crictl runtime-config: cgroup driver ${driver}" [ "${driver}" = CGROUPFS ]
if ! crictl inspecti registry.k8s.io/pause:3.10.2 >/dev/null 2>&1 ||
  ! crictl inspecti registry.k8s.io/e2e-test-images/busybox:1.37.0-2 >/dev/null 2>&1; then
  echo "skip: pause and busybox images not in the guest (hack/images.sh, then hack/vm.sh build)"
  exit "${fail}"
fi

cat >"${dir}/pod.json" <<EOF
{"metadata": {"name": "smoke", "namespace": "default", "uid": "smoke-uid", "attempt": 0},
 "log_directory": "${dir}/logs",
 "linux": {"cgroup_parent": "/kubepods/burstable/podsmoke-uid"}}
EOF
cat >"${dir}/ctr.json" <<'EOF'
{"metadata": {"name": "bb"},
 "image": {"image": "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"},
 "command": ["sh", "-c", "echo cgroup=$(cat /proc/self/cgroup); echo memory.max=$(cat /sys/fs/cgroup/memory.max); echo cpu.max=$(cat /sys/fs/cgroup/cpu.max); echo ip=$(ip -4 -o addr show eth0 | awk '{print $4}'); echo done; sleep 3600"],
 "log_path": "bb.log",
 "linux": {"resources": {"memory_limit_in_bytes": 67108864, "cpu_period": 100000, "cpu_quota": 50000}}}
EOF
t0=$(ms)
pod=$(crictl runp "${dir}/pod.json")
t1=$(ms)
ctr=$(crictl create "${pod}" "${dir}/ctr.json" "${dir}/pod.json")
crictl start "${ctr}" >/dev/null
t2=$(ms)
ok "RunPodSandbox $((t1 - t0)) ms, CreateContainer+StartContainer $((t2 - t1)) ms"
log=${dir}/logs/bb.log
for _ in $(seq 120); do
  grep -q 'stdout F done' "${log}" 2>/dev/null && break
  sleep 0.5
done
out=$(sed -n 's/^[^ ]* stdout F //p' "${log}" 2>/dev/null)
val() { sed -n "s/^$1=//p" <<<"${out}"; }
check "container's /proc/self/cgroup: $(val cgroup)" [ "$(val cgroup)" = "0::/" ]
check "container's memory.max: $(val memory.max)" [ "$(val memory.max)" = 67108864 ]
check "container's cpu.max: $(val cpu.max)" [ "$(val cpu.max)" = "50000 100000" ]
check "container's address from the CNI bridge: $(val ip)" bash -c '[[ $1 == 10.93.0.* ]]' _ "$(val ip)"
podcg=/sys/fs/cgroup/kubepods/burstable/podsmoke-uid
check "pod cgroup ${podcg} has memory.pressure: $(head -n 1 "${podcg}/memory.pressure" 2>&1)" \
  [ -r "${podcg}/memory.pressure" ]
check "container cgroup ${podcg}/${ctr:0:12}... memory.max $(cat "${podcg}/${ctr}/memory.max" 2>&1)" \
  [ "$(cat "${podcg}/${ctr}/memory.max" 2>&1)" = 67108864 ]
t0=$(ms)
crictl stopp "${pod}" >/dev/null
crictl rmp "${pod}" >/dev/null
pod=
ok "StopPodSandbox+RemovePodSandbox $(($(ms) - t0)) ms"
exit "${fail}"
