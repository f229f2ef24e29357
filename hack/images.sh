#!/usr/bin/env bash
# Builds the test images from local sources, with no registry, as OCI
# image-layout tarballs under _output/images/, and imports them into a
# containerd (CRI namespace k8s.io) when a socket is given:
#
#   registry.k8s.io/pause:3.10.2                      /pause from hack/images/pause.c
#   registry.k8s.io/e2e-test-images/busybox:1.37.0-2  Debian's static /bin/busybox, and
#                                                     /bin/nmeter (hack/tools/cmd/nmeter: the
#                                                     time of day part of busybox's nmeter,
#                                                     which Debian's busybox lacks)
#   docker.io/library/busybox:latest                  the same files, another image (digest)
#
# With CONFORMANCE_IMAGES=1 also the image the upstream conformance specs
# run most (hack/conformance.sh sets it):
#
#   registry.k8s.io/e2e-test-images/agnhost:2.66.1    upstream test/images/agnhost recipe on a
#                                                     Debian bookworm minbase root filesystem, with
#                                                     /var/registry for its fake-registry-server
#                                                     and nmeter (as busybox's)
#   registry.k8s.io/e2e-test-images/nonewprivs:1.4    upstream test/images/nonewprivs: a setuid-root
#                                                     /usr/local/bin/nnp that prints its effective uid
#
# With NODE_E2E_IMAGES=1 also the other images of the node e2e suite's
# selection 1 (hack/node-conformance.sh sets it), from Debian packages:
#
#   registry.k8s.io/e2e-test-images/nginx:1.27.0-2        Debian's nginx (1.22) on a minbase root
#                                                         filesystem, nginx -g 'daemon off;'
#   registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1  the agnhost Debian base (bookworm):
#   registry.k8s.io/e2e-test-images/ipc-utils:1.4            dnsutils, hostname, util-linux
#   registry.k8s.io/e2e-test-images/kitten:1.8               upstream test/images/kitten on our agnhost:
#                                                            /kitten.jpg, /data.json (the ImageVolume specs)
#
# With NETWORK_IMAGES=1 also the images of the network add-ons of the
# multi-machine cluster (#45, hack/README.md "Several machines on one";
# their manifests are hack/network/*.yaml), with the binaries
# hack/build-network.sh builds (run here; each binary's version is checked
# against its image's tag):
#
#   registry.k8s.io/kube-proxy:v1.37.2       /usr/local/bin/kube-proxy on a Debian bookworm minbase
#                                            with Debian's iptables (its nf_tables variant, as this
#                                            host's) and nftables (kube-proxy runs iptables-restore,
#                                            and nft in nftables mode and to clean that mode's table)
#   docker.io/flannel/flannel:v0.28.11       /opt/bin/flanneld and /opt/bin/flannel-cni-conf on the
#                                            same base (flanneld runs iptables and iptables-restore)
#   registry.k8s.io/coredns/coredns:v1.15.0  the static /coredns alone
#
# A tarball is rebuilt only when its inputs changed (recorded in
# _output/images/NAME.inputs); an image is imported only when containerd does
# not already have every name at the tarball's manifest digest.
#
# Usage: [CONFORMANCE_IMAGES=1] [NODE_E2E_IMAGES=1] [NETWORK_IMAGES=1] hack/images.sh [containerd-socket]
# Environment (conformance, node e2e and network images only): DEBIAN_MIRROR (default: the
# mirror apt is configured with for bookworm).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SOCK=${1:-}
OUT=${ROOT}/_output/images
BIN=${ROOT}/_output/bin

PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
BUSYBOX_IMAGE=registry.k8s.io/e2e-test-images/busybox:1.37.0-2
BUSYBOX_OTHER_IMAGE=docker.io/library/busybox:latest
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
BUSYBOX_BIN=/bin/busybox
CONFORMANCE_IMAGES=${CONFORMANCE_IMAGES:-0}
AGNHOST_IMAGE=registry.k8s.io/e2e-test-images/agnhost:2.66.1
NONEWPRIVS_IMAGE=registry.k8s.io/e2e-test-images/nonewprivs:1.4
NODE_E2E_IMAGES=${NODE_E2E_IMAGES:-0}
# The tags of test/utils/image/manifest.go (v1.37.2).
NGINX_IMAGE=registry.k8s.io/e2e-test-images/nginx:1.27.0-2
GLIBC_DNS_TESTING_IMAGE=registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1
IPC_UTILS_IMAGE=registry.k8s.io/e2e-test-images/ipc-utils:1.4
KITTEN_IMAGE=registry.k8s.io/e2e-test-images/kitten:1.8
NGINX_PACKAGES=nginx
NETWORK_IMAGES=${NETWORK_IMAGES:-0}
# The tags the network add-ons' manifests name: the versions hack/build-network.sh
# builds (checked by build_network_images).
KUBE_PROXY_IMAGE=registry.k8s.io/kube-proxy:v1.37.2
FLANNEL_IMAGE=docker.io/flannel/flannel:v0.28.11
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:v1.15.0
# kube-proxy's iptables mode runs iptables, iptables-save and
# iptables-restore (and ip6tables'), its nftables mode nft; conntrack
# entries are listed and deleted through netlink (pkg/proxy/conntrack in
# v1.37), so no conntrack tool. flanneld runs iptables and iptables-restore.
# Debian's iptables is iptables-nft by default, as this host's: the
# rules of kube-proxy, flanneld and the CNI plugins (the host's iptables,
# run by containerd) are all in nf_tables.
NETWORK_PACKAGES=iptables,nftables
DEBIAN_SUITE=bookworm
# What upstream's agnhost image adds to its base with apk (minus iperf): nc
# with UDP, curl, dig/nslookup, ip/ss, bash.
AGNHOST_PACKAGES=netcat-openbsd,curl,dnsutils,iproute2,bash

# shellcheck source=hack/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"

umask 022
mkdir -p "${OUT}" "${BIN}"

log() { echo "images: $*"; }

# inputs_of NAME FILE...: a hash of everything an image is made from, this
# script and the mkimage tool included (regtool too: agnhost's /var/registry;
# and hack/tools/internal/imageblob, which both use).
inputs_of() {
  local name=$1
  shift
  {
    echo "${name}"
    sha256sum "${BASH_SOURCE[0]}" "${ROOT}"/hack/tools/cmd/mkimage/*.go "${ROOT}"/hack/tools/cmd/regtool/*.go "${ROOT}"/hack/tools/internal/imageblob/*.go "${ROOT}/hack/tools/go.sum" "$@" | awk '{print $1}'
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

# nmeter: hack/tools/cmd/nmeter, static, for the busybox image (the node e2e
# suite's timestamps; Debian's busybox has no nmeter applet).
nmeter_built=false
build_nmeter() {
  if [ "${nmeter_built}" = false ]; then
    (cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/nmeter" ./cmd/nmeter)
    nmeter_built=true
  fi
}

regtool_built=false
regtool() {
  if [ "${regtool_built}" = false ]; then
    (cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -o "${BIN}/regtool" ./cmd/regtool)
    regtool_built=true
  fi
  "${BIN}/regtool" "$@" >/dev/null
}

# up_to_date TAR INPUTS [no-digest]: TAR exists (with its manifest digest
# unless no-digest) and was made from INPUTS; says so.
up_to_date() {
  local tar=$1 inputs=$2
  [ -f "${tar}" ] || return 1
  [ "${3:-}" = no-digest ] || [ -f "${tar}.digest" ] || return 1
  [ "$(cat "${tar}.inputs" 2>/dev/null)" = "${inputs}" ] || return 1
  log "$(basename "${tar}") up to date"
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
  if up_to_date "${tar}" "${inputs}"; then return; fi
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
  local tar=${OUT}/busybox.tar other=${OUT}/busybox-other.tar inputs
  inputs=$(inputs_of busybox "${BUSYBOX_BIN}" "${ROOT}"/hack/tools/cmd/nmeter/*.go)
  if up_to_date "${tar}" "${inputs}" && up_to_date "${other}" "${inputs}"; then return; fi
  log "building busybox.tar, busybox-other.tar"
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
  # Upstream's busybox has the nmeter applet, Debian's does not.
  if [ ! -e "${rootfs}/bin/nmeter" ]; then
    build_nmeter
    install -m 0755 "${BIN}/nmeter" "${rootfs}/bin/nmeter"
  fi
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/home:/bin/false' > "${rootfs}/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' > "${rootfs}/etc/group"
  chmod 0644 "${rootfs}/etc/passwd" "${rootfs}/etc/group"
  mkimage -rootfs "${rootfs}" -o "${tar}" -name "${BUSYBOX_IMAGE}" -cmd sh -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${tar}.inputs"
  # The second name is a second image (other timestamps, so another digest),
  # not a second tag of the first: containerd 1.6 reports a container's
  # status image as the first tag of its image in name order, so with both
  # names on one image a pod of the registry.k8s.io name would show
  # docker.io/library/busybox:latest (the node e2e suite's image-update specs
  # compare the status image with the spec's).
  mkimage -rootfs "${rootfs}" -o "${other}" -name "${BUSYBOX_OTHER_IMAGE}" -epoch 1 -cmd sh -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${other}.inputs"
}

# build_debian_base NAME PACKAGES: a Debian root filesystem made by
# debootstrap --variant=minbase with PACKAGES (comma-separated; a few
# minutes, ~100 MB from the mirror), cached as _output/images/NAME.tar
# (numeric owners kept). It depends only on the suite and the package list,
# not on the mirror; delete the tarball to refresh it.
build_debian_base() {
  local name=$1 packages=$2
  local tar=${OUT}/${name}.tar key="${DEBIAN_SUITE} minbase ${packages}" dir mirror
  if up_to_date "${tar}" "${key}" no-digest; then return; fi
  command -v debootstrap >/dev/null || {
    log "ERROR: debootstrap is missing; run CONFORMANCE_IMAGES=1 hack/install-deps.sh" >&2
    exit 1
  }
  mirror=$(debian_mirror "${DEBIAN_SUITE}")
  log "building ${name}.tar: debootstrap ${DEBIAN_SUITE} from ${mirror} (log: ${OUT}/${name}.log)"
  dir=$(fresh_rootfs "${name}")
  if ! debootstrap --variant=minbase --include="${packages}" "${DEBIAN_SUITE}" "${dir}" "${mirror}" \
    >"${OUT}/${name}.log" 2>&1; then
    tail -n 20 "${OUT}/${name}.log" >&2
    log "ERROR: debootstrap failed" >&2
    exit 1
  fi
  # The runtime provides /dev, /proc and /sys; the package cache, indexes,
  # documentation and logs are not needed in a test image.
  # debootstrap copies the build machine's resolv.conf and hostname: the
  # runtime mounts its own over them.
  rm -rf "${dir:?}"/dev/* "${dir:?}"/proc/* "${dir:?}"/sys/* "${dir:?}"/run/* "${dir:?}"/tmp/* \
    "${dir:?}"/var/cache/apt/archives/*.deb "${dir:?}"/var/cache/apt/*.bin "${dir:?}"/var/lib/apt/lists/* \
    "${dir:?}"/var/log/* "${dir:?}"/usr/share/doc/* "${dir:?}"/usr/share/man/* "${dir:?}"/usr/share/info/* \
    "${dir:?}"/usr/share/locale/*
  : >"${dir}/etc/resolv.conf"
  : >"${dir}/etc/hostname"
  chmod 0644 "${dir}/etc/resolv.conf" "${dir}/etc/hostname"
  tar --numeric-owner -C "${dir}" -cf "${tar}.tmp" .
  mv -f "${tar}.tmp" "${tar}"
  echo "${key}" > "${tar}.inputs"
  rm -rf "${dir}"
}

# build_agnhost: upstream's test/images/agnhost/Dockerfile on the Debian base:
# /agnhost (entrypoint, default argument pause), /agnhost-2 (for the
# entrypoint-override spec), /uploads, /localhost.crt+key (HTTPS lifecycle
# hooks), user user-defined-in-image (uid 1000) in group
# group-defined-in-image (gid 50000), busybox applets the Debian base lacks
# (the upstream image is Alpine, whose tools are busybox's), and
# /var/registry: what `agnhost fake-registry-server` serves (upstream's
# fakeregistryserver/prepare_registry.sh downloads registry.k8s.io/pause:3.10.2
# there as pause:testing; here it is our pause image, the same name and
# layout: manifests/testing -> an image index -> the manifest, config and
# layer under blobs/). The Container Runtime specs "should (not) be able to
# pull from private registry with(out) secret" pull localhost:5000/pause:testing
# from it.
build_agnhost() {
  local tar=${OUT}/agnhost.tar inputs
  inputs=$(agnhost_inputs agnhost)
  if up_to_date "${tar}" "${inputs}"; then return; fi
  log "building agnhost.tar"
  local rootfs
  rootfs=$(fresh_rootfs agnhost)
  agnhost_rootfs "${rootfs}"
  mkimage -keep-owner -rootfs "${rootfs}" -o "${tar}" -name "${AGNHOST_IMAGE}" \
    -entrypoint /agnhost -cmd pause -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${tar}.inputs"
  rm -rf "${rootfs}"
}

# agnhost_inputs NAME [FILE...]: builds what agnhost's root filesystem is
# made of and prints the inputs of image NAME made of it (and FILEs).
agnhost_inputs() {
  local name=$1 porter
  shift
  "${ROOT}/hack/build-kube.sh" agnhost >/dev/null
  build_debian_base agnhost-base "${AGNHOST_PACKAGES}"
  build_nmeter
  porter=$(cd "${ROOT}/hack/tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/porter
  inputs_of "${name}" "${BIN}/agnhost" "${OUT}/agnhost-base.tar" "${porter}/localhost.crt" "${porter}/localhost.key" \
    "${BUSYBOX_BIN}" "${OUT}/pause.tar" "${ROOT}"/hack/tools/cmd/nmeter/*.go "$@"
}

# agnhost_rootfs ROOTFS: fills the empty ROOTFS with agnhost's files.
agnhost_rootfs() {
  local rootfs=$1 porter applet d have
  porter=$(cd "${ROOT}/hack/tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/porter
  tar --numeric-owner -C "${rootfs}" -xpf "${OUT}/agnhost-base.tar"
  install -m 0755 "${BIN}/agnhost" "${rootfs}/agnhost"
  ln -s agnhost "${rootfs}/agnhost-2"
  install -d -m 0755 "${rootfs}/uploads"
  install -m 0644 "${porter}/localhost.crt" "${porter}/localhost.key" "${rootfs}/"
  install -m 0755 "${BUSYBOX_BIN}" "${rootfs}/usr/local/bin/busybox"
  for applet in $("${BUSYBOX_BIN}" --list); do
    case "${applet}" in busybox | */*) continue ;; esac
    have=false
    for d in usr/local/sbin usr/local/bin usr/sbin usr/bin sbin bin; do
      if [ -e "${rootfs}/${d}/${applet}" ] || [ -L "${rootfs}/${d}/${applet}" ]; then have=true; break; fi
    done
    [ "${have}" = true ] || ln -s busybox "${rootfs}/usr/local/bin/${applet}"
  done
  # The node e2e suite's Containers Lifecycle specs run their script (and its
  # nmeter timestamps) in agnhost as the alternate image; upstream's agnhost
  # is Alpine-based, its busybox has the applet.
  install -m 0755 "${BIN}/nmeter" "${rootfs}/usr/local/bin/nmeter"
  echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >> "${rootfs}/etc/passwd"
  echo 'user-defined-in-image:!:19000:0:99999:7:::' >> "${rootfs}/etc/shadow"
  printf '%s\n' 'user-defined-in-image:x:1000:' 'group-defined-in-image:x:50000:user-defined-in-image' >> "${rootfs}/etc/group"
  printf '%s\n' 'user-defined-in-image:!::' 'group-defined-in-image:!::user-defined-in-image' >> "${rootfs}/etc/gshadow"
  install -d -m 0755 -o 1000 -g 1000 "${rootfs}/home/user-defined-in-image"
  # Readable by anyone: the registry pod runs as uid 5123.
  regtool fakeregistry -o "${rootfs}/var/registry" "${OUT}/pause.tar" pause testing
}

# build_kitten: upstream's test/images/kitten/Dockerfile on our agnhost
# (its BASEIMAGE): /kitten.jpg and /data.json from the module's
# test/images/kitten/html, CMD test-webserver (agnhost's entrypoint). The
# node e2e suite's ImageVolume specs mount it as a volume and read
# data.json and etc/os-release; the latter says Debian here, not Alpine
# (docs/conformance.md).
build_kitten() {
  local tar=${OUT}/kitten.tar html inputs
  html=$(cd "${ROOT}/hack/tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/kitten/html
  inputs=$(agnhost_inputs kitten "${html}/kitten.jpg" "${html}/data.json")
  if up_to_date "${tar}" "${inputs}"; then return; fi
  log "building kitten.tar"
  local rootfs
  rootfs=$(fresh_rootfs kitten)
  agnhost_rootfs "${rootfs}"
  install -m 0644 "${html}/kitten.jpg" "${html}/data.json" "${rootfs}/"
  mkimage -keep-owner -rootfs "${rootfs}" -o "${tar}" -name "${KITTEN_IMAGE}" \
    -entrypoint /agnhost -cmd test-webserver -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${tar}.inputs"
  rm -rf "${rootfs}"
}

# build_nonewprivs: upstream's test/images/nonewprivs (nnp.go, setuid root,
# CMD nnp); the base image only needs the program, so no distribution.
build_nonewprivs() {
  local tar=${OUT}/nonewprivs.tar src inputs
  src=$(cd "${ROOT}/hack/tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/nonewprivs
  inputs=$(inputs_of nonewprivs "${src}/nnp.go")
  if up_to_date "${tar}" "${inputs}"; then return; fi
  log "building nonewprivs.tar"
  local rootfs
  rootfs=$(fresh_rootfs nonewprivs)
  mkdir -p "${rootfs}/usr/local/bin" "${rootfs}/etc" "${rootfs}/tmp"
  chmod 1777 "${rootfs}/tmp"
  (cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${rootfs}/usr/local/bin/nnp" k8s.io/kubernetes/test/images/nonewprivs)
  chmod 4755 "${rootfs}/usr/local/bin/nnp"
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/home:/bin/false' > "${rootfs}/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' > "${rootfs}/etc/group"
  mkimage -rootfs "${rootfs}" -o "${tar}" -name "${NONEWPRIVS_IMAGE}" -cmd nnp -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${tar}.inputs"
  rm -rf "${rootfs}"
}

# from_debian_base NAME BASE: a fresh staging root filesystem for image NAME
# holding the Debian base tarball BASE; prints its path.
from_debian_base() {
  local rootfs
  rootfs=$(fresh_rootfs "$1")
  tar --numeric-owner -C "${rootfs}" -xpf "${OUT}/$2.tar"
  echo "${rootfs}"
}

# build_nginx: upstream's nginx test image is nginx's official Alpine image
# mirrored (test/images/nginx); here Debian's nginx package on a minbase root
# filesystem, run as the official image runs it (nginx -g 'daemon off;', its
# logs on the container's standard output and error). The node e2e suite's
# MirrorPod specs run it as the static pod's only container (default command)
# and wait for it to run; the host PID specs read /var/run/nginx.pid.
build_nginx() {
  local tar=${OUT}/nginx.tar inputs
  build_debian_base nginx-base "${NGINX_PACKAGES}"
  inputs=$(inputs_of nginx "${OUT}/nginx-base.tar")
  if up_to_date "${tar}" "${inputs}"; then return; fi
  log "building nginx.tar"
  local rootfs
  rootfs=$(from_debian_base nginx nginx-base)
  install -d -m 0755 "${rootfs}/var/log/nginx"
  ln -sf /dev/stdout "${rootfs}/var/log/nginx/access.log"
  ln -sf /dev/stderr "${rootfs}/var/log/nginx/error.log"
  # Port 80 on IPv4 only, as the official image's default server (its
  # entrypoint adds [::]:80 only where IPv6 works).
  sed -i '/listen \[::\]:80/d' "${rootfs}/etc/nginx/sites-available/default"
  mkimage -keep-owner -rootfs "${rootfs}" -o "${tar}" -name "${NGINX_IMAGE}" \
    -cmd nginx -cmd -g -cmd 'daemon off;' -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${tar}.inputs"
  rm -rf "${rootfs}"
}

# build_from_agnhost_base NAME IMAGE: an image of the agnhost Debian base
# alone (minbase with dnsutils, iproute2, curl, netcat-openbsd, bash; the
# minbase has util-linux, hostname and mawk), default command a shell:
#   glibc-dns-testing  upstream (v1.37's replacement of jessie-dnsutils): a
#                      Debian base with dnsutils (and a coredns binary no node
#                      spec uses); the node e2e suite's Hostname of Pod specs
#                      run `hostname` and `hostname -f`
#   ipc-utils          upstream: alpine with util-linux; the host IPC specs run
#                      `ipcs -m | awk ...`
build_from_agnhost_base() {
  local name=$1 image=$2 tar=${OUT}/$1.tar inputs
  build_debian_base agnhost-base "${AGNHOST_PACKAGES}"
  inputs=$(inputs_of "${name}" "${OUT}/agnhost-base.tar")
  if up_to_date "${tar}" "${inputs}"; then return; fi
  log "building ${name}.tar"
  local rootfs
  rootfs=$(from_debian_base "${name}" agnhost-base)
  mkimage -keep-owner -rootfs "${rootfs}" -o "${tar}" -name "${image}" -cmd /bin/sh -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${tar}.inputs"
  rm -rf "${rootfs}"
}

# network_image_version BINARY ARGS... TAG: BINARY's version output
# (BINARY ARGS...) must hold TAG (its leading v optional), else the image
# would carry a tag its binary is not.
network_image_version() {
  local out tag=${*: -1}
  out=$("${@:1:$#-1}" 2>&1 | head -n 3) || true
  case "${out}" in
    *"${tag}"* | *"${tag#v}"*) ;;
    *) log "ERROR: $1 is not ${tag}: ${out}" >&2; exit 1 ;;
  esac
}

# build_network_image NAME IMAGE ENTRYPOINT BASE FILE:PATH...: image IMAGE
# (tarball NAME.tar) of each FILE installed at PATH (mode 0755), on the
# Debian base tarball BASE (none: an empty root filesystem), with
# ENTRYPOINT.
build_network_image() {
  local name=$1 image=$2 entrypoint=$3 base=$4 tar=${OUT}/$1.tar inputs rootfs f files=()
  shift 4
  for f in "$@"; do files+=("${f%%:*}"); done
  inputs=$(inputs_of "${name}" "${files[@]}" ${base:+"${OUT}/${base}.tar"})
  if up_to_date "${tar}" "${inputs}"; then return; fi
  log "building ${name}.tar"
  if [ -n "${base}" ]; then
    rootfs=$(from_debian_base "${name}" "${base}")
  else
    rootfs=$(fresh_rootfs "${name}")
  fi
  for f in "$@"; do
    install -D -m 0755 "${f%%:*}" "${rootfs}${f#*:}"
  done
  mkimage -keep-owner -rootfs "${rootfs}" -o "${tar}" -name "${image}" \
    -entrypoint "${entrypoint}" -env "PATH=${IMAGE_PATH}"
  echo "${inputs}" > "${tar}.inputs"
  rm -rf "${rootfs}"
}

# build_network_images: the add-ons' images (NETWORK_IMAGES=1), from the
# binaries of hack/build-network.sh, each checked against its tag.
build_network_images() {
  local net=${BIN}/network
  "${ROOT}/hack/build-network.sh" >/dev/null
  network_image_version "${BIN}/kube-proxy" --version "${KUBE_PROXY_IMAGE##*:}"
  network_image_version "${net}/flanneld" --version "${FLANNEL_IMAGE##*:}"
  network_image_version "${net}/coredns" -version "${COREDNS_IMAGE##*:}"
  build_debian_base network-base "${NETWORK_PACKAGES}"
  build_network_image kube-proxy "${KUBE_PROXY_IMAGE}" /usr/local/bin/kube-proxy network-base \
    "${BIN}/kube-proxy:/usr/local/bin/kube-proxy"
  build_network_image flannel "${FLANNEL_IMAGE}" /opt/bin/flanneld network-base \
    "${net}/flanneld:/opt/bin/flanneld" "${net}/flannel-cni-conf:/opt/bin/flannel-cni-conf"
  # As upstream's image, but for its user: upstream runs it as 65532 with
  # the file capability cap_net_bind_service on /coredns, which mkimage's
  # layers do not carry (no extended attributes); here it runs as root and
  # the Deployment keeps only NET_BIND_SERVICE (hack/network/coredns.yaml).
  build_network_image coredns "${COREDNS_IMAGE}" /coredns "" "${net}/coredns:/coredns"
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
images=("${PAUSE_IMAGE}" "${BUSYBOX_IMAGE}" "${BUSYBOX_OTHER_IMAGE}")
if [ "${CONFORMANCE_IMAGES}" = 1 ]; then
  build_agnhost
  build_nonewprivs
  images+=("${AGNHOST_IMAGE}" "${NONEWPRIVS_IMAGE}")
fi
if [ "${NODE_E2E_IMAGES}" = 1 ]; then
  build_nginx
  build_from_agnhost_base glibc-dns-testing "${GLIBC_DNS_TESTING_IMAGE}"
  build_from_agnhost_base ipc-utils "${IPC_UTILS_IMAGE}"
  build_kitten
  images+=("${NGINX_IMAGE}" "${GLIBC_DNS_TESTING_IMAGE}" "${IPC_UTILS_IMAGE}" "${KITTEN_IMAGE}")
fi
if [ "${NETWORK_IMAGES}" = 1 ]; then
  build_network_images
  images+=("${KUBE_PROXY_IMAGE}" "${FLANNEL_IMAGE}" "${COREDNS_IMAGE}")
fi

if [ -n "${SOCK}" ]; then
  import_tar "${OUT}/pause.tar" "${PAUSE_IMAGE}"
  import_tar "${OUT}/busybox.tar" "${BUSYBOX_IMAGE}"
  import_tar "${OUT}/busybox-other.tar" "${BUSYBOX_OTHER_IMAGE}"
  if [ "${CONFORMANCE_IMAGES}" = 1 ]; then
    import_tar "${OUT}/agnhost.tar" "${AGNHOST_IMAGE}"
    import_tar "${OUT}/nonewprivs.tar" "${NONEWPRIVS_IMAGE}"
  fi
  if [ "${NODE_E2E_IMAGES}" = 1 ]; then
    import_tar "${OUT}/nginx.tar" "${NGINX_IMAGE}"
    import_tar "${OUT}/glibc-dns-testing.tar" "${GLIBC_DNS_TESTING_IMAGE}"
    import_tar "${OUT}/ipc-utils.tar" "${IPC_UTILS_IMAGE}"
    import_tar "${OUT}/kitten.tar" "${KITTEN_IMAGE}"
  fi
  if [ "${NETWORK_IMAGES}" = 1 ]; then
    import_tar "${OUT}/kube-proxy.tar" "${KUBE_PROXY_IMAGE}"
    import_tar "${OUT}/flannel.tar" "${FLANNEL_IMAGE}"
    import_tar "${OUT}/coredns.tar" "${COREDNS_IMAGE}"
  fi
fi

for n in "${images[@]}"; do
  log "image ${n}"
done
