#!/usr/bin/env bash
# Runs the node e2e suite of Kubernetes v1.37.2 (test/e2e_node, built as
# e2e_node.test: the documented "node conformance test") against one node
# agent on this machine, then tears everything down (issue #31).
#
# How the suite is run, and why
# -----------------------------
# e2e_node.test can start its own services (--start-services, the default):
# etcd, an in-process kube-apiserver on 127.0.0.1 and a namespace controller,
# in a child process of the test binary, and then a kubelet it configures
# itself (or, with --conformance=true, no kubelet). We do NOT use them; we
# run it with --start-services=false against the local cluster of
# hack/local-up.sh, the one both agents already run against in
# `make conformance`:
#
#  - Identical runs. The control plane, etcd, containerd, CNI network and
#    images are the same for both agents, and both agents are started by the
#    project's own scripts (hack/run-crivk.sh, hack/run-kubelet.sh), one at a
#    time, with the same KubeletConfiguration drop-in (below). The suite's
#    services only ever run a kubelet the suite starts itself.
#  - An external agent cannot join the suite's services the way it joins a
#    cluster. Their API server runs with AlwaysAllow, a random bearer token,
#    a self-signed certificate, no controller-manager, hence no CSR signer
#    and no ServiceAccounts: crivk's TLS bootstrap (bootstrap token, CSR,
#    system:node certificate, Node,RBAC and NodeRestriction) has nothing to
#    talk to, and the agent would have to be started from outside after the
#    test binary's child process is up and within the suite's two-minute
#    wait for a Ready node. Upstream's containerized runner
#    (test/e2e_node/conformance/run_test.sh, --conformance=true) points its
#    kubelet at http://localhost:8080, an insecure port v1.37's API server no
#    longer has.
#  - What --start-services=false needs is small: in node e2e mode the suite's
#    client ignores --kubeconfig and uses --host with --bearer-token
#    (TLS unverified), also for /configz through the API server's node proxy
#    (test/e2e_node/kubeletconfig GetCurrentKubeletConfig, read once per
#    process before any spec). This script creates a ServiceAccount
#    kube-system/node-e2e bound to cluster-admin and a 24 h token for it.
#
# Differences from upstream's node e2e environment, the same for both agents:
# ServiceAccount admission is on (pods get projected tokens), a scheduler
# runs (the suite's pods carry spec.nodeName anyway), the API server
# authorises with Node,RBAC. Images are the local ones of hack/images.sh,
# so --prepull-images=false (as upstream's containerized runner): a spec
# whose image is not built here fails on its pull.
#
# The agent's configuration: upstream's node e2e job
# --------------------------------------------------
# Both agents get one KubeletConfiguration drop-in (--config-dir), written
# below from test/e2e_node/jenkins/default-kubelet-config.yaml and the
# overrides services/kubelet.go applies to the kubelet it starts: cgroupfs,
# cgroupRoot /, fileCheckFrequency 10s, the node e2e eviction thresholds,
# serializeImagePulls false, anonymous authentication with AlwaysAllow
# authorization, a static pod directory; and, for this machine, its cgroup
# v1 let through (failCgroupV1 false, which both agents refuse by default,
# as the suite's own kubelet job runs on cgroup v2), pod logs in
# /var/log/pods (log_path_test.go reads that path), clusterDomain
# cluster.local (--dns-domain), image GC off (no image can be pulled again).
# Left out for both: podCIDR (pods take their IPs from the project's CNI
# network), kubeletCgroups/systemCgroups/--runtime-cgroups (the suite's
# non-systemd defaults; crivk refuses them). Given to the kubelet only,
# because crivk refuses them at start (docs/configuration.md), and listed as
# what crivk lacks: volumeStatsAggPeriod 10s. readOnlyPort 10255 is both
# agents' (the Summary API specs read /stats/summary there, util.go
# getNodeSummary).
# crivk's pod cgroups go under / (CRIVK_CGROUP_ROOT=/), as the kubelet's:
# pods_container_manager_test.go looks for /kubepods. Both agents run with
# --root-dir=/var/lib/kubelet, the suite's KubeletRootDirectory, which its
# specs read directly (pods/<uid>/volumes, device-plugins/kubelet.sock,
# pod-resources); the project's scripts otherwise keep it under _output.
#
# Restarting the agent: the specs that stop, restart or reconfigure the
# kubelet (util.go restartKubelet, mustStopKubelet; util_kubeletconfig.go
# updateKubeletConfig) run `sudo systemctl ...`; this machine has neither
# systemd nor sudo. The suite's PATH (only the suite's) starts with
# results/bin: hack/lib/node-e2e-bin/systemctl, a shim that stops and
# starts this run's agent, crivk or the kubelet alike, through
# hack/lib/node-e2e-agent.sh, which this script starts it with too (the PID
# in agent.pid, each start appended to agent.log); and its sudo, which runs
# the command as it is, when the machine has no sudo. Once the suite has
# written its kubelet-config (the whole configuration read from /configz,
# changed) into its working directory work/, each start runs the agent as
# the suite's own kubelet: --config=work/kubelet-config
# --config-dir=work/kubelet.conf.d, without agent-config.d and crivk's
# settings flags, which would override it (hack/lib/node-e2e-agent.sh). A
# configuration the agent refuses leaves it stopped, as systemd would; every
# later spec then fails (docs/conformance.md lists the specs crivk refuses).
# Ginkgo runs the suite in the test binary's directory: work/e2e_node.test is
# a link to it, so that work/ is that directory.
#
# Steps: builds what is missing (crivk, kubelet, e2e_node.test, agnhost,
# ginkgo, etcd), brings up the local cluster with etcd 3.7.0 (LOCAL_ETCD=built,
# below), the conformance images and the node e2e suite's
# (CONFORMANCE_IMAGES=1 NODE_E2E_IMAGES=1 hack/local-up.sh:
# nginx, glibc-dns-testing, ipc-utils, and nmeter in busybox; hack/images.sh)
# and a mirror of registry.k8s.io holding them (REGISTRY_MIRROR=1: the specs
# that pull with imagePullPolicy Always, eviction, image GC, image update),
# creates the suite's token,
# deletes any Node object an earlier agent left, starts the agent, waits for
# the node Ready, runs e2e_node.test through the Ginkgo CLI, collects the
# evidence of a failure while the agent still runs (hack/lib/evidence.sh),
# stops the agent and tears the cluster down. The output ends with
# `N passed, N failed` and the failed spec names.
#
# Environment:
#   NODE_AGENT=crivk|kubelet      the node agent (default crivk)
#   NODE_CONFORMANCE_SELECTION    1 (default): [NodeConformance] without
#                                 [Serial]/[Disruptive], the node conformance
#                                 test; 2: the features' [Serial],
#                                 [NodeFeature:...], [Feature:...] and untagged
#                                 specs outside selection 1 (docs/conformance.md)
#   NODE_CONFORMANCE_FOCUS, NODE_CONFORMANCE_SKIP, NODE_CONFORMANCE_LABEL_FILTER
#                                 override the selection's ginkgo --focus, --skip
#                                 and --label-filter
#   NODE_CONFORMANCE_TIMEOUT      ginkgo suite timeout (default 4h)
#   NODE_CONFORMANCE_END_BY       a time (date -d) by which the whole run must
#                                 be over: when set, the ginkgo timeout is the
#                                 time left when the specs start, less 4 minutes
#                                 for the evidence and the teardown (replaces
#                                 NODE_CONFORMANCE_TIMEOUT)
#   NODE_CONFORMANCE_PROCS        parallel Ginkgo processes (default 4; Serial
#                                 specs run alone)
#   NODE_CONFORMANCE_DRY_RUN=1    only list the selection (ginkgo --dry-run):
#                                 no cluster, no agent, prints "Will run N of M"
#   GINKGO_ARGS                   extra ginkgo arguments (word-split), e.g.
#                                 --focus-file=test/e2e_node/ for the suite's own
#                                 specs only
#   E2E_ARGS                      extra e2e_node.test arguments (word-split)
#   LOCAL_ETCD                    the cluster's etcd (hack/local-up.sh): built
#                                 (default here), etcd 3.7.0 of hack/tools, or
#                                 system, Debian's 3.4.23. Debian's lacks watch
#                                 progress requests (RequestWatchProgress): the
#                                 API server's watch cache lags and ends watches
#                                 with "Too large resource version", and the
#                                 MirrorPod "when kubelet restarts" spec waits
#                                 on its ended watch until the suite's timeout
#                                 (docs/environment.md)
# Results: _output/node-conformance/<agent>-<UTC timestamp>/: e2e.log,
# junit.xml, agent.log, setup.log, local-down.log, summary.txt, agent-config.d/
# (the drop-ins), work/ (the suite's working directory), bin/ (the shims),
# agent.conf, agent.pid, agent.starts (hack/lib/node-e2e-agent.sh). On failure the
# evidence goes to _output/test-logs/node-conformance/<agent>-<timestamp>/.
# Exit status 0 only when no spec failed. Run as root.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE_AGENT=${NODE_AGENT:-crivk}
SELECTION=${NODE_CONFORMANCE_SELECTION:-1}
TIMEOUT=${NODE_CONFORMANCE_TIMEOUT:-4h}
PROCS=${NODE_CONFORMANCE_PROCS:-4}
DRY_RUN=${NODE_CONFORMANCE_DRY_RUN:-0}
END_BY=${NODE_CONFORMANCE_END_BY:-}
read -r -a extra_args <<<"${E2E_ARGS:-}"
read -r -a ginkgo_args <<<"${GINKGO_ARGS:-}"
case "${NODE_AGENT}" in
  crivk | kubelet) ;;
  *) echo "node-conformance: NODE_AGENT must be crivk or kubelet, not '${NODE_AGENT}'" >&2; exit 2 ;;
esac

# The selections (docs/conformance.md, "The node e2e suite").
case "${SELECTION}" in
  1)
    focus='\[NodeConformance\]'
    skip='\[Serial\]|\[Disruptive\]'
    label_filter=''
    ;;
  2)
    # The features of issue #31 both agents claim, by the names of their
    # specs: eviction, image GC, in-place resize, static (mirror) pods, log
    # rotation, the summary and resource-metrics APIs, sidecars, the sleep
    # lifecycle hook, PodReadyToStartContainers, OOM, pod-level resources.
    focus='Eviction|KubeletSeparateDiskGC|ImageGarbageCollect|ImageGC|Pod InPlace Resize|MirrorPod|ContainerLogRotation|Summary API|ResourceMetricsAPI|[Rr]estartable [Ii]nit [Cc]ontainer|[Ss]idecar|Lifecycle Sleep|PodReadyToStartContainers|OOMKiller|Pod Level Resources|PodLevelResources'
    # Features that only share a word with those: hugepages (no hugetlb
    # pages here), the CPU and memory managers, device plugins.
    skip='HugePages|CPU Manager|Memory Manager|Device Plugin'
    # Outside selection 1; not the alpha/deprecated gates off by default.
    label_filter='(!NodeConformance || Serial || Disruptive) && !Feature:OffByDefault && !Flaky'
    ;;
  *) echo "node-conformance: NODE_CONFORMANCE_SELECTION must be 1 or 2, not '${SELECTION}'" >&2; exit 2 ;;
esac
FOCUS=${NODE_CONFORMANCE_FOCUS:-${focus}}
SKIP=${NODE_CONFORMANCE_SKIP:-${skip}}
LABEL_FILTER=${NODE_CONFORMANCE_LABEL_FILTER:-${label_filter}}
ginkgo_select=(--focus="${FOCUS}" --skip="${SKIP}")
[ -z "${LABEL_FILTER}" ] || ginkgo_select+=(--label-filter="${LABEL_FILTER}")
ginkgo_select+=("${ginkgo_args[@]}")
if [ -n "${END_BY}" ]; then
  end_by=$(date -d "${END_BY}" +%s) || { echo "node-conformance: NODE_CONFORMANCE_END_BY: not a time: '${END_BY}'" >&2; exit 2; }
fi

cd "${ROOT}"
log() { echo "node-conformance: $*"; }

# suite_args HOST TOKEN NODE CRI REPORT_DIR: sets suite_args, the arguments
# of e2e_node.test (see the top); the dry run passes the same, so that it
# also checks them.
suite_args() {
  suite_args=(--start-services=false --stop-services=false
    --host="$1" --bearer-token="$2" --node-name="$3"
    --container-runtime-endpoint="$4" --image-service-endpoint="$4"
    --prepull-images=false --dns-domain=cluster.local
    --report-dir="$5" "${extra_args[@]}")
}

if [ "${DRY_RUN}" = 1 ]; then
  hack/build-kube.sh e2e_node.test ginkgo >/dev/null
  dir=$(mktemp -d)
  suite_args https://127.0.0.1:6443 dry-run dry-run unix:///dry-run.sock "${dir}"
  # --dry-run runs no BeforeSuite: nothing is contacted. An unknown argument
  # fails it.
  rc=0
  ln -s "${ROOT}/_output/bin/e2e_node.test" "${dir}/e2e_node.test"
  (cd "${dir}" && "${ROOT}/_output/bin/ginkgo" --dry-run --no-color "${ginkgo_select[@]}" \
    ./e2e_node.test -- "${suite_args[@]}") >"${dir}/dry-run.log" 2>&1 || rc=$?
  grep -E '^Will run [0-9]+ of [0-9]+ specs' "${dir}/dry-run.log" || tail -n 20 "${dir}/dry-run.log"
  rm -rf "${dir}"
  exit "${rc}"
fi

RESULTS=${ROOT}/_output/node-conformance/${NODE_AGENT}-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "${RESULTS}/work" "${RESULTS}/agent-config.d"
# shellcheck source=hack/lib/evidence.sh
source "${ROOT}/hack/lib/evidence.sh"
# shellcheck source=hack/lib/ginkgo.sh
source "${ROOT}/hack/lib/ginkgo.sh"
# An earlier run's evidence would be taken for this run's.
rm -rf "${ROOT}/_output/test-logs/node-conformance"
EVIDENCE=${ROOT}/_output/test-logs/node-conformance/$(basename "${RESULTS}")

# collect_evidence WHY: the failure's evidence, while the agent still runs.
collect_evidence() {
  log "collecting the evidence of the failure into ${EVIDENCE#"${ROOT}/"}/"
  dump_evidence "${EVIDENCE}" -kubeconfig "${KUBECONFIG}" -node "${NODE_NAME}" \
    -copy agent.log="${RESULTS}/agent.log" -copy containerd.log="${LOCAL_DIR}/logs/containerd.log" \
    -copy e2e.log="${RESULTS}/e2e.log" -note "$1" -note "results: ${RESULTS}"
  print_evidence node-conformance node-conformance
}

# ---------------------------------------------------------------- set-up

log "building and bringing up the local cluster (log: ${RESULTS}/setup.log)"
# errexit does not apply inside a function called as an if condition, hence
# the explicit returns.
setup() {
  CONFORMANCE_IMAGES=1 REGISTRY_MIRROR=1 hack/install-deps.sh || return
  if [ "${NODE_AGENT}" = crivk ]; then hack/build.sh || return; fi
  hack/build-kube.sh kubelet e2e_node.test agnhost ginkgo || return
  # No node lifecycle controller, as upstream's node e2e runs none: it
  # taints a node under pressure NoSchedule (node.kubernetes.io/*-pressure),
  # and the eviction specs' hasNodeCondition reads the node through
  # GetReadySchedulableNodes, which then finds none and fails the spec for
  # any agent. Without that controller, nothing would take off the
  # node.kubernetes.io/not-ready:NoSchedule taint the API server's
  # TaintNodesByCondition admission puts on every new Node (this script
  # deletes the Node before each run), with the same effect: upstream's
  # node e2e API server disables that plugin (services/apiserver.go), so
  # does this one.
  # etcd 3.7.0 unless the caller asks for another (LOCAL_ETCD, above).
  LOCAL_ETCD=${LOCAL_ETCD:-built} CONFORMANCE_IMAGES=1 NODE_E2E_IMAGES=1 REGISTRY_MIRROR=1 KCM_CONTROLLERS='*,-nodeipam,-nodelifecycle' \
    DISABLE_ADMISSION_PLUGINS=TaintNodesByCondition hack/local-up.sh
}
# A clean-up that fails fails the run (its log kept in RESULTS).
trap 'rc=$?; hack/local-down.sh >"${RESULTS}/local-down.log" 2>&1 || { log "ERROR: local-down failed, see ${RESULTS}/local-down.log"; rc=1; }; exit "${rc}"' EXIT
if ! setup >"${RESULTS}/setup.log" 2>&1; then
  tail -n 30 "${RESULTS}/setup.log"
  exit 1
fi
# shellcheck source=/dev/null
source _output/local/env

# api METHOD PATH [JSON]: the API server as admin; prints the body.
api() {
  local data=()
  [ $# -lt 3 ] || data=(-H 'Content-Type: application/json' --data "$3")
  curl -sf --max-time 10 -X "$1" --cacert "${CA_CERT}" --cert "${LOCAL_DIR}/pki/admin.crt" \
    --key "${LOCAL_DIR}/pki/admin.key" "${data[@]}" "${APISERVER_URL}$2"
}
node_ready() {
  api GET "/api/v1/nodes/${NODE_NAME}" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}
# Another agent's Node object (conditions, addresses, nodeInfo) would
# otherwise be what this agent starts from.
delete_node() { api DELETE "/api/v1/nodes/${NODE_NAME}" >/dev/null 2>&1 || true; }

# The suite's credential (see the top): ServiceAccount kube-system/node-e2e,
# cluster-admin, a token of 24 h. Creating what exists already answers 409,
# which curl -f reports as an error: ignored, the token request decides.
api POST /api/v1/namespaces/kube-system/serviceaccounts \
  '{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"node-e2e"}}' >/dev/null 2>&1 || true
api POST /apis/rbac.authorization.k8s.io/v1/clusterrolebindings \
  '{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"node-e2e"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},"subjects":[{"kind":"ServiceAccount","name":"node-e2e","namespace":"kube-system"}]}' >/dev/null 2>&1 || true
token=$(api POST /api/v1/namespaces/kube-system/serviceaccounts/node-e2e/token \
  '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":86400}}' |
  tr -d '\n' | sed -n 's/.*"token": *"\([^"]*\)".*/\1/p') || true
if [ -z "${token}" ]; then
  log "cannot get a token for ServiceAccount kube-system/node-e2e"
  exit 1
fi

# ---------------------------------------------------------------- agent configuration

MANIFESTS=${LOCAL_DIR}/manifests
rm -rf "${MANIFESTS}"
mkdir -p "${MANIFESTS}" /var/log/pods /var/lib/kubelet "${LOCAL_DIR}/crivk"
# Both agents share the root dir: each run starts without the checkpoints an
# earlier run of either agent left there (the kubelet's allocated_pods_state,
# actuated_pods_state, cpu/memory/dra manager state). crivk refused to start
# on the kubelet's allocated_pods_state (2026-11-27: "json: cannot unmarshal
# string into Go value of type allocation.PodAllocation").
rm -f /var/lib/kubelet/*_state
cat >"${RESULTS}/agent-config.d/10-node-e2e.conf" <<CFG
# Both agents (hack/node-conformance.sh explains each field).
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# test/e2e_node/jenkins/default-kubelet-config.yaml (v1.37.2) but podCIDR
cgroupDriver: cgroupfs
cgroupRoot: /
fileCheckFrequency: 10s
evictionPressureTransitionPeriod: 30s
evictionHard:
  memory.available: 250Mi
  nodefs.available: 10%
  nodefs.inodesFree: 5%
evictionMinimumReclaim:
  nodefs.available: 5%
  nodefs.inodesFree: 5%
serializeImagePulls: false
# the overrides of test/e2e_node/services/kubelet.go startKubelet
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
staticPodPath: ${MANIFESTS}
# this machine
failCgroupV1: false
podLogsDir: /var/log/pods
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
readOnlyPort: 10255
CFG
# hack/lib/node-e2e-agent.sh starts the agent with agent_env, agent_args,
# and agent_settings unless the suite has written its own configuration.
agent_env=()
agent_args=(--root-dir=/var/lib/kubelet)
agent_settings=(--config-dir="${RESULTS}/agent-config.d")
if [ "${NODE_AGENT}" = kubelet ]; then
  cat >"${RESULTS}/agent-config.d/20-kubelet-only.conf" <<CFG
# The kubelet only: crivk refuses these fields at start (what it lacks for the suite).
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
volumeStatsAggPeriod: 10s
CFG
else
  # run-crivk.sh's flags win over the drop-in: the same values again.
  agent_env=(CRIVK_CGROUP_ROOT=/ CRIVK_POD_MANIFEST_PATH="${MANIFESTS}")
  agent_settings+=(--pod-log-dir=/var/log/pods --image-gc-high-threshold=100 --image-gc-low-threshold=99
    --eviction-hard='memory.available<250Mi,nodefs.available<10%,nodefs.inodesFree<5%')
fi
AGENT_DIR=${RESULTS}
# shellcheck source=hack/lib/node-e2e-agent.sh
source "${ROOT}/hack/lib/node-e2e-agent.sh"
agent_configure "${NODE_AGENT}" "${RESULTS}/work"

# ---------------------------------------------------------------- agent

# stop_agent: stops whichever agent runs, the first or one the suite
# restarted (agent.pid), once one was started.
stop_agent() {
  [ "$(cat "${AGENT_DIR}/agent.starts")" -gt 0 ] || return 0
  agent_locked agent_stop "hack/node-conformance.sh"
  delete_node
}
trap 'rc=$?; stop_agent; hack/local-down.sh >"${RESULTS}/local-down.log" 2>&1 || { log "ERROR: local-down failed, see ${RESULTS}/local-down.log"; rc=1; }; exit "${rc}"' EXIT

delete_node
log "starting ${NODE_AGENT} with ${RESULTS#"${ROOT}/"}/agent-config.d (log: ${RESULTS}/agent.log)"
agent_locked agent_start "hack/node-conformance.sh"
deadline=$(($(date +%s) + 120))
until node_ready; do
  if ! agent_pid >/dev/null; then
    log "${NODE_AGENT} exited before node ${NODE_NAME} was Ready; last lines of its log:"
    tail -n 30 "${RESULTS}/agent.log"
    collect_evidence "${NODE_AGENT} exited before node ${NODE_NAME} was Ready"
    exit 1
  fi
  if [ "$(date +%s)" -ge "${deadline}" ]; then
    log "node ${NODE_NAME} not Ready after 120 s; last lines of ${NODE_AGENT}'s log:"
    tail -n 30 "${RESULTS}/agent.log"
    collect_evidence "node ${NODE_NAME} not Ready 120 s after ${NODE_AGENT} started"
    exit 1
  fi
  sleep 1
done
log "node ${NODE_NAME} Ready"

# ---------------------------------------------------------------- e2e_node.test

if [ -n "${END_BY}" ]; then
  left=$((end_by - $(date +%s) - 240))
  if [ "${left}" -lt 60 ]; then
    log "only ${left}s left before ${END_BY} (NODE_CONFORMANCE_END_BY) less 4 minutes: not running the specs"
    exit 1
  fi
  TIMEOUT=${left}s
fi
log "running e2e_node.test (selection ${SELECTION}) with ${PROCS} Ginkgo processes, timeout ${TIMEOUT}; log: ${RESULTS}/e2e.log"
log "  focus: ${FOCUS}; skip: ${SKIP}${LABEL_FILTER:+; label filter: ${LABEL_FILTER}}"
started=$(date +%s)
rc=0
# The suite writes into its working directory (kubelet.conf.d, kubelet-config),
# the test binary's directory for Ginkgo: a link to it in work/. Its systemctl
# (and sudo, where there is none) is the shim (see the top).
ln -sf "${ROOT}/_output/bin/e2e_node.test" "${RESULTS}/work/e2e_node.test"
mkdir -p "${RESULTS}/bin"
ln -sf "${ROOT}/hack/lib/node-e2e-bin/systemctl" "${RESULTS}/bin/systemctl"
command -v sudo >/dev/null || ln -sf "${ROOT}/hack/lib/node-e2e-bin/sudo" "${RESULTS}/bin/sudo"
suite_args "${APISERVER_URL}" "${token}" "${NODE_NAME}" "${CRI_ENDPOINT}" "${RESULTS}"
(cd "${RESULTS}/work" && PATH="${RESULTS}/bin:${PATH}" NODE_E2E_AGENT_DIR="${AGENT_DIR}" \
  "${ROOT}/_output/bin/ginkgo" --procs="${PROCS}" "${ginkgo_select[@]}" \
  --timeout="${TIMEOUT}" --no-color --output-dir="${RESULTS}" --junit-report=junit.xml \
  ./e2e_node.test -- "${suite_args[@]}") >"${RESULTS}/e2e.log" 2>&1 || rc=$?
elapsed=$(($(date +%s) - started))

[ "${rc}" -eq 0 ] || collect_evidence "e2e_node.test (ginkgo) exited ${rc}: a spec failed or the run did not complete"
stop_agent
rm -rf "${MANIFESTS}"
api DELETE /apis/rbac.authorization.k8s.io/v1/clusterrolebindings/node-e2e >/dev/null 2>&1 || true
api DELETE /api/v1/namespaces/kube-system/serviceaccounts/node-e2e >/dev/null 2>&1 || true
trap - EXIT
down_rc=0
hack/local-down.sh >"${RESULTS}/local-down.log" 2>&1 ||
  { log "ERROR: local-down failed (a failed clean-up fails the run), see ${RESULTS}/local-down.log"; down_rc=1; }

# ---------------------------------------------------------------- summary

ginkgo_summary "${RESULTS}/e2e.log" e2e_node.test "agent ${NODE_AGENT}; selection ${SELECTION}; e2e_node.test ran ${elapsed}s (exit ${rc}); results in ${RESULTS}" "not selected, or skipped by the spec" "${rc}" &&
  [ "${down_rc}" -eq 0 ]
