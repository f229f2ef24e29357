#!/usr/bin/env bash
# Builds the extra images the conformance specs use and imports them into
# the containerd at the given socket. For now agnhost:2.59 on the busybox
# root filesystem, with what the upstream Dockerfile adds (/agnhost-2,
# /uploads, /localhost.crt+key, user-defined-in-image uid 1000 in group
# group-defined-in-image gid 50000). The Debian tools of the upstream image
# (netcat-openbsd with UDP, curl, dig, iproute2, bash) are not in it yet:
# the specs that need them fail for every agent.
#
# Usage: hack/conformance-images.sh CONTAINERD_SOCKET
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SOCK=${1:?usage: hack/conformance-images.sh CONTAINERD_SOCKET}
OUT=${ROOT}/_output/images
BIN=${ROOT}/_output/bin
AGNHOST_IMAGE=registry.k8s.io/e2e-test-images/agnhost:2.59
KUBE_SRC=$(cd "${ROOT}/hack/tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
log() { echo "conformance-images: $*"; }

"${ROOT}/hack/build-e2e.sh"
"${ROOT}/hack/images.sh" "${SOCK}" >/dev/null   # busybox rootfs, pause, mkimage
tar=${OUT}/agnhost.tar
if [ ! -f "${tar}" ] || [ "${BIN}/agnhost" -nt "${tar}" ] || [ "${BASH_SOURCE[0]}" -nt "${tar}" ]; then
  log "building ${AGNHOST_IMAGE}"
  rootfs=${OUT}/rootfs/agnhost
  rm -rf "${rootfs}"
  cp -a "${OUT}/rootfs/busybox" "${rootfs}"
  install -m 0755 "${BIN}/agnhost" "${rootfs}/agnhost"
  ln -s agnhost "${rootfs}/agnhost-2"
  mkdir -p "${rootfs}/uploads" "${rootfs}/home/user-defined-in-image"
  install -m 0644 "${KUBE_SRC}/test/images/agnhost/porter/localhost.crt" "${rootfs}/localhost.crt"
  install -m 0644 "${KUBE_SRC}/test/images/agnhost/porter/localhost.key" "${rootfs}/localhost.key"
  echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >> "${rootfs}/etc/passwd"
  printf '%s\n' 'user-defined-in-image:x:1000:' 'group-defined-in-image:x:50000:user-defined-in-image' >> "${rootfs}/etc/group"
  chown 1000:1000 "${rootfs}/home/user-defined-in-image"
  "${BIN}/mkimage" -rootfs "${rootfs}" -o "${tar}" -name "${AGNHOST_IMAGE}" \
    -entrypoint /agnhost -cmd pause -env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" >/dev/null
fi
log "importing ${AGNHOST_IMAGE}"
ctr --address "${SOCK}" -n k8s.io images import --all-platforms "${tar}" >/dev/null
