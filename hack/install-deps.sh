#!/usr/bin/env bash
# Installs the Debian packages the local test environment needs (container
# runtime, CNI plugins, etcd, openssl, a static busybox and gcc for the test
# images, curl for health checks). Idempotent: installs only what is missing
# and does nothing when everything is present.
#
# Usage: [CONFORMANCE_IMAGES=1] hack/install-deps.sh [runtime-build|vm]   (as root)
#   CONFORMANCE_IMAGES=1 also installs debootstrap, which hack/images.sh uses
#   for the conformance images' Debian root filesystem.
#   runtime-build: instead, only what hack/build-runtime.sh needs to compile
#   runc with seccomp: gcc, libc6-dev, pkg-config and libseccomp-dev (whose
#   libseccomp.a links runc statically).
#   vm: instead, only what hack/vm.sh needs on the host for the cgroup v2
#   guest: QEMU, debootstrap (the guest's root), e2fsprogs (mkfs.ext4 -d),
#   the OpenSSH client (its command channel) and iproute2 (its bridge and tap).
#   The guest's kernel is a package of the guest's root, not of the host.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

# curl is used by hack/local-up.sh to probe etcd and the API server's /readyz
# with the admin client certificate (kubectl is not built here, and
# `openssl s_client` cannot easily report an HTTP status).
case "${1:-}" in
  "")
    packages=(
      containerd runc containernetworking-plugins iptables
      etcd-server openssl busybox-static gcc libc6-dev iproute2 curl
    )
    # The local image registry (REGISTRY=1: make test) and the mirror of
    # registry.k8s.io (REGISTRY_MIRROR=1: hack/node-conformance.sh).
    if [ "${REGISTRY:-0}" = 1 ] || [ "${REGISTRY_MIRROR:-0}" = 1 ]; then
      packages+=(docker-registry)
    fi
    if [ "${CONFORMANCE_IMAGES:-0}" = 1 ]; then
      packages+=(debootstrap)
    fi
    ;;
  runtime-build)
    packages=(gcc libc6-dev pkg-config libseccomp-dev)
    ;;
  vm)
    packages=(qemu-system-x86 debootstrap e2fsprogs openssh-client iproute2)
    ;;
  *)
    echo "usage: hack/install-deps.sh [runtime-build|vm]" >&2
    exit 2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg -s "${p}" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("${p}")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: must run as root" >&2
  exit 1
fi
# Another apt or dpkg (unattended-upgrades on a fresh machine, a script of
# another checkout) may hold dpkg's lock: wait for it rather than fail. A
# package that looked missing while that dpkg ran (its status file half
# written) is found installed then, and nothing is done for it.
lock_wait=(-o DPkg::Lock::Timeout=900)
apt-get "${lock_wait[@]}" update
# No package may start its own service (docker-registry would take port
# 5000 with its default configuration): local-up starts what it needs.
policy=/usr/sbin/policy-rc.d
own_policy=false
if [ ! -e "${policy}" ]; then
  printf '#!/bin/sh\nexit 101\n' >"${policy}"
  chmod 0755 "${policy}"
  own_policy=true
fi
rc=0
DEBIAN_FRONTEND=noninteractive apt-get "${lock_wait[@]}" install -y --no-install-recommends "${missing[@]}" || rc=$?
[ "${own_policy}" = false ] || rm -f "${policy}"
[ "${rc}" -eq 0 ] || exit "${rc}"
echo "install-deps: done"
