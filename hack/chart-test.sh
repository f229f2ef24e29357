#!/usr/bin/env bash
# Checks charts/crivk with helm v3 built from hack/tools/helm: `helm lint
# --strict`, `helm template` of the default values and of the other modes
# (plain RBAC, serving certificate by CSR, node labels, profiling) with the
# flags crivk must get, the probes on crivk's own /healthz, each identity's
# RBAC, and values that must be refused with a clear message
# (the kubelet's ports, runtime, directories or cgroups; node labels a node
# may not set; taints that would split the flag; a profiling port on the
# node API's; out-of-range ports; bad enums). Prints one line per check and
# "N passed, N failed"; exits non-zero on a failure.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"${ROOT}/hack/build-kube.sh" helm >/dev/null
HELM=${ROOT}/_output/bin/helm
CHART=${ROOT}/charts/crivk
passed=0
failed=0
ok() { echo "chart: ok   $*"; passed=$((passed + 1)); }
bad() { echo "chart: FAIL $*"; failed=$((failed + 1)); }

if out=$("${HELM}" lint --strict "${CHART}" 2>&1); then ok "helm lint --strict"; else bad "helm lint --strict: ${out}"; fi

# render NAME WANT... -- ARGS: helm template succeeds and its output holds
# every WANT line fragment.
render() {
  local name=$1 out w missing=()
  shift
  local wants=()
  while [ "$1" != -- ]; do wants+=("$1"); shift; done
  shift
  if ! out=$("${HELM}" template t "${CHART}" --namespace crivk-system "$@" 2>&1); then
    bad "${name}: helm template failed: ${out}"; return
  fi
  for w in "${wants[@]}"; do grep -qF -- "${w}" <<<"${out}" || missing+=("${w}"); done
  if [ ${#missing[@]} -eq 0 ]; then ok "${name}"; else bad "${name}: missing ${missing[*]}"; fi
}
render "default values" \
  "--node-name=crivk-\$(MACHINE)" "--bootstrap-kubeconfig=in-cluster" "--cri-endpoint=unix:///run/crivk/containerd/containerd.sock" \
  "--port=10260" "--cgroup-root=/crivk" "--register-with-taints=node.crivk.io/agent=crivk:NoSchedule" \
  "--node-labels=node.kubernetes.io/agent=crivk" "name: system:node-bootstrapper" \
  "--client-ca-file=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" \
  "name: system:certificates.k8s.io:certificatesigningrequests:nodeclient" "mountPropagation: Bidirectional" --
render "plain RBAC, serving certificate by CSR" \
  "kind: ClusterRole" "resources: [tokenreviews]" "--rotate-server-certificates" \
  "resources: [certificatesigningrequests]" "verbs: [create, get, list, watch]" -- \
  --set identity=rbac,servingCert=csr
# Plain RBAC: crivk gets no kubeconfig at all and takes the pod's service
# account (rest.InClusterConfig).
if "${HELM}" template t "${CHART}" --set identity=rbac 2>/dev/null | grep -qE -- "- --(bootstrap-)?kubeconfig"; then
  bad "plain RBAC still bootstraps or passes a kubeconfig"
else
  ok "plain RBAC: no kubeconfig, the pod's service account"
fi
if "${HELM}" template t "${CHART}" --set identity=rbac 2>/dev/null | grep -qF -- "certificatesigningrequests"; then
  bad "plain RBAC with a self-signed serving certificate may use CSRs"
else
  ok "plain RBAC with a self-signed serving certificate: no CSR permissions"
fi
if "${HELM}" template t "${CHART}" 2>/dev/null | grep -qE -- "name: t-node$"; then
  bad "bootstrap identity renders the plain RBAC ClusterRole"
else
  ok "bootstrap identity: no ClusterRole of its own"
fi

# probe KIND ARGS: the rendered KIND (livenessProbe, readinessProbe) block of
# the crivk container.
probe() {
  local kind=$1
  shift
  "${HELM}" template t "${CHART}" --show-only templates/daemonset.yaml "$@" 2>/dev/null |
    awk -v k="${kind}:" '$1 == k { on = 1; ind = index($0, k); next } on && index($0, $1) <= ind { on = 0 } on'
}
# check_probe NAME KIND PORT ARGS: KIND asks /healthz over plain HTTP on the
# host's loopback at PORT, never the node API.
check_probe() {
  local name=$1 kind=$2 port=$3 out missing=() w
  shift 3
  out=$(probe "${kind}" "$@")
  for w in "host: 127.0.0.1" "path: /healthz" "port: ${port}" "scheme: HTTP"; do
    grep -qxF -- "${w}" <<<"$(sed 's/^ *//' <<<"${out}")" || missing+=("${w}")
  done
  if [ ${#missing[@]} -eq 0 ]; then ok "${name}"; else bad "${name}: missing ${missing[*]} in: ${out}"; fi
}
check_probe "liveness probe on crivk's /healthz" livenessProbe 10262
check_probe "readiness probe on crivk's /healthz" readinessProbe 10262
check_probe "probes follow healthzPort" livenessProbe 10300 --set healthzPort=10300
render "crivk serves /healthz on the loopback at healthzPort" \
  "--healthz-port=10262" "--healthz-bind-address=127.0.0.1" "name: healthz" "containerPort: 10262" --
render "another healthzPort" "--healthz-port=10300" "containerPort: 10300" -- --set healthzPort=10300
if probe livenessProbe | grep -qE -- "HTTPS|port: 10260"; then
  bad "the liveness probe still asks the node API"
else
  ok "the liveness probe does not ask the node API"
fi
render "well-known and node.kubernetes.io node labels" \
  "--node-labels=node.kubernetes.io/agent=crivk,node.kubernetes.io/pool=a,topology.kubernetes.io/zone=z1" -- \
  --set 'nodeLabels.topology\.kubernetes\.io/zone=z1,nodeLabels.node\.kubernetes\.io/pool=a'
render "a node name template" "--node-name=node-\$(MACHINE).crivk" -- --set 'nodeName=node-$(MACHINE).crivk'
render "profiling on, with tracing" \
  "--profiling-address=127.0.0.1:10261" "- --tracing" "name: profiling" "containerPort: 10261" -- \
  --set profiling.enabled=true,profiling.tracing=true
render "profiling on an IPv6 address and another port" "--profiling-address=[::1]:6060" -- \
  --set profiling.enabled=true,profiling.address=::1,profiling.port=6060
if "${HELM}" template t "${CHART}" 2>/dev/null | grep -qE -- "--profiling-address|--tracing|name: profiling"; then
  bad "profiling off by default: rendered anyway"
else
  ok "profiling off by default"
fi
render "crivk's runtime started by the pod (runtime.managed)" \
  "- name: runtime" "- runtime" "--config-dir=/etc/crivk-containerd" "--cni-bridge=crivk0" "--pod-cidr=10.89.0.0/16" \
  "--cgroup-root=/crivk" "type: DirectoryOrCreate" --
render "runtime options" "--containerd=/opt/bin/containerd" "--restrict-oom-score-adj" "--cni-bin-dir=/usr/lib/cni" -- \
  --set runtime.containerd=/opt/bin/containerd,runtime.restrictOOMScoreAdj=true,runtime.cniBinDir=/usr/lib/cni
if "${HELM}" template t "${CHART}" --set runtime.managed=false 2>/dev/null | grep -qE -- "--config-dir|^ *- runtime$"; then
  bad "runtime.managed=false: the runtime container rendered anyway"
else
  ok "runtime.managed=false: no runtime container"
fi
render "uninstall hooks: drain, then remove the release's nodes" \
  "helm.sh/hook: pre-delete" "helm.sh/hook: post-delete" "- drain" "- remove" \
  "--node-selector=crivk.io/release=t,crivk.io/release-namespace=crivk-system" \
  "--agent-selector=app.kubernetes.io/name=crivk,app.kubernetes.io/instance=t" \
  "--node-labels=node.kubernetes.io/agent=crivk,crivk.io/release=t,crivk.io/release-namespace=crivk-system" --
if "${HELM}" template t "${CHART}" --set uninstall.drain=false 2>/dev/null | grep -qF -- "helm.sh/hook"; then
  bad "uninstall.drain=false: hooks rendered anyway"
else
  ok "uninstall.drain=false: no uninstall hooks"
fi

# refuse NAME MESSAGE -- ARGS: helm template fails and says MESSAGE.
refuse() {
  local name=$1 msg=$2 out
  shift 3
  if out=$("${HELM}" template t "${CHART}" "$@" 2>&1); then
    bad "${name}: accepted"
  elif grep -qF -- "${msg}" <<<"${out}"; then
    ok "${name} refused: ${msg}"
  else
    bad "${name}: refused without \"${msg}\": ${out}"
  fi
}
refuse "a node name without the machine" "nodeName: \"crivk-fixed\" must contain \$(MACHINE)" -- --set nodeName=crivk-fixed
refuse "a node name with upper case" "nodeName: \"Crivk-\$(MACHINE)\" may hold, besides" -- --set 'nodeName=Crivk-$(MACHINE)'
refuse "the kubelet's port" "10250 is the kubelet's node API port" -- --set port=10250
refuse "the kubelet's read-only port" "10255 is the kubelet's read-only port" -- --set port=10255
refuse "profiling on the node API's port" "profiling.port: 10260 is crivk's node API port" -- --set profiling.enabled=true,profiling.port=10260
refuse "profiling on the kubelet's healthz port" "profiling.port: 10248 is the kubelet's healthz port" -- --set profiling.enabled=true,profiling.port=10248
refuse "a profiling port out of range" "at '/profiling/port': maximum: got 70,000, want 65,535" -- --set profiling.port=70000
refuse "a profiling address with a port" "profiling.address: \"127.0.0.1:6060\" is not an IP address" -- --set profiling.enabled=true,profiling.address=127.0.0.1:6060
refuse "tracing without profiling" "profiling.tracing needs profiling.enabled" -- --set profiling.tracing=true
refuse "/healthz on the kubelet's healthz port" "healthzPort: 10248 is the kubelet's healthz port" -- --set healthzPort=10248
refuse "/healthz on the node API's port" "healthzPort: 10260 is crivk's node API port" -- --set healthzPort=10260
refuse "/healthz on the profiling port" "healthzPort: 10261 is crivk's profiling port" -- --set profiling.enabled=true,healthzPort=10261
refuse "a healthz port out of range" "at '/healthzPort': maximum: got 70,000, want 65,535" -- --set healthzPort=70000
refuse "the kubelet's containerd" "is the kubelet's containerd" -- --set criEndpoint=unix:///run/containerd/containerd.sock
refuse "the kubelet's root dir" "/var/lib/kubelet is the kubelet's" -- --set rootDir=/var/lib/kubelet
refuse "the kubelet's pod logs" "/var/log/pods is the kubelet's" -- --set podLogDir=/var/log/pods
refuse "a directory in the kubelet's pod logs" "/var/log/pods/crivk: /var/log/pods is the kubelet's" -- --set podLogDir=/var/log/pods/crivk
refuse "the kubelet's cgroups" "inside the kubelet's cgroup tree" -- --set cgroupRoot=/kubepods/crivk
refuse "a node label the kubelet may not set" "nodeLabels: node-role.kubernetes.io/crivk: a node may not set" -- --set 'nodeLabels.node-role\.kubernetes\.io/crivk=x'
refuse "a taint value that would split the flag" "at '/registerWithTaints/0/value'" -- --set 'registerWithTaints[0].key=a,registerWithTaints[0].value=x:y,registerWithTaints[0].effect=NoSchedule'
refuse "an unknown identity" "value must be one of 'bootstrap', 'rbac'" -- --set identity=root
refuse "a bad taint effect" "registerWithTaints/0/effect" -- --set 'registerWithTaints[0].key=a,registerWithTaints[0].effect=Never'
refuse "the kubelet's CNI bridge" "runtime.cniBridge: cni0 is the bridge of containerd's default pod network" -- --set runtime.cniBridge=cni0
refuse "a bridge name too long" "at '/runtime/cniBridge'" -- --set runtime.cniBridge=a-very-long-bridge
refuse "a pod subnet that is no CIDR" "at '/runtime/podCIDR'" -- --set runtime.podCIDR=10.89.0.0
refuse "containerd's default pod subnet" "runtime.podCIDR: 10.88.0.0/16 is the subnet of containerd's default pod network" -- --set runtime.podCIDR=10.88.0.0/16
refuse "a relative runtime root" "at '/runtime/root'" -- --set runtime.root=var/lib/x
refuse "the kubelet's containerd root" "runtime.root: /var/lib/containerd is the kubelet's containerd's" -- --set runtime.root=/var/lib/containerd
refuse "the release label in nodeLabels" "nodeLabels: crivk.io/release is the chart's own" -- --set 'nodeLabels.crivk\.io/release=x'
refuse "an unknown value" "additional properties 'bogus' not allowed" -- --set bogus=1

echo "${passed} passed, ${failed} failed"
[ "${failed}" -eq 0 ]
