#!/usr/bin/env bash
# Checks charts/crivk with helm v3 built from hack/tools/helm: `helm lint
# --strict`, `helm template` of the default values and of the other modes
# (plain RBAC, serving certificate by CSR, node labels, profiling) with the
# flags and the KubeletConfiguration file (the ConfigMap's kubelet.yaml,
# --config) crivk must get, the file and flag list accepted by crivk itself
# (`crivk config check`, built by hack/build.sh), no setting left as a flag
# that has a field in the file, the probes on crivk's own /healthz, each
# identity's RBAC, and values that must be refused with a clear message
# (the kubelet's ports, runtime, directories or cgroups; failCgroupV1 not a
# boolean or set under config:; node labels a node
# may not set; taints that would split the flag; a profiling port on the
# node API's; out-of-range ports; bad enums; config: keys the chart
# writes from other values), and crivk's refusal of the default values
# (failCgroupV1 true) on a cgroup v1 machine. Prints one line per check and
# "N passed, N failed"; exits non-zero on a failure.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"${ROOT}/hack/build-kube.sh" helm >/dev/null
"${ROOT}/hack/build.sh" >/dev/null
HELM=${ROOT}/_output/bin/helm
CRIVK=${ROOT}/_output/bin/crivk
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT
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
  "--node-name=crivk-\$(MACHINE)" "--bootstrap-kubeconfig=in-cluster" "--config=/etc/crivk/kubelet.yaml" \
  "containerRuntimeEndpoint: unix:///run/crivk/containerd/containerd.sock" \
  "    port: 10260" "cgroupRoot: /crivk" "podLogsDir: /var/log/crivk-pods" "    failCgroupV1: true" \
  "    registerWithTaints:" "    - effect: NoSchedule" "      key: node.crivk.io/agent" "      value: crivk" \
  "--node-labels=node.kubernetes.io/agent=crivk" "name: system:node-bootstrapper" \
  "        clientCAFile: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt" \
  "name: system:certificates.k8s.io:certificatesigningrequests:nodeclient" "mountPropagation: Bidirectional" --
render "plain RBAC, serving certificate by CSR" \
  "kind: ClusterRole" "resources: [tokenreviews]" "    serverTLSBootstrap: true" \
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
  "    healthzPort: 10262" "    healthzBindAddress: 127.0.0.1" "name: healthz" "containerPort: 10262" --
render "another healthzPort" "    healthzPort: 10300" "containerPort: 10300" -- --set healthzPort=10300
if probe livenessProbe | grep -qE -- "HTTPS|port: 10260"; then
  bad "the liveness probe still asks the node API"
else
  ok "the liveness probe does not ask the node API"
fi
render "well-known and node.kubernetes.io node labels" \
  "--node-labels=node.kubernetes.io/agent=crivk,node.kubernetes.io/pool=a,topology.kubernetes.io/zone=z1" -- \
  --set 'nodeLabels.topology\.kubernetes\.io/zone=z1,nodeLabels.node\.kubernetes\.io/pool=a'
render "a cgroup v1 machine: failCgroupV1 false in the file" "    failCgroupV1: false" -- --set failCgroupV1=false
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

# ---- crivk's configuration file (the ConfigMap's kubelet.yaml, --config)

# kubelet_yaml ARGS: the kubelet.yaml of the rendered ConfigMap (a literal
# block under data); empty when the render fails (the checks then fail).
kubelet_yaml() {
  { "${HELM}" template t "${CHART}" --namespace crivk-system --show-only templates/configmap.yaml "$@" || true; } |
    awk '/^  kubelet.yaml: \|-?$/ { on = 1; next } on && /^    / { print substr($0, 5); next } on && !/^ *$/ { exit } on { print "" }'
}
# crivk_args ARGS: the crivk container's args, one a line.
crivk_args() {
  { "${HELM}" template t "${CHART}" --namespace crivk-system --show-only templates/daemonset.yaml "$@" || true; } |
    awk '/^        - name: crivk$/ { c = 1; next } /^        - name: / { c = 0 } c && /^          args:$/ { a = 1; next }
      a && /^            - / { sub(/^            - /, ""); print; next } a { exit }'
}
# checksum ARGS: the pod template's checksum of the ConfigMap.
checksum() {
  { "${HELM}" template t "${CHART}" --namespace crivk-system --show-only templates/daemonset.yaml "$@" || true; } |
    awk '$1 == "checksum/config:" { print $2 }'
}

out=$(kubelet_yaml)
if [ "$(sed -n 1,2p <<<"${out}")" = $'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration' ]; then
  ok "the ConfigMap's kubelet.yaml is a kubelet.config.k8s.io/v1beta1 KubeletConfiguration"
else
  bad "the ConfigMap's kubelet.yaml does not start with the KubeletConfiguration's apiVersion and kind: ${out}"
fi
out=$("${HELM}" template t "${CHART}" --namespace crivk-system --show-only templates/daemonset.yaml 2>&1 || true)
missing=()
for w in "- --config=/etc/crivk/kubelet.yaml" "- name: config" "mountPath: /etc/crivk" "readOnly: true" "configMap:" "name: t-config"; do
  grep -qF -- "${w}" <<<"${out}" || missing+=("${w}")
done
if [ ${#missing[@]} -eq 0 ] && crivk_args | grep -qxF -- "--config=/etc/crivk/kubelet.yaml"; then
  ok "the DaemonSet mounts the ConfigMap t-config at /etc/crivk and passes crivk --config"
else
  bad "the DaemonSet's ConfigMap mount or crivk's --config: missing ${missing[*]:-} or --config not in crivk's args: $(crivk_args | tr '\n' ' ')"
fi
a=$(checksum) b=$(checksum) c=$(checksum --set config.maxPods=50)
if [ -n "${a}" ] && [ "${a}" = "${b}" ] && [ "${a}" != "${c}" ]; then
  ok "a changed configuration file changes the pod template's checksum/config (the DaemonSet rolls)"
else
  bad "checksum/config: ${a:-none}, again ${b:-none}, with config.maxPods=50 ${c:-none}; want it stable and changed by the file"
fi
out=$(kubelet_yaml --set config.maxPods=57,config.authentication.anonymous.enabled=false --set 'config.clusterDNS={10.96.0.10}')
missing=()
for w in "maxPods: 57" "  anonymous:" "    enabled: false" "    clientCAFile: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt" "- 10.96.0.10" "port: 10260"; do
  grep -qxF -- "${w}" <<<"${out}" || missing+=("${w}")
done
if [ ${#missing[@]} -eq 0 ]; then
  ok "config: values land in kubelet.yaml, merged with the chart's fields"
else
  bad "config: values in kubelet.yaml: missing ${missing[*]} in: ${out}"
fi

# No setting that has a KubeletConfiguration field stays a flag of crivk's:
# the flags the file's fields map to are kubeletconfig's table.
mapped=$(grep -oE '^\s+[a-zA-Z0-9]+\("[^"]+", "[^"]+"|flag: "[^"]+"' "${ROOT}/kubeletconfig/fields.go" | grep -oE '"[^"]+"$' | tr -d '"')
if [ "$(wc -l <<<"${mapped}")" -lt 40 ]; then
  bad "read only $(wc -l <<<"${mapped}") field -> flag mappings from kubeletconfig/fields.go (its table changed shape?)"
else
  for set in "" "identity=rbac,servingCert=csr" "profiling.enabled=true,profiling.tracing=true" "clientCAFile=,registerWithTaints=null"; do
    moved=()
    while IFS= read -r arg; do
      name=${arg#--}
      name=${name%%=*}
      if grep -qxF -- "${name}" <<<"${mapped}"; then moved+=("${arg}"); fi
    done < <(crivk_args ${set:+--set "${set}"})
    if [ ${#moved[@]} -eq 0 ]; then
      ok "crivk's flags${set:+ with ${set}} hold no setting of a KubeletConfiguration field ($(crivk_args ${set:+--set "${set}"} | sed 's/=.*//' | tr '\n' ' '))"
    else
      bad "crivk's flags${set:+ with ${set}} still hold settings of KubeletConfiguration fields: ${moved[*]}"
    fi
  done
fi

# crivk itself: the DaemonSet's flag list with the rendered kubelet.yaml,
# through `crivk config check` (the checks crivk makes at start, nothing
# started). The pod's $(MACHINE) and $(NODE_IP) are given values, and the
# service-account CA the file names, absent here, a CA of the test's on the
# command line (flags override the file). crivk checks this machine's
# cgroups as at start: on cgroup v1 (this project's machines) the renders
# below set failCgroupV1=false, as an install there must, and the default
# values must be refused with the kubelet's message.
CGROUP_VERSION=1
if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then CGROUP_VERSION=2; fi
onthismachine=()
[ "${CGROUP_VERSION}" = 2 ] || onthismachine=(--set failCgroupV1=false)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "${TMP}/ca.key" -out "${TMP}/ca.crt" \
  -subj /CN=chart-test -days 1 >/dev/null 2>&1
# config_check NAME WANT... -- ARGS: crivk accepts the file and flags of
# the render with ARGS and its effective configuration holds every WANT line.
config_check() {
  local name=$1 out w missing=() args=()
  shift
  local wants=()
  while [ "$1" != -- ]; do wants+=("$1"); shift; done
  shift
  set -- "${onthismachine[@]}" "$@"
  kubelet_yaml "$@" >"${TMP}/kubelet.yaml"
  while IFS= read -r w; do
    w=${w//\$(MACHINE)/m1}
    w=${w//\$(NODE_IP)/192.0.2.10}
    args+=("${w/#--config=*/--config=${TMP}/kubelet.yaml}")
  done < <(crivk_args "$@")
  if ! out=$("${CRIVK}" config check "${args[@]}" --client-ca-file="${TMP}/ca.crt" 2>&1); then
    bad "${name}: crivk config check ${args[*]}: ${out}"; return
  fi
  for w in "${wants[@]}"; do grep -qxF -- "${w}" <<<"${out}" || missing+=("${w}"); done
  if [ ${#missing[@]} -eq 0 ]; then ok "${name}"; else bad "${name}: the effective configuration lacks ${missing[*]}: ${out}"; fi
}
config_check "crivk accepts the default values' file and flags" \
  "containerRuntimeEndpoint: unix:///run/crivk/containerd/containerd.sock" "port: 10260" "healthzPort: 10262" \
  "cgroupRoot: /crivk" "podLogsDir: /var/log/crivk-pods" "  key: node.crivk.io/agent" "rotateCertificates: true" --
config_check "crivk accepts plain RBAC, CSR serving certificate, profiling" "serverTLSBootstrap: true" -- \
  --set identity=rbac,servingCert=csr,profiling.enabled=true,profiling.tracing=true
config_check "crivk takes config: values from the file" "maxPods: 57" "- 10.96.0.10" "imageGCHighThresholdPercent: 90" "  memory.available: 200Mi" -- \
  --set config.maxPods=57,config.imageGCHighThresholdPercent=90,config.evictionHard.memory\\.available=200Mi --set 'config.clusterDNS={10.96.0.10}'
kubelet_yaml >"${TMP}/v1.yaml"
if [ "${CGROUP_VERSION}" = 2 ]; then
  if out=$("${CRIVK}" config check --config="${TMP}/v1.yaml" --client-ca-file="${TMP}/ca.crt" 2>&1) && grep -qxF "failCgroupV1: true" <<<"${out}"; then
    ok "the default values on this cgroup v2 machine: crivk accepts them, failCgroupV1 true"
  else
    bad "the default values on this cgroup v2 machine: ${out}"
  fi
elif out=$("${CRIVK}" config check --config="${TMP}/v1.yaml" --client-ca-file="${TMP}/ca.crt" 2>&1); then
  bad "the default values on this cgroup v1 machine: crivk config check accepted them"
elif grep -qxF "crivk config check: kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release" <<<"${out}"; then
  ok "the default values on this cgroup v1 machine are refused with the kubelet's message (failCgroupV1)"
else
  bad "the default values on this cgroup v1 machine: refused without the kubelet's message: ${out}"
fi
kubelet_yaml "${onthismachine[@]}" --set config.cpuManagerPolicy=static >"${TMP}/refused.yaml"
if out=$("${CRIVK}" config check --config="${TMP}/refused.yaml" --client-ca-file="${TMP}/ca.crt" 2>&1); then
  bad "config.cpuManagerPolicy=static: crivk config check accepted it"
elif grep -qF "KubeletConfiguration field cpuManagerPolicy is not supported by crivk" <<<"${out}"; then
  ok "a config: field crivk does not support is refused by crivk config check, by name"
else
  bad "config.cpuManagerPolicy=static: refused without its name: ${out}"
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
refuse "the node API port in config:" "config.port: written by the chart from the value port" -- --set config.port=10270
refuse "the runtime endpoint in config:" "config.containerRuntimeEndpoint: written by the chart from the value criEndpoint" -- --set config.containerRuntimeEndpoint=unix:///x.sock
refuse "taints in config:" "config.registerWithTaints: written by the chart from the value registerWithTaints" -- --set 'config.registerWithTaints[0].key=a,config.registerWithTaints[0].effect=NoSchedule'
refuse "the client CA in config:" "config.authentication.x509.clientCAFile: written by the chart from the value clientCAFile" -- --set config.authentication.x509.clientCAFile=/x
refuse "the healthz address in config:" "config.healthzBindAddress: the chart binds crivk's /healthz to 127.0.0.1" -- --set config.healthzBindAddress=0.0.0.0
refuse "failCgroupV1 in config:" "config.failCgroupV1: written by the chart from the value failCgroupV1" -- --set config.failCgroupV1=false
refuse "failCgroupV1 not a boolean" "at '/failCgroupV1'" -- --set failCgroupV1=maybe
refuse "the kind in config:" "config.kind: config holds the KubeletConfiguration's fields only" -- --set config.kind=Other
refuse "config: not a map" "at '/config': got string, want object" -- --set config=x

echo "${passed} passed, ${failed} failed"
[ "${failed}" -eq 0 ]
