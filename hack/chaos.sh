#!/usr/bin/env bash
# The fault scenarios of the fault-tolerance issue against a local cluster
# brought up and torn down here (through hack/test.sh e2e): containerd and
# kube-apiserver killed and restarted, crivk started before its runtime,
# 30 TERM-ignoring pods deleted at once, crivk killed with SIGKILL while
# pods are deleted (cgroups) and CRIVK_CHAOS_CYCLES (default 10) times
# during a churn of 30 pods; then the containerd outage, the API server
# outage and the kill -9 churn again with one crivk process serving three
# nodes (test/e2e/fleet_chaos_test.go, which runs only when
# CRIVK_E2E_FLEET_CHAOS=1: about 8 minutes more, estimated). Each test prints its
# figures; docs/reliability.md records them. `make test` runs the same
# single-node tests with 3 kill -9 cycles, and skips the fleet's.
set -o errexit -o nounset -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CRIVK_CHAOS_CYCLES=${CRIVK_CHAOS_CYCLES:-10}
export CRIVK_E2E_FLEET_CHAOS=1
export E2E_RUN='^(TestKill9DuringChurn|TestContainerdOutage|TestAPIServerOutage|TestCrivkWaitsForTheRuntime|TestNoPodObjectBeforeContainersStop|TestPodCgroupsCleanedAfterKill9|TestCrivkRestartKeepsPods|TestOrphanCleanedOnStart|TestFleetContainerdOutage|TestFleetAPIServerOutage|TestFleetKill9DuringChurn)$'
exec "${ROOT}/hack/test.sh" e2e
