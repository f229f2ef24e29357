#!/usr/bin/env bash
# Builds the test images from local sources, with no registry, as OCI
# image-layout tarballs under _output/images/, and imports them into a
# containerd (CRI namespace k8s.io) when a socket is given:
#
#   registry.k8s.io/pause:3.10.1                      /pause from hack/images/pause.c
#   registry.k8s.io/e2e-test-images/busybox:1.37.0-1  Debian's static /bin/busybox
#   docker.io/library/busybox:latest                  (same image, second name)
#
# A tarball is rebuilt only when its inputs changed (recorded in
# _output/images/NAME.inputs); an image is imported only when containerd does
# not already have every name at the tarball's manifest digest.
#
# Usage: hack/images.sh [containerd-socket]
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SOCK=${1:-}
OUT=${ROOT}/_output/images
BIN=${ROOT}/_output/bin

PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
BUSYBOX_IMAGES=(registry.k8s.io/e2e-test-images/busybox:1.37.0-1 docker.io/library/busybox:latest)
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
BUSYBOX_BIN=/bin/busybox

umask 022
mkdir -p "${OUT}" "${BIN}"

log() { echo "images: $*"; }

# inputs_of NAME FILE...: a hash of everything an image is made from, this
# script and the mkimage tool included.
inputs_of() {
  local name=$1
  shift
  {
    echo "${name}"
    sha256sum "${BASH_SOURCE[0]}" "${ROOT}"/hack/tools/cmd/mkimage/*.go "${ROOT}/hack/tools/go.sum" "$@" | awk '{print $1}'
  } | sha256sum | awk '{print $1}'
}

mkimage_built=false
mkimage() {
  if [ "${mkimage_built}" = false ]; then
    (cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -o "${BIN}/mkimage" ./cmd/mkimage)
    mkimage_built=true
  fi
  "${BIN}/mkimage" "$@" >/dev/null
}

# fresh_rootfs NAME: an empty staging directory for an image's filesystem.
fresh_rootfs() {
  local dir=${OUT}/rootfs/$1
  rm -rf "${dir}"
  mkdir -p "${dir}"
  echo "${dir}"
}

build_pause() {
  local tar=${OUT}/pause.tar inputs
  inputs=$(inputs_of pause "${ROOT}/hack/images/pause.c" <(gcc --version))
  if [ -f "${tar}" ] && [ -f "${tar}.digest" ] && [ "$(cat "${tar}.inputs" 2>/dev/null)" = "${inputs}" ]; then
    log "pause.tar up to date"
    return
  fi
  log "building pause.tar"
  local rootfs
  rootfs=$(fresh_rootfs pause)
  gcc -static -O2 -s -Wall -o "${rootfs}/pause" "${ROOT}/hack/images/pause.c"
  chmod 0755 "${rootfs}/pause"
  mkimage -rootfs "${rootfs}" -o "${tar}" -name "${PAUSE_IMAGE}" \
    -entrypoint /pause -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${tar}.inputs"
}

build_busybox() {
  local tar=${OUT}/busybox.tar inputs
  inputs=$(inputs_of busybox "${BUSYBOX_BIN}")
  if [ -f "${tar}" ] && [ -f "${tar}.digest" ] && [ "$(cat "${tar}.inputs" 2>/dev/null)" = "${inputs}" ]; then
    log "busybox.tar up to date"
    return
  fi
  log "building busybox.tar"
  local rootfs applet
  rootfs=$(fresh_rootfs busybox)
  mkdir -p "${rootfs}"/{bin,etc,root,home,var,tmp}
  chmod 0755 "${rootfs}"/{bin,etc,home,var}
  chmod 0700 "${rootfs}/root"
  chmod 1777 "${rootfs}/tmp"
  install -m 0755 "${BUSYBOX_BIN}" "${rootfs}/bin/busybox"
  for applet in $("${BUSYBOX_BIN}" --list); do
    case "${applet}" in busybox | */*) continue ;; esac
    ln -s busybox "${rootfs}/bin/${applet}"
  done
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/home:/bin/false' > "${rootfs}/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' > "${rootfs}/etc/group"
  chmod 0644 "${rootfs}/etc/passwd" "${rootfs}/etc/group"
  local names=()
  for n in "${BUSYBOX_IMAGES[@]}"; do names+=(-name "${n}"); done
  mkimage -rootfs "${rootfs}" -o "${tar}" "${names[@]}" -cmd sh -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${tar}.inputs"
}

# import_tar TAR NAME...: imports TAR unless every NAME is already in
# containerd at the tarball's manifest digest.
import_tar() {
  local tar=$1
  shift
  local digest listed n missing=false
  digest=$(cat "${tar}.digest")
  listed=$(ctr --address "${SOCK}" -n k8s.io images ls)
  for n in "$@"; do
    if ! awk -v n="${n}" -v d="${digest}" '$1 == n && $3 == d {found=1} END {exit !found}' <<<"${listed}"; then
      missing=true
    fi
  done
  if [ "${missing}" = false ]; then
    log "$(basename "${tar}") already imported (${digest})"
    return
  fi
  log "importing $(basename "${tar}")"
  ctr --address "${SOCK}" -n k8s.io images import --all-platforms "${tar}" >/dev/null
  listed=$(ctr --address "${SOCK}" -n k8s.io images ls)
  for n in "$@"; do
    if ! awk -v n="${n}" -v d="${digest}" '$1 == n && $3 == d {found=1} END {exit !found}' <<<"${listed}"; then
      log "ERROR: ${n}@${digest} not in containerd after importing ${tar}" >&2
      exit 1
    fi
  done
}

build_pause
build_busybox

if [ -n "${SOCK}" ]; then
  import_tar "${OUT}/pause.tar" "${PAUSE_IMAGE}"
  import_tar "${OUT}/busybox.tar" "${BUSYBOX_IMAGES[@]}"
fi

for n in "${PAUSE_IMAGE}" "${BUSYBOX_IMAGES[@]}"; do
  log "image ${n}"
done
