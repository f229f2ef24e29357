#!/usr/bin/env bash
# Runs crivk's tests: unit tests with the race detector, the Helm chart's
# lint and template checks (hack/chart-test.sh), the quick subset of
# the upstream conformance specs (hack/conformance-quick.txt, through
# hack/conformance.sh), the quick subset of the node e2e suite
# (hack/node-conformance-quick.txt, e2e_node.test through
# hack/node-conformance.sh), then the end-to-end tests against a local cluster
# that this script brings up and tears down, then the chart installed
# beside a real kubelet (hack/helm-e2e.sh). The two conformance tiers and
# the end-to-end tier each bring up and tear down their own local cluster.
# Before the cluster tiers, `all` runs the README's walkthrough
# (hack/walkthrough.sh: make run, kubectl run bb, Ctrl-C).
# Usage: hack/test.sh [unit|chart|walkthrough|conformance|node-conformance|e2e|long|helm|containerd-system|all]   (default all)
# E2E_RUN=regexp limits the end-to-end tests to those go test -run selects.
# `long` runs the end-to-end tests of hack/e2e-long.txt (make test-long),
# which the e2e tier leaves out: each waits on a clock it cannot shorten.
# `containerd-system` runs the containerd 1.6 lane (make
# test-containerd-system): the quick conformance subset and the e2e tests of
# hack/e2e-containerd-system.txt on Debian's containerd (CONTAINERD=system);
# the other tiers run on containerd 2 (CONTAINERD=built, the default).
# The output ends with go test's own summary lines; the environment's set-up
# and tear-down logs go to _output/test-logs/. A failed tier keeps its
# evidence (collected before its clean-up) in _output/test-logs/<tier>/
# and the output names it: "test: evidence of the failed <tier> tier: DIR/"
# (each DIR's index.txt lists its files).
#
# What makes a tier pass (issue #50):
#   - the cluster tiers start from a state of their own (LOCAL_STATE=test:
#     etcd data in _output/local/etcd-test, emptied with the node's root dir
#     and manifests by `FRESH=1 hack/local-down.sh` at each tier's start,
#     own_state), whatever `make run` or a user left in the cluster;
#   - the ginkgo tiers pass only when as many specs ran and passed as their
#     list has lines (ginkgo_count_check, hack/lib/ginkgo.sh);
#   - the unit and end-to-end tiers run go test -json through
#     hack/tools/cmd/skipcheck: a skipped test not on hack/allowed-skips.txt
#     (or whose machine fact does not hold here) fails the tier, named;
#   - a clean-up that fails (local-down, the Helm tier's uninstall) fails
#     the tier, its log kept.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WHAT=${1:-all}
LOGS=${ROOT}/_output/test-logs
mkdir -p "${LOGS}"
cd "${ROOT}"
# shellcheck source=hack/lib/evidence.sh
source "${ROOT}/hack/lib/evidence.sh"
# shellcheck source=hack/lib/ginkgo.sh
source "${ROOT}/hack/lib/ginkgo.sh"
# Every cluster tier's hack/local-up.sh and hack/local-down.sh (and those of
# the scripts it runs) use the state of the tests, not `make run`'s.
export LOCAL_STATE=test
SKIPCHECK=${ROOT}/_output/bin/skipcheck

# disk_room: the cluster tiers run their agents with the node e2e suite's
# eviction thresholds (nodefs.available<10%); on a fuller disk every pod is
# evicted with "The node had condition: [DiskPressure]" and the tier fails
# for a reason that is not the code's. Refuse to start below
# MIN_FREE_PERCENT (default 15) free on the filesystems of _output (the
# project's containerd) and /var/lib (the agents' root dirs), naming them.
disk_room() {
  local dir line avail size pct bad=0 min=${MIN_FREE_PERCENT:-15}
  for dir in "${ROOT}/_output" /var/lib; do
    line=$(df -P -k "${dir}" | tail -n 1)
    size=$(awk '{print $2}' <<<"${line}")
    avail=$(awk '{print $4}' <<<"${line}")
    pct=$((avail * 100 / size))
    if [ "${pct}" -lt "${min}" ]; then
      echo "test: ${dir} ($(awk '{print $6}' <<<"${line}")) has ${pct}% free ($((avail / 1048576)) GiB of $((size / 1048576)) GiB), under MIN_FREE_PERCENT=${min}: the agents would report DiskPressure and evict; free some space first"
      bad=1
    fi
  done
  return "${bad}"
}

# own_state TIER: the cluster tier TIER starts from a state of its own:
# FRESH=1 hack/local-down.sh stops whatever runs (a user's `make run`
# left-overs, an earlier tier's), removes the pods in our containerd, and
# empties LOCAL_STATE=test's etcd data and the node's root dir and
# manifests. So crivk joins afresh with the bootstrap token (a certificate
# left by an earlier run, which the conformance tiers sign for a year, would
# leave the end-to-end tier nothing to bootstrap or rotate). A failure
# fails the tier (log: LOGS/TIER-own-state.log).
own_state() {
  FRESH=1 hack/local-down.sh >"${LOGS}/$1-own-state.log" 2>&1 && return 0
  echo "test: $1: emptying the tests' cluster state failed (FRESH=1 hack/local-down.sh), see ${LOGS}/$1-own-state.log"
  tail -n 20 "${LOGS}/$1-own-state.log"
  return 1
}

# tier_down TIER: hack/local-down.sh into LOGS/TIER-local-down.log; a
# failure is named and returns 1 (a clean-up that fails fails the tier).
tier_down() {
  hack/local-down.sh >"${LOGS}/$1-local-down.log" 2>&1 && return 0
  echo "test: $1: local-down failed, see ${LOGS}/$1-local-down.log"
  return 1
}

# skipcheck ARGS...: hack/tools/cmd/skipcheck (built into _output/bin) on
# stdin, a go test -json stream, against hack/allowed-skips.txt.
skipcheck() {
  if ! (cd hack/tools && go build -o "${SKIPCHECK}" ./cmd/skipcheck) >"${LOGS}/skipcheck-build.log" 2>&1; then
    echo "test: building hack/tools/cmd/skipcheck failed:"; cat "${LOGS}/skipcheck-build.log"; cat >/dev/null; return 1
  fi
  "${SKIPCHECK}" -allowed hack/allowed-skips.txt "$@"
}

# unit: go test -race of every package but the two tiers that need a
# cluster (test/e2e, test/helm). Printed as go test without -v prints, and
# each skipped test with its verdict (hack/allowed-skips.txt); the -v
# transcript goes to LOGS/unit.log.
unit() {
  echo "test: unit tests (skips checked against hack/allowed-skips.txt; go test -v's transcript: ${LOGS}/unit.log)"
  # shellcheck disable=SC2046
  go test -json -race -count=1 $(go list ./... | grep -v -e /test/e2e -e /test/helm) 2>&1 |
    skipcheck -log "${LOGS}/unit.log"
}

# long_tests: the names of hack/e2e-long.txt as one go test regexp.
long_tests() { listed_tests hack/e2e-long.txt; }

# listed_tests FILE: a go test -run (or -skip) of the tests FILE lists (its
# lines' first field).
listed_tests() {
  local names
  names=$(grep -v -e '^#' -e '^[[:space:]]*$' "$1" | cut -d'|' -f1 | tr -d ' ' | paste -sd'|')
  [ -n "${names}" ] || { echo "$1 lists no test" >&2; return 1; }
  echo "^(${names})\$"
}

# containerd_system: the containerd 1.6 lane (CONTAINERD=system, Debian's
# containerd, runc and CNI plugins, hack/lib/local.sh): the quick
# conformance subset and the end-to-end tests of
# hack/e2e-containerd-system.txt, each tier with its own cluster on that
# runtime, as make test's.
containerd_system() {
  echo "test: the containerd 1.6 lane (CONTAINERD=system)"
  export CONTAINERD=system
  local crc=0 erc=0 run
  conformance || crc=$?
  run=$(listed_tests hack/e2e-containerd-system.txt) || return 1
  E2E_RUN=${run} e2e || erc=$?
  [ "${crc}" -eq 0 ] && [ "${erc}" -eq 0 ]
}

# e2e: test/e2e against the local cluster, without the long lane's tests
# (hack/e2e-long.txt) unless E2E_RUN selects tests itself.
e2e() {
  local skip=
  if [ -z "${E2E_RUN:-}" ]; then skip=$(long_tests) || return 1; fi
  disk_room || return 1
  own_state e2e || return 1
  echo "test: installing dependencies and building (log: ${LOGS}/setup.log)"
  # build-storage: the CSI tests' hostpath driver and external-provisioner.
  if ! { REGISTRY=1 hack/install-deps.sh && hack/build.sh && hack/build-previous.sh &&
    STORAGE_SIDECARS=csi-provisioner hack/build-storage.sh; } >"${LOGS}/setup.log" 2>&1; then
    tail -n 40 "${LOGS}/setup.log"; return 1
  fi
  # The previous release, for TestUpgradeFromPreviousRelease (none in a
  # clone without its commit: the test skips, hack/allowed-skips.txt).
  if [ -x _output/bin/crivk-previous ]; then
    export CRIVK_PREVIOUS_BIN=${ROOT}/_output/bin/crivk-previous
  fi
  echo "test: bringing up the local cluster (log: ${LOGS}/local-up.log)"
  # However the script ends meanwhile, a failed tear-down fails it.
  trap 'tier_down e2e || exit 1' EXIT
  # Client certificates signed for 5 minutes: crivk's is renewed during the
  # run (TestClientCertificateRotation).
  # metrics-server serves metrics.k8s.io (TestResourceMetricsAPI).
  # The local registry serves the pull tests (TestRegistry*).
  if ! REGISTRY=1 METRICS_SERVER=1 CSR_SIGNING_DURATION=${CSR_SIGNING_DURATION:-5m} hack/local-up.sh >"${LOGS}/local-up.log" 2>&1; then
    tail -n 40 "${LOGS}/local-up.log"; trap - EXIT; tier_down e2e; return 1
  fi
  # shellcheck source=/dev/null
  source _output/local/env
  export CRIVK_E2E_ROTATION=1
  echo "test: end-to-end tests (crivk log: _output/local/logs/crivk-e2e.log)"
  local rc=0
  # An earlier run's evidence would be taken for this run's.
  rm -rf "${LOGS}/e2e"
  # -timeout 60m: the tier took about 40 minutes with the long lane's
  # token refresh (2399 s in the run of 72b8cd0), 32 without it (1932 s,
  # d293030); at 35 it once ended in go test's timeout panic (the CI of
  # 0a43e89), which names no slow test.
  # -parallel 4: the parallel tests (each in its own namespace, none
  # restarting crivk) mostly wait; GOMAXPROCS (2 here) would run them two
  # at a time.
  # -skip: the long lane's tests (hack/e2e-long.txt, make test-long).
  # go test -json through skipcheck: printed as go test -v prints (also
  # into LOGS/e2e.log), each skip with its verdict before the last line.
  CRIVK_E2E=1 go test -json -count=1 -timeout 60m -parallel 4 -v -run "${E2E_RUN:-.}" -skip "${skip}" ./test/e2e/ 2>&1 |
    skipcheck -v -log "${LOGS}/e2e.log" || rc=$?
  if [ "${rc}" -ne 0 ] && [ -z "$(evidence_dirs "${LOGS}/e2e")" ]; then
    # go test died before TestMain collected (a panic, its timeout).
    dump_evidence "${LOGS}/e2e/script" -kubeconfig "${KUBECONFIG}" -node "${NODE_NAME}" \
      -copy crivk.log="${LOCAL_DIR}/logs/crivk-e2e.log" -copy containerd.log="${LOCAL_DIR}/logs/containerd.log" \
      -note "go test ./test/e2e exited ${rc} without collecting evidence"
  fi
  # Tear down quietly so that go test's summary stays the last output.
  trap - EXIT
  tier_down e2e || rc=1
  [ "${rc}" -eq 0 ] || print_evidence test e2e
  return "${rc}"
}

# chart: helm lint and helm template of charts/crivk, good and bad values.
chart() {
  echo "test: Helm chart (hack/chart-test.sh)"
  hack/chart-test.sh
}

# helm_e2e: charts/crivk installed beside a real kubelet (hack/helm-e2e.sh).
helm_e2e() {
  echo "test: Helm chart beside a kubelet (hack/helm-e2e.sh)"
  disk_room || return 1
  own_state helm || return 1
  local rc=0
  hack/helm-e2e.sh || rc=$?
  # helm-e2e.sh listed the files; here the directories, for the summary.
  [ "${rc}" -eq 0 ] || print_evidence test helm 0
  return "${rc}"
}

# literal_focus LINES: a ginkgo focus matching each line (spec text) literally.
literal_focus() {
  sed 's/[][\.*^$()+?{}|]/\\&/g' <<<"$1" | paste -sd'|'
}

# conformance: the specs listed in hack/conformance-quick.txt (one spec
# text per line, as Ginkgo prints it without [It] and labels), matched
# literally, against crivk. A regression in any of them fails the tests.
# The list's lines are as many specs as must run and pass: one that skips
# itself, a line matching none or several, or a run that ran nothing fails
# the tier (ginkgo_count_check).
conformance() {
  echo "test: conformance quick subset (hack/conformance-quick.txt) against crivk"
  disk_room || return 1
  own_state conformance || return 1
  local lines want focus out=${LOGS}/conformance.out
  lines=$(grep -v '^\s*\(#\|$\)' hack/conformance-quick.txt)
  want=$(wc -l <<<"${lines}")
  focus=$(literal_focus "${lines}")
  local rc=0
  CONFORMANCE_FOCUS="${focus}" NODE_AGENT=crivk hack/conformance.sh 2>&1 | tee "${out}" || rc=$?
  [ "${rc}" -ne 0 ] || ginkgo_count_check "${out}" "${want}" hack/conformance-quick.txt || rc=1
  [ "${rc}" -eq 0 ] || print_evidence test conformance 0
  return "${rc}"
}

# node_dry_count LINES: how many specs of e2e_node.test the literal focus of
# LINES selects (hack/node-conformance.sh's dry run: no cluster).
node_dry_count() {
  local out
  out=$(NODE_CONFORMANCE_FOCUS="$(literal_focus "$1")" NODE_CONFORMANCE_DRY_RUN=1 hack/node-conformance.sh 2>&1) ||
    { echo "${out}" >&2; return 1; }
  sed -n 's/^Will run \([0-9]*\) of .*/\1/p' <<<"${out}"
}

# node_conformance: the specs listed in hack/node-conformance-quick.txt (the
# same format), from the node e2e suite (e2e_node.test, hack/node-conformance.sh),
# against crivk. Each line must select exactly one spec, and the list as many
# as it has lines: dry runs (no cluster, under a second each) check that
# first, name the lines that select none or several, and fail the tier before
# anything starts. After the run, as many specs as lines must have run and
# passed (ginkgo_count_check): a spec that skips itself at run time passes
# the suite, not the tier.
node_conformance() {
  echo "test: node conformance quick subset (hack/node-conformance-quick.txt) against crivk"
  disk_room || return 1
  own_state node-conformance || return 1
  local lines want got line n bad=0
  # The dry runs need them; hack/node-conformance.sh would build them anyway.
  if ! hack/build-kube.sh e2e_node.test ginkgo >"${LOGS}/build-e2e_node.log" 2>&1; then
    tail -n 20 "${LOGS}/build-e2e_node.log"; return 1
  fi
  lines=$(grep -v '^\s*\(#\|$\)' hack/node-conformance-quick.txt)
  want=$(wc -l <<<"${lines}")
  while IFS= read -r line; do
    n=$(node_dry_count "${line}") || n='?'
    [ "${n}" = 1 ] || { echo "test: hack/node-conformance-quick.txt: ${n:-?} specs match: ${line}"; bad=1; }
  done <<<"${lines}"
  got=$(node_dry_count "${lines}") || got='?'
  [ "${got}" = "${want}" ] ||
    { echo "test: hack/node-conformance-quick.txt: ${want} lines select ${got:-?} specs (a line twice?)"; bad=1; }
  [ "${bad}" = 0 ] || return 1
  local rc=0 out=${LOGS}/node-conformance.out
  # Debian's etcd, as the other tiers (hack/node-conformance.sh alone
  # defaults to the built 3.7.0; the subset has no spec that needs it),
  # unless the caller sets LOCAL_ETCD.
  LOCAL_ETCD=${LOCAL_ETCD:-system} NODE_CONFORMANCE_FOCUS="$(literal_focus "${lines}")" NODE_AGENT=crivk hack/node-conformance.sh 2>&1 |
    tee "${out}" || rc=$?
  [ "${rc}" -ne 0 ] || ginkgo_count_check "${out}" "${want}" hack/node-conformance-quick.txt || rc=1
  [ "${rc}" -eq 0 ] || print_evidence test node-conformance 0
  return "${rc}"
}

# walkthrough: the README's quick start, as a user runs it (hack/walkthrough.sh).
walkthrough() {
  echo "test: the README's walkthrough (hack/walkthrough.sh)"
  hack/walkthrough.sh
}

case "${WHAT}" in
  unit) unit ;;
  walkthrough) walkthrough ;;
  chart) chart ;;
  helm) helm_e2e ;;
  conformance) conformance ;;
  node-conformance) node_conformance ;;
  e2e) e2e ;;
  long) E2E_RUN=$(long_tests) || exit 1; export E2E_RUN; e2e ;;
  containerd-system) containerd_system ;;
  all)
    urc=0; unit || urc=$?
    hrc=0; chart || hrc=$?
    # The user's path first (a few minutes with the binaries built; the
    # report of issue #50 gives the measurement): it leaves its pod bb in
    # its own state, which the cluster tiers after it must not see.
    wrc=0; walkthrough || wrc=$?
    crc=0; conformance || crc=$?
    nrc=0; node_conformance || nrc=$?
    erc=0; e2e || erc=$?
    # The chart beside a real kubelet (about 3 minutes): its own cluster.
    krc=0; helm_e2e || krc=$?
    if [ "${urc}" -ne 0 ] || [ "${hrc}" -ne 0 ] || [ "${wrc}" -ne 0 ] || [ "${crc}" -ne 0 ] || [ "${nrc}" -ne 0 ] || [ "${erc}" -ne 0 ] || [ "${krc}" -ne 0 ]; then exit 1; fi
    ;;
  *) echo "usage: hack/test.sh [unit|chart|walkthrough|conformance|node-conformance|e2e|long|helm|containerd-system|all]" >&2; exit 2 ;;
esac
