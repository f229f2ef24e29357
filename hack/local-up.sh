#!/usr/bin/env bash
# Starts a local test cluster for crivk, everything in the background with
# PIDs recorded under _output/local/pids/ and logs under _output/local/logs/:
#
#   containerd               project-owned: own config, root, state, socket and
#                            CNI network (${CRIVK_RUN_DIR:-/run/crivk}/containerd/containerd.sock)
#   etcd                     127.0.0.1:2479 (peer 2480), data in _output/local/etcd
#                            (LOCAL_ETCD=built: _output/local/etcd-3.6; with
#                            LOCAL_STATE=NAME: etcd-NAME, etcd-3.6-NAME)
#   kube-apiserver           https://NODE_IP:6443
#   kube-controller-manager  127.0.0.1:10357
#   kube-scheduler           127.0.0.1:10359
#   docker-registry          https://NODE_IP:5443, with REGISTRY=1 (make test): TLS and
#                            htpasswd auth, the busybox image as NODE_IP:5443/e2e/busybox
#   registry-mirror          https://NODE_IP:5444, with REGISTRY_MIRROR=1 (hack/node-conformance.sh):
#                            a mirror of registry.k8s.io for containerd, no auth, holding
#                            the registry.k8s.io images imported below at the same digests
#   metrics-server           https://NODE_IP:4443, with METRICS_SERVER=1 (make run, make
#                            test): metrics.k8s.io through the aggregation layer
#
# and imports the test images (hack/images.sh). No kubelet: crivk is the node
# agent. When it is done, `source _output/local/env` gives KUBECONFIG,
# NODE_KUBECONFIG, CRI_ENDPOINT and the rest (see write_env below).
#
# Idempotent: a component whose recorded process is still running the same
# binary with the same arguments and configuration is kept. After a crash
# (processes gone or killed with SIGKILL) it cleans stale PID files and
# sockets, left-over runc containers, containerd shims and mounts of our
# containerd before starting it again. Run as root after hack/install-deps.sh.
#
# Usage: hack/local-up.sh
# Environment: NODE_IP (default: the machine's routable IPv4), NODE_NAME
# (crivk-local), POD_CIDR (10.88.0.0/16), CNI_BRIDGE (crivk0),
# CRIVK_RUN_DIR (/run/crivk), METRICS_SERVER (0), REGISTRY (0), REGISTRY_MIRROR (0),
# KCM_CONTROLLERS (the controller manager's --controllers, '*,-nodeipam';
# hack/node-conformance.sh adds -nodelifecycle, as upstream's node e2e runs
# no controller manager), DISABLE_ADMISSION_PLUGINS (kube-apiserver's
# --disable-admission-plugins, none by default; hack/node-conformance.sh
# gives TaintNodesByCondition, as upstream's node e2e API server: that
# plugin taints every new Node node.kubernetes.io/not-ready:NoSchedule and
# only the node lifecycle controller takes the taint off),
# LOCAL_ETCD=system|built: which etcd runs. system (the default) is Debian's
# etcd-server 3.4.23 from PATH, data in _output/local/etcd. built is etcd
# 3.7.0 built from the module proxy (hack/tools/cmd/etcd, the
# go.etcd.io/etcd/server/v3 of hack/tools/go.mod; hack/build-kube.sh etcd
# builds _output/bin/etcd when it is missing or of another version), with
# the same flags and ports, data in _output/local/etcd-3.6 (3.6 panics on a
# 3.4 data dir). 3.4.23 lacks watch progress requests (RequestWatchProgress),
# so the API server's watch cache lags and ends watches with "Too large
# resource version" (docs/environment.md); hack/node-conformance.sh uses
# built. An etcd of the other kind found running is stopped and the one
# asked for started, each on its own data, and kube-apiserver,
# kube-controller-manager and kube-scheduler restart with it (etcd_data);
# local-down stops either kind.
# CONTAINERD=built|system (hack/lib/local.sh): the runtime's lane. built
# (the default) is containerd 2, runc and the CNI plugins built from their
# Go modules by hack/build-runtime.sh (run here), system is Debian's
# containerd 1.6 with its runc and plugins; each lane has its own root
# (_output/local/containerd2, _output/local/containerd). A containerd of
# the other lane found running is stopped, with its shims, and the one
# asked for started.
# MACHINES=N, N > 1 (hack/lib/local.sh; hack/run-machines.sh sets it): the
# control plane of the cluster of machines (#45, hack/README.md "Several
# machines on one"), whose nodes run in the machines of hack/machines.sh:
# no containerd on the host (one of ours left running by a single node is
# stopped, its pods removed), so no test images imported here (the
# machines import their own); the controller manager allocates each
# Node's spec.podCIDR (--allocate-node-cidrs, --cluster-cidr CLUSTER_CIDR,
# --node-cidr-mask-size NODE_CIDR_MASK_SIZE, and the nodeipam controller
# on: --controllers '*' unless KCM_CONTROLLERS says otherwise); the env
# file also holds MACHINES, CLUSTER_CIDR, CLUSTER_DNS and CLUSTER_DOMAIN.
# REGISTRY and REGISTRY_MIRROR are refused (both serve the host's
# containerd). Everything else as for the single node. Written for phase 2
# of #45; NOT RUN YET (hack/README.md says what was).
# LOCAL_STATE=NAME (hack/lib/local.sh): etcd's data in a dir of its own,
# _output/local/etcd-NAME (etcd-3.6-NAME): hack/test.sh's cluster tiers
# (test) and hack/walkthrough.sh (walkthrough) do not see what `make run`
# keeps in _output/local/etcd.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=local-up
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"

started_at=$(date +%s)
trap 'log "FAILED (line ${LINENO})" >&2' ERR

# fail NAME MSG: reports MSG with the last 30 lines of NAME's log and exits.
fail() {
  log "ERROR: $2" >&2
  if [ -f "${LOG_DIR}/$1.log" ]; then
    echo "----- last 30 lines of ${LOG_DIR}/$1.log -----" >&2
    tail -n 30 "${LOG_DIR}/$1.log" >&2
    echo "-----" >&2
  fi
  exit 1
}

preflight() {
  local missing=() c
  [ "$(id -u)" -eq 0 ] || { log "ERROR: must run as root" >&2; exit 1; }
  case "${LOCAL_ETCD}" in
    system | built) ;;
    *) log "ERROR: LOCAL_ETCD must be system or built, not '${LOCAL_ETCD}'" >&2; exit 1 ;;
  esac
  if [ "${MACHINES}" -gt 1 ] && { [ "${REGISTRY:-0}" = 1 ] || [ "${REGISTRY_MIRROR:-0}" = 1 ]; }; then
    log "ERROR: REGISTRY and REGISTRY_MIRROR serve the host's containerd, which MACHINES=${MACHINES} does not run" >&2
    exit 1
  fi
  # CONTAINERD=built runs the runtime of hack/build-runtime.sh (first in
  # PATH: hack/lib/local.sh), built here when missing or of another version.
  if [ "${CONTAINERD}" = built ]; then
    command -v go >/dev/null || { log "ERROR: missing go; run hack/install-deps.sh" >&2; exit 1; }
    "${ROOT}/hack/build-runtime.sh"
  fi
  for c in containerd containerd-shim-runc-v2 ctr runc openssl gcc iptables ip curl go; do
    command -v "${c}" >/dev/null || missing+=("${c}")
  done
  [ "$(component_bin containerd)" = "$(readlink -f "$(command -v containerd)")" ] ||
    missing+=("$(component_bin containerd)")
  # LOCAL_ETCD=built runs _output/bin/etcd (hack/build-kube.sh etcd, below).
  [ "${LOCAL_ETCD}" = built ] || command -v etcd >/dev/null || missing+=(etcd)
  [ -x "${CNI_BIN_DIR}/bridge" ] || missing+=("${CNI_BIN_DIR}/bridge")
  [ -x /bin/busybox ] || missing+=(/bin/busybox)
  if [ ${#missing[@]} -gt 0 ]; then
    log "ERROR: missing ${missing[*]}; run hack/install-deps.sh" >&2
    exit 1
  fi
  mkdir -p "${PID_DIR}" "${LOG_DIR}" "${PKI_DIR}" "${ETCD_DIR}" "${CNI_CONF_DIR}" \
    "${CONTAINERD_ROOT}" "${CONTAINERD_STATE}" "${RUNC_ROOT}" "${CNI_DATA_DIR}"
  chmod 0700 "${PKI_DIR}" "${ETCD_DIR}"
}

# detect_node_ip: NODE_IP, else the source address of the default route, else
# the first global IPv4 of a non-loopback, non-bridge interface.
detect_node_ip() {
  local ip=${NODE_IP:-}
  if [ -z "${ip}" ]; then
    ip=$(ip -4 route get 1.1.1.1 2>/dev/null |
      awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}')
  fi
  if [ -z "${ip}" ]; then
    ip=$(ip -4 -o addr show scope global |
      awk -v br="${CNI_BRIDGE}" '$2 != "lo" && $2 != br && $2 !~ /^(veth|cni|docker)/ {split($4, a, "/"); print a[1]; exit}')
  fi
  case "${ip}" in
    "" | 127.*) log "ERROR: no routable IPv4 address found; set NODE_IP" >&2; exit 1 ;;
  esac
  if ! ip -4 -o addr show | awk '{split($4, a, "/"); print a[1]}' | grep -qxF "${ip}"; then
    log "ERROR: NODE_IP ${ip} is not an address of this machine" >&2
    exit 1
  fi
  NODE_IP=${ip}
}

# write_if_changed FILE [MODE]: replaces FILE with stdin (atomically) unless
# the content is the same; MODE defaults to 0644.
write_if_changed() {
  local tmp
  tmp=$(mktemp "$1.XXXXXX")
  cat >"${tmp}"
  chmod "${2:-0644}" "${tmp}"
  if cmp -s "${tmp}" "$1"; then
    rm -f "${tmp}"
    chmod "${2:-0644}" "$1"
  else
    mv -f "${tmp}" "$1"
  fi
}

# ---------------------------------------------------------------- certificates

# (cert, which makes each certificate, is in hack/lib/local.sh: hack/machines.sh
# makes the machines' serving certificates with it.)

make_pki() {
  if [ ! -s "${PKI_DIR}/ca.key" ] || [ ! -s "${PKI_DIR}/ca.crt" ]; then
    log "generating CA"
    (umask 077 && openssl genrsa -out "${PKI_DIR}/ca.key" 2048 2>/dev/null)
    openssl req -x509 -new -key "${PKI_DIR}/ca.key" -sha256 -days 3650 -subj "/CN=crivk-local-ca" \
      -addext "basicConstraints = critical, CA:TRUE" \
      -addext "keyUsage = critical, keyCertSign, cRLSign, digitalSignature" \
      -out "${PKI_DIR}/ca.crt"
  fi
  cert apiserver "/CN=kube-apiserver" serverAuth \
    "DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local, DNS:localhost, IP:127.0.0.1, IP:${NODE_IP}, IP:${SERVICE_IP}"
  cert admin "/O=system:masters/CN=admin" clientAuth
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  cert scheduler "/CN=system:kube-scheduler" clientAuth
  cert controller-manager "/CN=system:kube-controller-manager" clientAuth
  # The aggregation layer's client (kube-apiserver -> metrics-server),
  # trusted through --requestheader-client-ca-file.
  cert front-proxy-client "/CN=front-proxy-client" clientAuth
  cert registry "/CN=crivk-local-registry" serverAuth "DNS:localhost, IP:127.0.0.1, IP:${NODE_IP}"
  cert node "/O=system:nodes/CN=system:node:${NODE_NAME}" clientAuth
  # Serving certificate for crivk's kubelet endpoint (port 10250): the API
  # server does not verify it (no --kubelet-certificate-authority), but a real
  # one keeps clients that do verify working.
  cert node-serving "/O=system:nodes/CN=system:node:${NODE_NAME}" serverAuth \
    "DNS:${NODE_NAME}, DNS:localhost, IP:127.0.0.1, IP:${NODE_IP}"
  if [ ! -s "${PKI_DIR}/sa.key" ] || [ ! -s "${PKI_DIR}/sa.pub" ]; then
    log "generating service-account key pair"
    (umask 077 && openssl genrsa -out "${PKI_DIR}/sa.key" 2048 2>/dev/null)
    openssl rsa -in "${PKI_DIR}/sa.key" -pubout -out "${PKI_DIR}/sa.pub" 2>/dev/null
  fi
}

# kubeconfig FILE USER CERT_NAME: a kubeconfig with everything embedded.
kubeconfig() {
  local b64ca b64crt b64key
  b64ca=$(base64 -w0 <"${PKI_DIR}/ca.crt")
  b64crt=$(base64 -w0 <"${PKI_DIR}/$3.crt")
  b64key=$(base64 -w0 <"${PKI_DIR}/$3.key")
  write_if_changed "$1" 0600 <<EOF
apiVersion: v1
kind: Config
clusters:
- name: crivk-local
  cluster:
    server: https://${NODE_IP}:${APISERVER_PORT}
    certificate-authority-data: ${b64ca}
users:
- name: $2
  user:
    client-certificate-data: ${b64crt}
    client-key-data: ${b64key}
contexts:
- name: $2@crivk-local
  context:
    cluster: crivk-local
    user: $2
current-context: $2@crivk-local
EOF
}

make_kubeconfigs() {
  kubeconfig "${LOCAL_DIR}/admin.kubeconfig" admin admin
  kubeconfig "${LOCAL_DIR}/scheduler.kubeconfig" system:kube-scheduler scheduler
  kubeconfig "${LOCAL_DIR}/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
  kubeconfig "${LOCAL_DIR}/node.kubeconfig" "system:node:${NODE_NAME}" node
}

# ------------------------------------------------------------------ processes

# ensure_running NAME FINGERPRINT CMD...: keeps NAME's recorded process when it
# is ours, still runs the binary on disk and was started with the same command
# line and FINGERPRINT (a hash of the files it reads at start); otherwise stops
# every process of NAME and starts CMD in its own session, logging to
# LOG_DIR/NAME.log, its PID in PID_DIR/NAME.pid. Sets STARTED to true or
# false. The caller then waits for NAME's health (wait_until), which also
# fails when that process exits.
ensure_running() {
  local name=$1 fingerprint=$2 pid want
  shift 2
  want="$(printf '%q ' "$@")# ${fingerprint}"
  STARTED=false
  pid=$(recorded_pid "${name}")
  if [ -n "${pid}" ]; then
    if [ "$(readlink "/proc/${pid}/exe")" = "$(component_bin "${name}")" ] &&
      [ "$(cat "${PID_DIR}/${name}.args" 2>/dev/null)" = "${want}" ]; then
      log "${name} already running (pid ${pid})"
      return 0
    fi
    log "${name} binary, arguments or configuration changed: restarting"
  fi
  stop_component "${name}"
  if [ "${name}" = containerd ]; then
    cleanup_runtime || fail containerd "cannot clean up after the previous containerd"
  fi
  log "starting ${name}"
  echo "===== $(date -u +%Y-%m-%dT%H:%M:%SZ) hack/local-up.sh: starting ${name}" >>"${LOG_DIR}/${name}.log"
  # The PID is the one the component's process wrote itself (start_detached):
  # whether it started is for the caller's health check (wait_until) to say,
  # within the component's own timeout, not for its executable link now.
  start_detached "${PID_DIR}/${name}.pid" "${LOG_DIR}/${name}.log" "$@" ||
    fail "${name}" "${name}'s process did not write its PID within 30 s"
  echo "${want}" >"${PID_DIR}/${name}.args"
  STARTED=true
}

# wait_until NAME TIMEOUT WHAT CMD...: polls CMD (NAME's health) until it
# succeeds; fails with NAME's log when NAME's recorded process exits or
# TIMEOUT seconds pass, or when CMD succeeds while that process is not
# NAME's (another process answering on its port).
wait_until() {
  local name=$1 timeout=$2 what=$3 deadline pid
  shift 3
  deadline=$(($(date +%s) + timeout))
  pid=$(cat "${PID_DIR}/${name}.pid")
  until "$@" >/dev/null 2>&1; do
    pid_alive "${pid}" || fail "${name}" "${name} (pid ${pid}) exited while waiting for ${what}"
    [ "$(date +%s)" -lt "${deadline}" ] || fail "${name}" "timed out after ${timeout}s waiting for ${what} (pid ${pid} $(pid_alive "${pid}" && echo running || echo exited))"
    sleep 0.2
  done
  is_ours "${name}" "${pid}" ||
    fail "${name}" "${what} answered, but pid ${pid} is not ${name} of ${LOCAL_DIR} (exe $(readlink "/proc/${pid}/exe" 2>/dev/null || echo gone)): another process on its port?"
}

fingerprint() { cat "$@" | sha256sum | cut -c1-16; }

# ----------------------------------------------------------------- containerd

write_containerd_config() {
  printf 'runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 30\n' "${CRI_ENDPOINT}" "${CRI_ENDPOINT}" |
    write_if_changed "${CRICTL_CONFIG}"

  containerd_config | write_if_changed "${CONTAINERD_CONFIG}"
  registry_hosts

  cni_conflist | write_if_changed "${CNI_CONF_DIR}/10-${CNI_NETWORK}.conflist"
}

cri_ready() {
  local conditions
  [ -S "${CONTAINERD_SOCK}" ] || return 1
  ctr --address "${CONTAINERD_SOCK}" version >/dev/null 2>&1 || return 1
  conditions=$("${CRICTL}" --config "${CRICTL_CONFIG}" --timeout 5s info -o go-template \
    --template '{{range .status.conditions}}{{.type}}={{.status}} {{end}}' 2>/dev/null) || return 1
  [[ "${conditions}" == *"RuntimeReady=true"* && "${conditions}" == *"NetworkReady=true"* ]]
}

start_containerd() {
  write_containerd_config
  ensure_running containerd "$(fingerprint "${CONTAINERD_CONFIG}")" \
    "$(component_bin containerd)" --config "${CONTAINERD_CONFIG}"
  local fresh=${STARTED}
  wait_until containerd 60 "the CRI runtime and network to be ready" cri_ready
  if [ "${fresh}" = true ]; then
    # Sandboxes recorded by a previous (crashed) containerd are dead now;
    # removing them through the CRI releases their IPs and iptables rules.
    remove_all_pods
  fi
  "${ROOT}/hack/images.sh" "${CONTAINERD_SOCK}" || fail containerd "importing the test images failed"
}

# stop_host_runtime (MACHINES > 1): the nodes and their containerds are the
# machines' (hack/machines.sh), none runs on the host. A containerd of ours
# that a single-node run left is stopped as local-down stops it: its pod
# sandboxes removed first, then what it leaves cleaned up. The machines'
# containerds are not ours (their command lines do not name LOCAL_DIR,
# their shims' -address is not CONTAINERD_SOCK, their mounts are in their
# own mount namespaces).
stop_host_runtime() {
  if [ -n "$(recorded_pid containerd)" ] && [ -S "${CONTAINERD_SOCK}" ]; then
    remove_all_pods
  fi
  stop_component containerd
  cleanup_runtime || fail containerd "cannot clean up after the host's containerd"
}

# ---------------------------------------------------------- control plane

etcd_healthy() {
  curl -sf --max-time 2 "http://127.0.0.1:${ETCD_CLIENT_PORT}/health" | grep -q '"health":"true"'
}

# admin_get PATH: GET PATH from the API server as admin.
admin_get() {
  curl -sf --max-time 5 --cacert "${PKI_DIR}/ca.crt" --cert "${PKI_DIR}/admin.crt" \
    --key "${PKI_DIR}/admin.key" "https://127.0.0.1:${APISERVER_PORT}$1"
}

apiserver_ready() { [ "$(admin_get /readyz)" = ok ]; }
default_sa_exists() { admin_get /api/v1/namespaces/default/serviceaccounts/default >/dev/null; }
healthz() { [ "$(curl -skf --max-time 2 "https://127.0.0.1:$1/healthz")" = ok ]; }

# etcd_data: for the fingerprints of the processes that read the API
# (kube-apiserver, kube-controller-manager, kube-scheduler), which etcd
# data they serve when it is not Debian's etcd's: switching LOCAL_ETCD
# switches the data under them (the other data dir's objects and
# revisions), which their watch caches and informers must not carry over,
# so they restart with it; as does switching LOCAL_STATE. Empty for
# Debian's etcd on `make run`'s data (LOCAL_DIR/etcd), whose recorded
# fingerprints stay what they were before LOCAL_ETCD.
etcd_data() { [ "${ETCD_DIR}" = "${LOCAL_DIR}/etcd" ] || echo " etcd-data=${ETCD_DIR}"; }

start_etcd() {
  [ "${ETCD_DIR}" = "${LOCAL_DIR}/etcd" ] ||
    log "etcd: LOCAL_ETCD=${LOCAL_ETCD}${LOCAL_STATE:+ LOCAL_STATE=${LOCAL_STATE}}, $(component_bin etcd), data in ${ETCD_DIR}"
  ensure_running etcd "" "$(component_bin etcd)" \
    --name crivk-local \
    --data-dir "${ETCD_DIR}" \
    --listen-client-urls "http://127.0.0.1:${ETCD_CLIENT_PORT}" \
    --advertise-client-urls "http://127.0.0.1:${ETCD_CLIENT_PORT}" \
    --listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-cluster "crivk-local=http://127.0.0.1:${ETCD_PEER_PORT}"
  wait_until etcd 60 "etcd /health" etcd_healthy
}

start_apiserver() {
  ensure_running kube-apiserver \
    "$(fingerprint "${PKI_DIR}"/{ca,apiserver,apiserver-kubelet-client,front-proxy-client}.crt "${PKI_DIR}/sa.pub")$(etcd_data)" \
    "${BIN_DIR}/kube-apiserver" \
    --advertise-address="${NODE_IP}" \
    --bind-address=0.0.0.0 \
    --secure-port="${APISERVER_PORT}" \
    --etcd-servers="http://127.0.0.1:${ETCD_CLIENT_PORT}" \
    --tls-cert-file="${PKI_DIR}/apiserver.crt" \
    --tls-private-key-file="${PKI_DIR}/apiserver.key" \
    --client-ca-file="${PKI_DIR}/ca.crt" \
    --service-account-key-file="${PKI_DIR}/sa.pub" \
    --service-account-signing-key-file="${PKI_DIR}/sa.key" \
    --service-account-issuer="${SA_ISSUER}" \
    --api-audiences="${SA_ISSUER}" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction \
    ${DISABLE_ADMISSION_PLUGINS:+--disable-admission-plugins="${DISABLE_ADMISSION_PLUGINS}"} \
    --enable-bootstrap-token-auth=true \
    --service-cluster-ip-range="${SERVICE_CIDR}" \
    --allow-privileged=true \
    --kubelet-client-certificate="${PKI_DIR}/apiserver-kubelet-client.crt" \
    --kubelet-client-key="${PKI_DIR}/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --requestheader-client-ca-file="${PKI_DIR}/ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="${PKI_DIR}/front-proxy-client.crt" \
    --proxy-client-key-file="${PKI_DIR}/front-proxy-client.key" \
    --enable-aggregator-routing=true \
    --enable-priority-and-fairness=false \
    --shutdown-watch-termination-grace-period=2s \
    --cert-dir="${LOCAL_DIR}/apiserver-certs"
  wait_until kube-apiserver 120 "kube-apiserver /readyz" apiserver_ready
}

start_controller_manager() {
  local kc=${LOCAL_DIR}/controller-manager.kubeconfig controllers=${KCM_CONTROLLERS:-*,-nodeipam} nodeipam=()
  if [ "${MACHINES}" -gt 1 ]; then
    # Each Node gets spec.podCIDR, a /NODE_CIDR_MASK_SIZE of CLUSTER_CIDR:
    # flannel's lease (--kube-subnet-mgr) on the nodes of the machines.
    controllers=${KCM_CONTROLLERS:-*}
    nodeipam=(--allocate-node-cidrs=true --cluster-cidr="${CLUSTER_CIDR}" --node-cidr-mask-size="${NODE_CIDR_MASK_SIZE}")
  fi
  ensure_running kube-controller-manager "$(fingerprint "${kc}" "${PKI_DIR}/sa.key")$(etcd_data)" \
    "${BIN_DIR}/kube-controller-manager" \
    --kubeconfig="${kc}" \
    --authentication-kubeconfig="${kc}" \
    --authorization-kubeconfig="${kc}" \
    --service-account-private-key-file="${PKI_DIR}/sa.key" \
    --root-ca-file="${PKI_DIR}/ca.crt" \
    --use-service-account-credentials=true \
    --controllers="${controllers}" \
    --cluster-signing-cert-file="${PKI_DIR}/ca.crt" \
    --cluster-signing-key-file="${PKI_DIR}/ca.key" \
    --cluster-signing-duration="${CSR_SIGNING_DURATION:-8760h}" \
    --service-cluster-ip-range="${SERVICE_CIDR}" \
    --leader-elect=false \
    --bind-address=127.0.0.1 \
    --secure-port="${CONTROLLER_MANAGER_PORT}" \
    --cert-dir="${LOCAL_DIR}/controller-manager-certs" \
    "${nodeipam[@]}"
  wait_until kube-controller-manager 60 "kube-controller-manager /healthz" healthz "${CONTROLLER_MANAGER_PORT}"
}

start_scheduler() {
  local kc=${LOCAL_DIR}/scheduler.kubeconfig
  ensure_running kube-scheduler "$(fingerprint "${kc}")$(etcd_data)" \
    "${BIN_DIR}/kube-scheduler" \
    --kubeconfig="${kc}" \
    --authentication-kubeconfig="${kc}" \
    --authorization-kubeconfig="${kc}" \
    --leader-elect=false \
    --bind-address=127.0.0.1 \
    --secure-port="${SCHEDULER_PORT}" \
    --cert-dir="${LOCAL_DIR}/scheduler-certs"
  wait_until kube-scheduler 60 "kube-scheduler /healthz" healthz "${SCHEDULER_PORT}"
}

# ---------------------------------------------------------- TLS bootstrap

# admin_post PATH JSON: POST JSON to PATH as admin; an object that already
# exists (409) is fine.
admin_post() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "${PKI_DIR}/ca.crt" \
    --cert "${PKI_DIR}/admin.crt" --key "${PKI_DIR}/admin.key" -X POST \
    -H 'Content-Type: application/json' --data "$2" "https://127.0.0.1:${APISERVER_PORT}$1")
  case "${code}" in
    200 | 201 | 409) return 0 ;;
    *) log "ERROR: POST $1 answered ${code}" >&2; return 1 ;;
  esac
}

# admin_put PATH JSON: creates or replaces the object at PATH.
admin_put() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "${PKI_DIR}/ca.crt" \
    --cert "${PKI_DIR}/admin.crt" --key "${PKI_DIR}/admin.key" -X PUT \
    -H 'Content-Type: application/json' --data "$2" "https://127.0.0.1:${APISERVER_PORT}$1")
  case "${code}" in
    200 | 201) return 0 ;;
    *) log "ERROR: PUT $1 answered ${code}" >&2; return 1 ;;
  esac
}

# crb NAME CLUSTERROLE GROUP: a ClusterRoleBinding of CLUSTERROLE to GROUP.
crb() {
  admin_post /apis/rbac.authorization.k8s.io/v1/clusterrolebindings "$(printf '{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"%s"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"%s"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"%s"}]}' "$1" "$2" "$3")"
}

# setup_bootstrap: what an operator does to let a node join with a
# bootstrap token (kubeadm's bindings): a token (kept in
# LOCAL_DIR/bootstrap-token across runs), the right to create node CSRs,
# their automatic approval for bootstrappers and for nodes renewing their
# own certificate, and a bootstrap kubeconfig holding only the token.
setup_bootstrap() {
  local tokfile=${LOCAL_DIR}/bootstrap-token id secret b64ca
  if [ ! -s "${tokfile}" ]; then
    id=$(tr -dc 'a-z0-9' </dev/urandom | head -c 6 || true)
    secret=$(tr -dc 'a-z0-9' </dev/urandom | head -c 16 || true)
    (umask 077 && echo "${id}.${secret}" >"${tokfile}")
  fi
  IFS=. read -r id secret <"${tokfile}"
  admin_post /api/v1/namespaces/kube-system/secrets "$(printf '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"bootstrap-token-%s","namespace":"kube-system"},"type":"bootstrap.kubernetes.io/token","stringData":{"token-id":"%s","token-secret":"%s","usage-bootstrap-authentication":"true","auth-extra-groups":"system:bootstrappers:crivk"}}' "${id}" "${id}" "${secret}")" || return 1
  crb crivk:node-bootstrapper system:node-bootstrapper system:bootstrappers || return 1
  crb crivk:node-autoapprove-bootstrap system:certificates.k8s.io:certificatesigningrequests:nodeclient system:bootstrappers || return 1
  crb crivk:node-autoapprove-certificate-rotation system:certificates.k8s.io:certificatesigningrequests:selfnodeclient system:nodes || return 1
  b64ca=$(base64 -w0 <"${PKI_DIR}/ca.crt")
  write_if_changed "${LOCAL_DIR}/bootstrap.kubeconfig" 0600 <<EOF
apiVersion: v1
kind: Config
clusters:
- name: crivk-local
  cluster:
    server: https://${NODE_IP}:${APISERVER_PORT}
    certificate-authority-data: ${b64ca}
users:
- name: kubelet-bootstrap
  user:
    token: ${id}.${secret}
contexts:
- name: kubelet-bootstrap@crivk-local
  context:
    cluster: crivk-local
    user: kubelet-bootstrap
current-context: kubelet-bootstrap@crivk-local
EOF
}

# ----------------------------------------------------------------- registry

# start_registry (REGISTRY=1): Debian's docker-registry (distribution 2.8)
# on NODE_IP:5443 with TLS (a certificate of the cluster CA, which
# containerd trusts for that host) and htpasswd authentication (user
# crivk, password kept in LOCAL_DIR/registry/password); the busybox test
# image is pushed to it as REGISTRY_HOST/e2e/busybox:1.37.0-2 by
# hack/tools' regtool.
start_registry() {
  local dir=${LOCAL_DIR}/registry pw regtool=${BIN_DIR}/regtool
  mkdir -p "${dir}/data"
  (cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -o "${regtool}" ./cmd/regtool)
  if [ ! -s "${dir}/password" ]; then
    (umask 077 && tr -dc 'a-zA-Z0-9' </dev/urandom | head -c 20 >"${dir}/password" || true)
  fi
  pw=$(cat "${dir}/password")
  if ! grep -q "^crivk:" "${dir}/htpasswd" 2>/dev/null; then
    (umask 077 && "${regtool}" htpasswd crivk "${pw}" >"${dir}/htpasswd")
  fi
  write_if_changed "${dir}/config.yml" <<EOF
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: ${dir}/data
  delete:
    enabled: true
http:
  addr: ${REGISTRY_HOST}
  tls:
    certificate: ${PKI_DIR}/registry.crt
    key: ${PKI_DIR}/registry.key
auth:
  htpasswd:
    realm: crivk-local
    path: ${dir}/htpasswd
EOF
  ensure_running docker-registry "$(fingerprint "${dir}/config.yml" "${dir}/htpasswd" "${PKI_DIR}/registry.crt")" \
    "$(component_bin docker-registry)" serve "${dir}/config.yml"
  wait_until docker-registry 30 "the registry on ${REGISTRY_HOST}" \
    curl -sf --max-time 2 --cacert "${PKI_DIR}/ca.crt" -u "crivk:${pw}" "https://${REGISTRY_HOST}/v2/"
  "${regtool}" push -ca "${PKI_DIR}/ca.crt" -user crivk -password "${pw}" "${ROOT}/_output/images/busybox.tar" \
    "${REGISTRY_HOST}/e2e/busybox:1.37.0-2" >"${dir}/busybox.digest" || return 1
  log "registry ${REGISTRY_HOST}: e2e/busybox:1.37.0-2 pushed ($(cat "${dir}/busybox.digest"))"
}

# mirror_digest REPO TAG: the manifest digest the mirror serves for
# REPO:TAG (Docker-Content-Digest), empty when it has none.
mirror_digest() {
  curl -sfI --max-time 10 --cacert "${PKI_DIR}/ca.crt" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "https://${REGISTRY_MIRROR_HOST}/v2/$1/manifests/$2" |
    tr -d '\r' | awk 'tolower($1) == "docker-content-digest:" {print $2}' || true
}

# start_registry_mirror (REGISTRY_MIRROR=1): a mirror of registry.k8s.io
# for our containerd (crivk_render's -registry-mirror), so that a pull
# with imagePullPolicy Always of an image built here (the node e2e suite's
# eviction and image GC specs, the image-update specs) finds it, for either
# agent. A second docker-registry on REGISTRY_MIRROR_HOST (NODE_IP:5444),
# data in LOCAL_DIR/registry-mirror, TLS with the registry certificate
# (whose SANs name NODE_IP; containerd trusts the cluster CA for that
# host), no auth: containerd has no credentials for it, and none for
# REGISTRY_HOST, whose tests need it to ask for them. It holds every
# tarball of _output/images whose registry.k8s.io name containerd has at
# the tarball's digest (hack/images.sh imported it just before): NAME
# registry.k8s.io/R:T goes to REGISTRY_MIRROR_HOST/R:T, pushed as is by
# regtool (the manifest's bytes, so the same digest: regtool's
# TestPushKeepsDigest), and checked: the mirror must answer each tag with
# containerd's digest, else a pull through it would replace the image.
start_registry_mirror() {
  local dir=${LOCAL_DIR}/registry-mirror regtool=${BIN_DIR}/regtool listed tar digest names name ref refs n=0
  command -v docker-registry >/dev/null ||
    { log "ERROR: docker-registry is missing; run REGISTRY_MIRROR=1 hack/install-deps.sh" >&2; return 1; }
  mkdir -p "${dir}/data"
  (cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -o "${regtool}" ./cmd/regtool)
  write_if_changed "${dir}/config.yml" <<EOF
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: ${dir}/data
  delete:
    enabled: true
http:
  addr: ${REGISTRY_MIRROR_HOST}
  tls:
    certificate: ${PKI_DIR}/registry.crt
    key: ${PKI_DIR}/registry.key
EOF
  ensure_running registry-mirror "$(fingerprint "${dir}/config.yml" "${PKI_DIR}/registry.crt")" \
    "$(component_bin registry-mirror)" serve "${dir}/config.yml"
  wait_until registry-mirror 30 "the registry mirror on ${REGISTRY_MIRROR_HOST}" \
    curl -sf --max-time 2 --cacert "${PKI_DIR}/ca.crt" "https://${REGISTRY_MIRROR_HOST}/v2/"
  listed=$(ctr --address "${CONTAINERD_SOCK}" -n k8s.io images ls) || return 1
  for tar in "${ROOT}"/_output/images/*.tar; do
    [ -f "${tar}.digest" ] || continue
    digest=$(cat "${tar}.digest")
    names=$("${regtool}" name "${tar}") || return 1
    refs=()
    for name in ${names}; do
      case "${name}" in *@*) continue ;; registry.k8s.io/*:*) ;; *) continue ;; esac
      awk -v n="${name}" -v d="${digest}" '$1 == n && $3 == d {found=1} END {exit !found}' <<<"${listed}" || continue
      ref=${name#registry.k8s.io/}
      [ "$(mirror_digest "${ref%:*}" "${ref##*:}")" = "${digest}" ] || refs+=("${REGISTRY_MIRROR_HOST}/${ref}")
      n=$((n + 1))
    done
    [ ${#refs[@]} -gt 0 ] || continue
    "${regtool}" push -ca "${PKI_DIR}/ca.crt" "${tar}" "${refs[@]}" >/dev/null || return 1
    for ref in "${refs[@]}"; do
      ref=${ref#"${REGISTRY_MIRROR_HOST}"/}
      [ "$(mirror_digest "${ref%:*}" "${ref##*:}")" = "${digest}" ] ||
        { log "ERROR: the mirror does not serve ${ref} at ${digest}, containerd's digest" >&2; return 1; }
      log "registry mirror ${REGISTRY_MIRROR_HOST}: ${ref} pushed (${digest})"
    done
  done
  log "registry mirror ${REGISTRY_MIRROR_HOST}: ${n} registry.k8s.io image(s), at containerd's digests"
}

# ------------------------------------------------------------ metrics-server

# start_metrics_server (METRICS_SERVER=1): metrics-server on the host, as
# the cluster's resource metrics API (kubectl top): it scrapes every node's
# /metrics/resource with the admin credentials (the node API authenticates
# the certificate against --client-ca-file and authorises it with a
# SubjectAccessReview) and serves metrics.k8s.io through the aggregation
# layer: a Service without selector whose Endpoints are this machine's
# IP, and the APIService. local-down stops it and removes the APIService
# (an APIService without a backend would stall namespace deletion).
start_metrics_server() {
  local kc=${LOCAL_DIR}/admin.kubeconfig
  ensure_running metrics-server "$(fingerprint "${kc}")" \
    "${BIN_DIR}/metrics-server" \
    --kubeconfig="${kc}" \
    --authentication-kubeconfig="${kc}" \
    --authorization-kubeconfig="${kc}" \
    --secure-port="${METRICS_SERVER_PORT}" \
    --cert-dir="${LOCAL_DIR}/metrics-server-certs" \
    --kubelet-preferred-address-types=InternalIP \
    --kubelet-use-node-status-port \
    --kubelet-insecure-tls \
    --metric-resolution=10s \
    --kubelet-request-timeout=5s
  wait_until metrics-server 60 "metrics-server /healthz" healthz "${METRICS_SERVER_PORT}"
  admin_post /api/v1/namespaces/kube-system/services "$(printf '{"apiVersion":"v1","kind":"Service","metadata":{"name":"metrics-server","namespace":"kube-system"},"spec":{"ports":[{"name":"https","port":443,"targetPort":%s}]}}' "${METRICS_SERVER_PORT}")" || return 1
  admin_put /api/v1/namespaces/kube-system/endpoints/metrics-server "$(printf '{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"metrics-server","namespace":"kube-system"},"subsets":[{"addresses":[{"ip":"%s"}],"ports":[{"name":"https","port":%s}]}]}' "${NODE_IP}" "${METRICS_SERVER_PORT}")" || return 1
  admin_post /apis/apiregistration.k8s.io/v1/apiservices '{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1beta1.metrics.k8s.io"},"spec":{"group":"metrics.k8s.io","version":"v1beta1","groupPriorityMinimum":100,"versionPriority":100,"insecureSkipTLSVerify":true,"service":{"name":"metrics-server","namespace":"kube-system","port":443}}}' || return 1
}

# ------------------------------------------------------------------- env file

write_env() {
  # shellcheck disable=SC2034 # read through ${!v} below
  local KUBECONFIG=${LOCAL_DIR}/admin.kubeconfig \
    NODE_KUBECONFIG=${LOCAL_DIR}/node.kubeconfig \
    BOOTSTRAP_KUBECONFIG=${LOCAL_DIR}/bootstrap.kubeconfig \
    APISERVER_URL=https://${NODE_IP}:${APISERVER_PORT} \
    CA_CERT=${PKI_DIR}/ca.crt \
    NODE_SERVING_CERT=${PKI_DIR}/node-serving.crt \
    NODE_SERVING_KEY=${PKI_DIR}/node-serving.key \
    CONTAINERD_ADDRESS=${CONTAINERD_SOCK} \
    CONTAINERD_BIN=$(component_bin containerd) \
    CRI_CONFIG_FILE=${CRICTL_CONFIG}
  local v
  {
    echo "# Generated by hack/local-up.sh: the local crivk test cluster. Source it."
    for v in LOCAL_DIR KUBECONFIG NODE_KUBECONFIG BOOTSTRAP_KUBECONFIG APISERVER_URL CA_CERT \
      NODE_NAME NODE_IP NODE_SERVING_CERT NODE_SERVING_KEY POD_CIDR SERVICE_CIDR \
      CNI_NETWORK CNI_BRIDGE CNI_BIN_DIR CRI_ENDPOINT CONTAINERD CONTAINERD_BIN CONTAINERD_ADDRESS CONTAINERD_ROOT CONTAINERD_STATE \
      CRIVK_RUN_DIR CRI_CONFIG_FILE CRICTL PAUSE_IMAGE BUSYBOX_IMAGE REGISTRY_HOST REGISTRY_MIRROR_HOST; do
      printf 'export %s=%q\n' "${v}" "${!v}"
    done
    if [ "${MACHINES}" -gt 1 ]; then
      for v in MACHINES CLUSTER_CIDR CLUSTER_DNS CLUSTER_DOMAIN; do
        printf 'export %s=%q\n' "${v}" "${!v}"
      done
    fi
    if [ "${CONTAINERD}" = built ]; then
      # The lane's containerd, ctr and runc first in PATH (as hack/lib/local.sh).
      printf 'case ":${PATH}:" in *:%q:*) ;; *) export PATH=%q:"${PATH}" ;; esac\n' "${RUNTIME_BIN_DIR}" "${RUNTIME_BIN_DIR}"
    fi
  } | write_if_changed "${LOCAL_DIR}/env"
}

main() {
  preflight
  detect_node_ip
  REGISTRY_HOST=${NODE_IP}:${REGISTRY_PORT}
  REGISTRY_MIRROR_HOST=
  if [ "${REGISTRY_MIRROR:-0}" = 1 ]; then
    REGISTRY_MIRROR_HOST=${NODE_IP}:${REGISTRY_MIRROR_PORT}
  fi
  if [ "${MACHINES}" -gt 1 ]; then
    log "control plane of ${MACHINES} machines, API server on ${NODE_IP}"
  else
    log "node ${NODE_NAME}, IP ${NODE_IP}"
  fi
  local kube=(kube-apiserver kube-controller-manager kube-scheduler)
  [ "${LOCAL_ETCD}" = system ] || kube+=(etcd)
  "${ROOT}/hack/build-kube.sh" "${kube[@]}"
  "${ROOT}/hack/build-crictl.sh"

  make_pki
  make_kubeconfigs

  if [ "${MACHINES}" -gt 1 ]; then
    stop_host_runtime
  else
    start_containerd
  fi
  start_etcd
  start_apiserver
  start_controller_manager
  start_scheduler
  wait_until kube-controller-manager 120 "the default ServiceAccount in namespace default" default_sa_exists
  setup_bootstrap || fail kube-apiserver "setting up the bootstrap token and its bindings failed"
  if [ "${REGISTRY:-0}" = 1 ]; then
    start_registry || fail docker-registry "pushing the test images to the registry failed"
  else
    stop_component docker-registry
  fi
  if [ "${REGISTRY_MIRROR:-0}" = 1 ]; then
    start_registry_mirror || fail registry-mirror "filling the registry.k8s.io mirror failed"
  else
    stop_component registry-mirror
  fi
  if [ "${METRICS_SERVER:-0}" = 1 ]; then
    "${ROOT}/hack/build-kube.sh" metrics-server
    start_metrics_server || fail metrics-server "registering metrics-server's API failed"
  else
    # etcd outlives the processes: an APIService left by an earlier run
    # with metrics-server would have no backend now.
    stop_component metrics-server
    remove_metrics_apiservice
  fi

  write_env

  log "cluster up in $(($(date +%s) - started_at))s; source ${LOCAL_DIR}/env"
}

main "$@"
