#!/usr/bin/env bash
# The cgroup v2 guest (#46): a Debian 12 machine under QEMU whose kernel runs
# with the unified hierarchy alone, for what this host's cgroup v1 hybrid
# cannot show (PSI, cgroup v2 memory and io files, the kubelet's v2 paths).
# This host's /dev/kvm is a PVM host that an ordinary guest kernel cannot use,
# so QEMU emulates the CPU (TCG); docs/environment.md has the figures.
#
#   build   installs the host's packages when missing (install-deps.sh vm),
#           debootstraps a bookworm minbase root with Debian's kernel
#           (linux-image-amd64, installed into the guest's root, never on the
#           host), dropbear and tini into _output/vm/rootfs (cached: redone
#           only when the package list changes), remakes a small initrd
#           (hack/vm/initramfs-modules), installs /sbin/init-crivk and the
#           guest's other files (hack/vm/), the ssh keys, and
#           build-runtime.sh's containerd, runc and CNI plugins, crictl and
#           images.sh's pause and busybox when they are built, then makes the
#           disk _output/vm/disk.img (ext4, mkfs.ext4 -d: a fresh guest at
#           every build)
#   up      creates bridge crivk-vm0 (10.92.0.1/24) and tap crivk-vm0-tap,
#           boots the disk (guest 10.92.0.2, serial console in
#           _output/vm/console.log) and waits until ssh answers; prints the
#           boot time
#   ssh|exec [CMD...]  runs CMD in the guest as root (no CMD: a shell)
#   smoke   checks the guest's cgroup v2 (hack/vm/smoke.sh) and, with the
#           runtime built, runs containerd 2 and one pod through crictl in it
#   status  whether the VM runs and answers
#   down    powers the guest off over ssh (sync, sysrq o), or stops QEMU with
#           SIGTERM when ssh does not answer or QEMU has not exited after
#           30 s; removes the tap and the bridge
#
# Environment: VM_MEMORY (4G), VM_CPUS (2), VM_DISK_SIZE (8G), VM_ACCEL (tcg;
# kvm fails here, see docs/environment.md), VM_CPU (QEMU's -cpu, max),
# VM_NICE (19: QEMU's niceness), VM_BOOT_TIMEOUT (600 s), DEBIAN_MIRROR
# (default: apt's bookworm mirror).
# As root.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${ROOT}/_output/vm
ROOTFS=${OUT}/rootfs
DISK=${OUT}/disk.img
KERNEL=${OUT}/vmlinuz
INITRD=${OUT}/initrd.img
KEY=${OUT}/id_ed25519
HOST_KEY=${OUT}/dropbear_ed25519_host_key
KNOWN_HOSTS=${OUT}/known_hosts
PIDFILE=${OUT}/qemu.pid
CONSOLE=${OUT}/console.log
MONITOR=${OUT}/monitor.sock

SUITE=bookworm
# What a node needs beside minbase: the kernel and its modules (overlay,
# bridge, veth, netfilter are modules in Debian's kernel), kmod to load them,
# ip, iptables (the CNI plugins' masquerade), ps/free, mount, the CA
# bundle; dropbear (the command channel) and tini (PID 1 that reaps).
PACKAGES=linux-image-amd64,kmod,iproute2,iptables,ca-certificates,procps,util-linux,mount,dropbear-bin,tini

BRIDGE=crivk-vm0
TAP=crivk-vm0-tap
HOST_IP=10.92.0.1
GUEST_IP=10.92.0.2
PREFIX=24
GUEST_NAME=crivk-vm
MAC=52:54:00:0a:5c:02

VM_MEMORY=${VM_MEMORY:-4G}
VM_CPUS=${VM_CPUS:-2}
VM_DISK_SIZE=${VM_DISK_SIZE:-8G}
VM_ACCEL=${VM_ACCEL:-tcg}
VM_CPU=${VM_CPU:-max}
VM_NICE=${VM_NICE:-19}
VM_BOOT_TIMEOUT=${VM_BOOT_TIMEOUT:-600}

# The kernel command line. net.ifnames=0: the initramfs's udev would rename
# eth0 (enp0s2), which init-crivk configures. cgroup_no_v1=all leaves the
# kernel no v1 controller, so cgroup2 has them all;
# systemd.unified_cgroup_hierarchy=1 says
# the same to a systemd, should the guest ever run one (init-crivk ignores
# it); psi=1 asks for pressure stall information (Debian's kernel has it on
# by default already: CONFIG_PSI=y, CONFIG_PSI_DEFAULT_DISABLED unset).
CMDLINE=(root=/dev/vda rw init=/sbin/init-crivk console=ttyS0 panic=-1 net.ifnames=0
  systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all psi=1
  "crivk.ip=${GUEST_IP}/${PREFIX}" "crivk.gw=${HOST_IP}" "crivk.hostname=${GUEST_NAME}")

log() { echo "vm: $*"; }
die() {
  echo "vm: ERROR: $*" >&2
  exit 1
}

ssh_opts=(-F /dev/null -i "${KEY}" -o IdentitiesOnly=yes -o BatchMode=yes
  -o UserKnownHostsFile="${KNOWN_HOSTS}" -o StrictHostKeyChecking=yes
  -o ConnectTimeout=5 -o LogLevel=ERROR -o ServerAliveInterval=15)

guest() {
  # shellcheck disable=SC2029 # the command is the guest's to expand
  ssh "${ssh_opts[@]}" "root@${GUEST_IP}" "$@"
}

# qemu_pid: the recorded QEMU's PID when that process is alive and is ours
# (QEMU with our disk on its command line); nothing otherwise.
qemu_pid() {
  local pid
  pid=$(cat "${PIDFILE}" 2>/dev/null) || return 0
  [ -n "${pid}" ] && [ -r "/proc/${pid}/cmdline" ] || return 0
  if tr '\0' ' ' <"/proc/${pid}/cmdline" | grep -q "qemu-system-x86_64 .*file=${DISK},"; then
    echo "${pid}"
  fi
}

# --- build -------------------------------------------------------------------

build_rootfs() {
  local key="${SUITE} minbase ${PACKAGES}" mirror tmp=${OUT}/rootfs.new
  if [ -d "${ROOTFS}" ] && [ "$(cat "${OUT}/rootfs.inputs" 2>/dev/null)" = "${key}" ]; then
    log "rootfs up to date (${key})"
    return
  fi
  mirror=$(debian_mirror "${SUITE}")
  log "debootstrap ${SUITE} from ${mirror} into ${ROOTFS} (a few minutes; log ${OUT}/debootstrap.log)"
  rm -rf "${tmp}"
  if ! nice -n 19 ionice -c3 debootstrap --variant=minbase --include="${PACKAGES}" \
    "${SUITE}" "${tmp}" "${mirror}" >"${OUT}/debootstrap.log" 2>&1; then
    tail -n 20 "${OUT}/debootstrap.log" >&2
    die "debootstrap failed"
  fi
  # The package cache, indexes and documentation are not needed in the guest.
  rm -rf "${tmp:?}"/var/cache/apt/archives/*.deb "${tmp:?}"/var/cache/apt/*.bin \
    "${tmp:?}"/var/lib/apt/lists/* "${tmp:?}"/usr/share/doc/* "${tmp:?}"/usr/share/man/* \
    "${tmp:?}"/usr/share/info/* "${tmp:?}"/usr/share/locale/*
  rm -rf "${ROOTFS}" "${OUT}/initrd.inputs"
  mv "${tmp}" "${ROOTFS}"
  echo "${key}" >"${OUT}/rootfs.inputs"
}

# configure_rootfs: what is ours in the guest's root, written at every build.
configure_rootfs() {
  local v
  install -m 0755 "${ROOT}/hack/vm/init-crivk" "${ROOTFS}/sbin/init-crivk"
  echo "${GUEST_NAME}" >"${ROOTFS}/etc/hostname"
  printf '127.0.0.1\tlocalhost\n%s\t%s\n%s\thost\n' "${GUEST_IP}" "${GUEST_NAME}" "${HOST_IP}" \
    >"${ROOTFS}/etc/hosts"
  : >"${ROOTFS}/etc/resolv.conf"
  # Keys: the client's and the guest's host key are made once and kept in
  # _output/vm, so known_hosts stays valid across builds.
  [ -f "${KEY}" ] || ssh-keygen -q -t ed25519 -N '' -C "crivk-vm" -f "${KEY}"
  if [ ! -f "${HOST_KEY}" ]; then
    chroot "${ROOTFS}" dropbearkey -t ed25519 -f /tmp/host_key >/dev/null 2>&1
    mv "${ROOTFS}/tmp/host_key" "${HOST_KEY}"
  fi
  install -d -m 0755 "${ROOTFS}/etc/dropbear"
  install -m 0600 "${HOST_KEY}" "${ROOTFS}/etc/dropbear/dropbear_ed25519_host_key"
  echo "${GUEST_IP} $(chroot "${ROOTFS}" dropbearkey -y -f /etc/dropbear/dropbear_ed25519_host_key |
    grep '^ssh-ed25519' | cut -d' ' -f1-2)" >"${KNOWN_HOSTS}"
  install -d -m 0700 "${ROOTFS}/root/.ssh"
  install -m 0600 "${KEY}.pub" "${ROOTFS}/root/.ssh/authorized_keys"
  # dropbear gives a command a PATH without /usr/local; bash reads .bashrc
  # for a command run over ssh.
  printf '%s\n' 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    >"${ROOTFS}/root/.bashrc"
  printf '%s\n' '. ~/.bashrc' >"${ROOTFS}/root/.profile"
  chroot "${ROOTFS}" chsh -s /bin/bash root >/dev/null

  # The runtime of hack/build-runtime.sh and crictl (build-crictl.sh), when
  # built: containerd 2.4.2, its shim, ctr, runc in /usr/local/bin, the CNI
  # plugins in /opt/cni/bin (containerd's default bin_dirs); the pause and
  # busybox images of hack/images.sh in /opt/crivk-vm/images; the config and
  # the check that `hack/vm.sh smoke` runs.
  local rt=${ROOT}/_output/bin/runtime
  rm -rf "${ROOTFS}/opt/cni/bin" "${ROOTFS}/opt/crivk-vm"
  for v in containerd containerd-shim-runc-v2 ctr runc; do
    rm -f "${ROOTFS}/usr/local/bin/${v}"
    [ ! -x "${rt}/${v}" ] || install -m 0755 "${rt}/${v}" "${ROOTFS}/usr/local/bin/${v}"
  done
  if [ -d "${rt}/cni" ]; then
    install -d "${ROOTFS}/opt/cni/bin"
    install -m 0755 "${rt}"/cni/* "${ROOTFS}/opt/cni/bin/"
  fi
  rm -f "${ROOTFS}/usr/local/bin/crictl"
  [ ! -x "${ROOT}/_output/bin/crictl" ] || install -m 0755 "${ROOT}/_output/bin/crictl" "${ROOTFS}/usr/local/bin/crictl"
  install -d "${ROOTFS}/opt/crivk-vm/images"
  for v in pause busybox; do
    [ ! -f "${ROOT}/_output/images/${v}.tar" ] ||
      install -m 0644 "${ROOT}/_output/images/${v}.tar" "${ROOTFS}/opt/crivk-vm/images/${v}.tar"
  done
  install -D -m 0644 "${ROOT}/hack/vm/containerd.toml" "${ROOTFS}/etc/containerd/config.toml"
  install -D -m 0644 "${ROOT}/hack/vm/crictl.yaml" "${ROOTFS}/etc/crictl.yaml"
  install -D -m 0644 "${ROOT}/hack/vm/10-crivk-vm.conflist" "${ROOTFS}/etc/cni/net.d/10-crivk-vm.conflist"
  install -D -m 0755 "${ROOT}/hack/vm/smoke.sh" "${ROOTFS}/usr/local/sbin/crivk-vm-smoke"
  log "in the guest: $(cd "${ROOTFS}/usr/local/bin" && echo * | sed 's/^\*$/no runtime (hack\/build-runtime.sh, build-crictl.sh)/'); images: $(cd "${ROOTFS}/opt/crivk-vm/images" && echo * | sed 's/^\*$/none (hack\/images.sh)/')"
}

# make_initrd: the guest's initramfs with only what mounts the root (the
# virtio PCI transport, virtio-blk, ext4) instead of initramfs-tools' default
# MODULES=most: 35 MB that took 18 s to unpack under TCG and 10 s more to
# load modules for every device. The kernel package's own initrd is replaced
# in the guest's /boot; redone when the list or the kernel changes.
make_initrd() {
  local kver=$1 key
  key="${kver} $(cat "${ROOT}/hack/vm/initramfs-modules")"
  if [ "$(cat "${OUT}/initrd.inputs" 2>/dev/null)" = "${key}" ] && [ -f "${ROOTFS}/boot/initrd.img-${kver}" ]; then
    return
  fi
  echo MODULES=list >"${ROOTFS}/etc/initramfs-tools/conf.d/crivk-vm.conf"
  install -m 0644 "${ROOT}/hack/vm/initramfs-modules" "${ROOTFS}/etc/initramfs-tools/modules"
  log "update-initramfs for ${kver} (MODULES=list: $(grep -v '^#' "${ROOT}/hack/vm/initramfs-modules" | xargs))"
  nice -n 19 ionice -c3 chroot "${ROOTFS}" update-initramfs -u -k "${kver}" >"${OUT}/initramfs.log" 2>&1 || {
    cat "${OUT}/initramfs.log" >&2
    die "update-initramfs failed"
  }
  echo "${key}" >"${OUT}/initrd.inputs"
}

build() {
  [ "$(id -u)" -eq 0 ] || die "must run as root"
  [ -z "$(qemu_pid)" ] || die "the VM is running; hack/vm.sh down first"
  "${ROOT}/hack/install-deps.sh" vm
  mkdir -p "${OUT}"
  build_rootfs
  configure_rootfs
  local k i
  k=$(find "${ROOTFS}/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n 1)
  [ -n "${k}" ] || die "no kernel in ${ROOTFS}/boot"
  make_initrd "${k##*/vmlinuz-}"
  i=${ROOTFS}/boot/initrd.img-${k##*/vmlinuz-}
  [ -f "${i}" ] || die "no initrd for ${k##*/} in ${ROOTFS}/boot"
  install -m 0644 "${k}" "${KERNEL}"
  install -m 0644 "${i}" "${INITRD}"
  log "making ${DISK} (ext4, ${VM_DISK_SIZE}, from ${ROOTFS})"
  rm -f "${DISK}"
  nice -n 19 ionice -c3 mkfs.ext4 -q -F -L crivk-vm -E root_owner=0:0 -d "${ROOTFS}" "${DISK}" "${VM_DISK_SIZE}" >/dev/null
  log "built: kernel ${k##*/vmlinuz-}, root $(du -sh "${ROOTFS}" | cut -f1), disk ${DISK}"
}

# --- up / down -----------------------------------------------------------------

net_up() {
  if ! ip link show "${BRIDGE}" >/dev/null 2>&1; then
    ip link add "${BRIDGE}" type bridge
    ip addr add "${HOST_IP}/${PREFIX}" dev "${BRIDGE}"
  fi
  ip link set "${BRIDGE}" up
  if ! ip link show "${TAP}" >/dev/null 2>&1; then
    ip tuntap add dev "${TAP}" mode tap
  fi
  ip link set "${TAP}" master "${BRIDGE}" up
}

net_down() {
  ! ip link show "${TAP}" >/dev/null 2>&1 || ip link del "${TAP}"
  ! ip link show "${BRIDGE}" >/dev/null 2>&1 || ip link del "${BRIDGE}"
}

up() {
  [ "$(id -u)" -eq 0 ] || die "must run as root"
  if [ ! -f "${DISK}" ] || [ ! -f "${KERNEL}" ] || [ ! -f "${INITRD}" ]; then
    die "not built; run hack/vm.sh build"
  fi
  if [ -n "$(qemu_pid)" ]; then
    log "already running (pid $(qemu_pid))"
    return
  fi
  net_up
  : >"${CONSOLE}"
  rm -f "${PIDFILE}" "${MONITOR}"
  local t0 t1 pid
  t0=$(date +%s%3N)
  log "booting (${VM_ACCEL}, ${VM_CPUS} CPUs, ${VM_MEMORY}; console ${CONSOLE})"
  # -nodefaults: no CD-ROM, floppy, VGA or default NIC to probe at boot.
  # -cpu max: every feature TCG emulates. Multi-threaded TCG: one host
  # thread per virtual CPU. virtio-rng: the guest's entropy early at boot.
  local accel_opts=${VM_ACCEL}
  [ "${VM_ACCEL}" != tcg ] || accel_opts=tcg,thread=multi
  if ! nice -n "${VM_NICE}" ionice -c3 qemu-system-x86_64 \
    -name "${GUEST_NAME}" -nodefaults -machine q35 -accel "${accel_opts}" -cpu "${VM_CPU}" \
    -m "${VM_MEMORY}" -smp "${VM_CPUS}" \
    -kernel "${KERNEL}" -initrd "${INITRD}" -append "${CMDLINE[*]}" \
    -drive "file=${DISK},if=virtio,format=raw,discard=unmap" \
    -netdev "tap,id=net0,ifname=${TAP},script=no,downscript=no" \
    -device "virtio-net-pci,netdev=net0,mac=${MAC}" \
    -device virtio-rng-pci \
    -display none -serial "file:${CONSOLE}" \
    -monitor "unix:${MONITOR},server,nowait" \
    -no-reboot -daemonize -pidfile "${PIDFILE}"; then
    net_down
    die "qemu-system-x86_64 failed to start"
  fi
  pid=$(qemu_pid)
  log "qemu pid ${pid}; waiting for ssh on ${GUEST_IP}"
  while ! guest true 2>/dev/null; do
    if [ -z "$(qemu_pid)" ]; then
      tail -n 30 "${CONSOLE}" >&2
      net_down
      die "QEMU exited during boot (console above)"
    fi
    if [ $(($(date +%s%3N) - t0)) -gt $((VM_BOOT_TIMEOUT * 1000)) ]; then
      tail -n 30 "${CONSOLE}" >&2
      die "no ssh after ${VM_BOOT_TIMEOUT} s; hack/vm.sh down to stop it"
    fi
    sleep 1
  done
  t1=$(date +%s%3N)
  log "up: ssh answered $(((t1 - t0) / 1000)).$(((t1 - t0) % 1000 / 100)) s after QEMU started (guest uptime $(guest "cut -d' ' -f1 /proc/uptime") s; $(guest uname -r))"
}

down() {
  [ "$(id -u)" -eq 0 ] || die "must run as root"
  local pid i
  pid=$(qemu_pid)
  if [ -n "${pid}" ]; then
    if guest true 2>/dev/null; then
      log "powering off (pid ${pid})"
      # sysrq: s(ync), u (remount read-only), o(ff); the kernel powers the
      # machine off through ACPI and QEMU exits. Detached and a second
      # later, so that ssh returns first instead of waiting on a link that
      # goes away.
      # shellcheck disable=SC2016 # expanded in the guest
      timeout 20 ssh "${ssh_opts[@]}" "root@${GUEST_IP}" 'sync; setsid -f sh -c "sleep 1;
        echo s >/proc/sysrq-trigger; echo u >/proc/sysrq-trigger; echo o >/proc/sysrq-trigger" </dev/null >/dev/null 2>&1' ||
        true
      for i in $(seq 30); do
        [ -n "$(qemu_pid)" ] || break
        sleep 1
      done
    fi
    if [ -n "$(qemu_pid)" ]; then
      # QEMU quits on SIGTERM as on its monitor's quit.
      log "stopping QEMU (pid ${pid}) with SIGTERM"
      kill -TERM "${pid}" 2>/dev/null || true
      for i in $(seq 10); do
        [ -n "$(qemu_pid)" ] || break
        sleep 1
      done
      [ -z "$(qemu_pid)" ] || kill -KILL "${pid}" 2>/dev/null || true
    fi
  else
    log "not running"
  fi
  rm -f "${PIDFILE}" "${MONITOR}"
  net_down
  log "down"
}

status() {
  local pid
  pid=$(qemu_pid)
  if [ -z "${pid}" ]; then
    log "not running"
    ip link show "${BRIDGE}" >/dev/null 2>&1 && log "bridge ${BRIDGE} present (hack/vm.sh down removes it)"
    return 1
  fi
  log "running: pid ${pid}, started $(ps -o lstart= -p "${pid}")"
  if guest true 2>/dev/null; then
    # shellcheck disable=SC2016 # expanded in the guest
    log "ssh root@${GUEST_IP}: $(guest 'echo "$(uname -r), up $(cut -d" " -f1 /proc/uptime) s, load $(cut -d" " -f1-3 /proc/loadavg)"')"
  else
    log "ssh root@${GUEST_IP}: no answer (booting? console ${CONSOLE})"
  fi
}

# shellcheck source=hack/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"

cmd=${1:-}
[ $# -eq 0 ] || shift
case "${cmd}" in
  build) build ;;
  up) up ;;
  down) down ;;
  status) status ;;
  smoke)
    [ -n "$(qemu_pid)" ] || die "not running; hack/vm.sh up"
    guest crivk-vm-smoke
    ;;
  ssh | exec)
    [ -n "$(qemu_pid)" ] || die "not running; hack/vm.sh up"
    if [ $# -eq 0 ]; then
      exec ssh "${ssh_opts[@]}" -t "root@${GUEST_IP}"
    fi
    exec ssh "${ssh_opts[@]}" "root@${GUEST_IP}" "$@"
    ;;
  *)
    echo "usage: hack/vm.sh build|up|ssh [CMD...]|exec CMD...|smoke|status|down" >&2
    exit 2
    ;;
esac
