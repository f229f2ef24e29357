#!/usr/bin/env bash
# Builds the Kubernetes components of the test environment from the hack/tools
# module (k8s.io/kubernetes pinned there) into _output/bin. A binary is rebuilt
# only when it is missing or was built for another version.
#
# Usage: hack/build-kube.sh [component ...]
#   default components: kube-apiserver kube-scheduler kube-controller-manager kubelet
#   on request also:    kubectl    the client of the same version (hack/run.sh builds it for the
#                                  README's quick start)
#                       kube-proxy for the multi-machine cluster (#45; hack/build-network.sh
#                                  builds it with the cluster network)
#                       e2e.test   the conformance suite (go test -c k8s.io/kubernetes/test/e2e)
#                       e2e_node.test  the node e2e suite (go test -c k8s.io/kubernetes/test/e2e_node),
#                                  for hack/node-conformance.sh
#                       agnhost    the e2e test image program (static), for hack/images.sh
#                       ginkgo     the Ginkgo CLI of the same go.mod, to run e2e.test in parallel
#                       metrics-server  sigs.k8s.io/metrics-server ${METRICS_SERVER_VERSION}, built in
#                                  its own module (its go.mod and go.sum) from the module proxy
#                       helm       helm.sh/helm/v3 of hack/tools/helm (a module of its own)
#                       etcd       etcd's own server (hack/tools/cmd/etcd) at the version of
#                                  go.etcd.io/etcd/server/v3 in hack/tools/go.mod (3.7.0), for
#                                  LOCAL_ETCD=built hack/local-up.sh
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
METRICS_SERVER_VERSION=${METRICS_SERVER_VERSION:-v0.7.2}
BIN=${ROOT}/_output/bin
mkdir -p "${BIN}"

components=("$@")
if [ ${#components[@]} -eq 0 ]; then
  components=(kube-apiserver kube-scheduler kube-controller-manager kubelet)
fi

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"

cd "${ROOT}/hack/tools"
for c in "${components[@]}"; do
  stamp="${BIN}/.${c}.version"
  version=${KUBE_VERSION}
  [ "${c}" != metrics-server ] || version=${METRICS_SERVER_VERSION}
  [ "${c}" != helm ] || version=$(awk '{for (i = 1; i < NF; i++) if ($i == "helm.sh/helm/v3") print $(i + 1)}' "${ROOT}/hack/tools/helm/go.mod")
  [ "${c}" != etcd ] || version=$(awk '{for (i = 1; i < NF; i++) if ($i == "go.etcd.io/etcd/server/v3") print $(i + 1)}' "${ROOT}/hack/tools/go.mod")
  if [ -x "${BIN}/${c}" ] && [ "$(cat "${stamp}" 2>/dev/null)" = "${version}" ]; then
    echo "build-kube: ${c} ${version} already built"
    continue
  fi
  echo "build-kube: building ${c} ${version}"
  case "${c}" in
    # A test binary: hack/tools/tools_e2e.go keeps its imports in go.mod/go.sum.
    e2e.test)
      CGO_ENABLED=0 go test -c -trimpath -ldflags "${ldflags}" -o "${BIN}/${c}" k8s.io/kubernetes/test/e2e ;;
    # The node e2e suite; hack/tools/tools_e2e_node.go keeps its imports.
    e2e_node.test)
      CGO_ENABLED=0 go test -c -trimpath -ldflags "${ldflags}" -o "${BIN}/${c}" k8s.io/kubernetes/test/e2e_node ;;
    # Its version (2.66.1) is test/images/agnhost/VERSION of the same module.
    agnhost)
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/${c}" k8s.io/kubernetes/test/images/agnhost ;;
    # The version k8s.io/kubernetes requires (go.mod), as upstream's CI uses.
    ginkgo)
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/${c}" github.com/onsi/ginkgo/v2/ginkgo ;;
    # etcdmain.Main, upstream's etcd binary; not Debian's etcd-server 3.4.23
    # (docs/environment.md).
    etcd)
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/${c}" ./cmd/etcd ;;
    helm)
      (cd "${ROOT}/hack/tools/helm" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/${c}" helm.sh/helm/v3/cmd/helm) ;;
    # Not in hack/tools: its k8s.io libraries are older than k8s.io/kubernetes'.
    metrics-server)
      dir=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/metrics-server@${METRICS_SERVER_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
      [ -n "${dir}" ] || { echo "build-kube: cannot download sigs.k8s.io/metrics-server@${METRICS_SERVER_VERSION}" >&2; exit 1; }
      (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/${c}" ./cmd/metrics-server) ;;
    *)
      CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${BIN}/${c}" "k8s.io/kubernetes/cmd/${c}" ;;
  esac
  echo "${version}" > "${stamp}"
done
