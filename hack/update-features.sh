#!/usr/bin/env bash
# Writes kubeletconfig/zz_generated_features.go: the kubelet's
# feature gates (default, locked, pre-release at v1.37) as k8s.io/kubernetes
# of hack/tools/go.mod registers them, read by hack/tools/cmd/genfeatures.
# Run it after changing the k8s.io/kubernetes version there, and commit the file.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}/hack/tools"
go run ./cmd/genfeatures -o "${ROOT}/kubeletconfig/zz_generated_features.go"
