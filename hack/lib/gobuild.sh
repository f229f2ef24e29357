# shellcheck shell=bash
# Stamped go builds of pinned modules, for hack/build-network.sh and
# hack/build-storage.sh: a binary is rebuilt only when it is missing or its
# stamp (.NAME.build beside it: the version and the build settings)
# differs. The caller sets BUILD_NAME (the prefix of its messages) and
# VERSION before each build.

# module_version DIR PATH: the version of module PATH that DIR's go.mod pins.
module_version() {
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

stamp() {
  echo "$(dirname "$1")/.$(basename "$1").build"
}

# stale OUT CGO FLAGS...: whether OUT must be built: it is missing, or its
# stamp does not hold VERSION (the caller's) and these build settings.
stale() {
  local out=$1
  shift
  [ ! -x "${out}" ] || [ "$(cat "$(stamp "${out}")" 2>/dev/null)" != "${VERSION} CGO_ENABLED=$*" ]
}

# build OUT DIR CGO FLAGS...: go build in module DIR into OUT, when stale.
build() {
  local out=$1 dir=$2 cgo=$3
  shift 3
  if ! stale "${out}" "${cgo}" "$@"; then
    echo "${BUILD_NAME}: $(basename "${out}") ${VERSION} already built"
    return 0
  fi
  echo "${BUILD_NAME}: building $(basename "${out}") ${VERSION}"
  (cd "${dir}" && CGO_ENABLED=${cgo} go build -trimpath -o "${out}" "$@")
  echo "${VERSION} CGO_ENABLED=${cgo} $*" >"$(stamp "${out}")"
}
