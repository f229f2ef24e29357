#!/usr/bin/env bash
# Checks a release directory written by hack/release.sh (default
# _output/release): every checksum; the image tarball's manifest digest
# against its .digest file and its blobs against their names; the image's
# name is the one the packaged chart's default image resolves to (its
# repository, and the tag = the chart's appVersion, the chart's image.tag
# empty); the binary is static, prints the appVersion, and is the /crivk
# of the image. Needs only coreutils, tar and grep. Prints one line per
# check and "N passed, N failed"; exits non-zero on a failure.
# Usage: hack/verify-release.sh [DIR]
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$(cd "${1:-${ROOT}/_output/release}" && pwd)
cd "${DIR}"
passed=0
failed=0
ok() { echo "verify-release: ok   $*"; passed=$((passed + 1)); }
bad() { echo "verify-release: FAIL $*"; failed=$((failed + 1)); }
finish() {
  echo "verify-release: ${passed} passed, ${failed} failed"
  [ "${failed}" -eq 0 ]
  exit
}

# one GLOB: the single file matching GLOB, or a failure.
one() {
  local m=()
  mapfile -t m < <(compgen -G "$1" || true)
  if [ ${#m[@]} -ne 1 ]; then
    bad "exactly one $1 in ${DIR}, found ${#m[@]}"
    return 1
  fi
  echo "${m[0]}"
}

if out=$(sha256sum --strict -c SHA256SUMS 2>&1); then ok "SHA256SUMS"; else bad "SHA256SUMS: ${out}"; fi
if out=$(sha256sum --strict -c crivk-linux-amd64.sha256 2>&1); then ok "crivk-linux-amd64.sha256"; else bad "crivk-linux-amd64.sha256: ${out}"; fi
chart=$(one 'crivk-*.tgz') || finish
image=$(one 'crivk-image-*.oci.tar') || finish
digest_file=${image%.oci.tar}.digest
[ -f "${digest_file}" ] || { bad "no ${digest_file}"; finish; }
for f in crivk-linux-amd64 crivk-linux-amd64.sha256 "${chart}" "${image}" "${digest_file}"; do
  grep -qE "^[0-9a-f]{64}  ${f}\$" SHA256SUMS || bad "SHA256SUMS does not cover ${f}"
done

# The chart: its appVersion, version and default image.
chart_yaml=$(tar -xzOf "${chart}" crivk/Chart.yaml)
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' <<<"${chart_yaml}")
chart_version=$(sed -n 's/^version: *//p' <<<"${chart_yaml}")
if [ "${chart}" = "crivk-${chart_version}.tgz" ] && [ "${chart_version}" = "${app_version#v}" ]; then
  ok "chart ${chart}: version ${chart_version}, appVersion ${app_version}"
else
  bad "chart ${chart}: version ${chart_version}, appVersion ${app_version} (want crivk-<appVersion without v>.tgz)"
fi
values=$(tar -xzOf "${chart}" crivk/values.yaml)
# The image block's repository and tag (two-space indented under image:).
repository=$(awk '/^image:/ { on = 1; next } /^[^ #]/ { on = 0 } on && $1 == "repository:" { print $2 }' <<<"${values}")
tag=$(awk '/^image:/ { on = 1; next } /^[^ #]/ { on = 0 } on && $1 == "tag:" { print $2 }' <<<"${values}")
if [ "${tag}" = '""' ] || [ -z "${tag}" ]; then
  ok "the chart's image.tag is empty: the image tag is the appVersion"
else
  bad "the chart's image.tag is ${tag}, not the appVersion"
fi
# normalize REF: containerd's (docker's) full name of an image repository.
normalize() {
  local r=$1 first=${1%%/*}
  if [[ "${r}" != */* ]]; then
    r=docker.io/library/${r}
  elif [[ "${first}" != *.* && "${first}" != *:* && "${first}" != localhost ]]; then
    r=docker.io/${r}
  fi
  echo "${r}"
}

# The image: its name, digest and blobs.
index=$(tar -xOf "${image}" index.json)
names=$(grep -o '"io.containerd.image.name":"[^"]*"' <<<"${index}" | cut -d'"' -f4)
want="$(normalize "${repository}"):${app_version}"
if [ "${names}" = "${want}" ]; then
  ok "image ${image} is ${names}, the chart's default image"
else
  bad "image ${image} is named '${names//$'\n'/ }', the chart's default image is ${want}"
fi
manifest_digest=$(grep -o '"digest":"sha256:[0-9a-f]*"' <<<"${index}" | cut -d'"' -f4 | sort -u)
if [ "${manifest_digest}" = "$(cat "${digest_file}")" ]; then
  ok "${digest_file}: ${manifest_digest}"
else
  bad "${digest_file} says $(cat "${digest_file}"), the index ${manifest_digest}"
fi
blob() { tar -xOf "${image}" "blobs/sha256/${1#sha256:}"; }
manifest=$(blob "${manifest_digest}")
layer=""
blobs_ok=1
for d in ${manifest_digest} $(grep -o '"digest":"sha256:[0-9a-f]*"' <<<"${manifest}" | cut -d'"' -f4); do
  if [ "sha256:$(blob "${d}" | sha256sum | cut -d' ' -f1)" != "${d}" ]; then
    bad "blob ${d} of ${image} does not match its digest"
    blobs_ok=0
  fi
  layer=${d}
done
[ "${blobs_ok}" = 0 ] || ok "the image's manifest, config and layer match their digests"

# The binary: static, the appVersion, and the image's /crivk.
if readelf -l crivk-linux-amd64 2>/dev/null | grep -q INTERP; then
  bad "crivk-linux-amd64 is dynamically linked"
else
  ok "crivk-linux-amd64 is static"
fi
if [ "$(./crivk-linux-amd64 version)" = "crivk ${app_version}" ]; then
  ok "crivk-linux-amd64 version: crivk ${app_version}"
else
  bad "crivk-linux-amd64 version: '$(./crivk-linux-amd64 version)', want 'crivk ${app_version}'"
fi
if [ "$(blob "${layer}" | tar -xzO crivk | sha256sum | cut -d' ' -f1)" = "$(sha256sum crivk-linux-amd64 | cut -d' ' -f1)" ]; then
  ok "the image's /crivk is crivk-linux-amd64"
else
  bad "the image's /crivk is not crivk-linux-amd64"
fi
finish
