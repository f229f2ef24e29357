#!/usr/bin/env bash
# Prints, as a Markdown table, the conformance results of one or more runs
# grouped by area (Pods, Probing, Container Lifecycle Hook, sidecars, Security
# Context, the volume kinds, Sysctls, Container Runtime, Networking, ...),
# then every selected spec that did not pass, per run.
#
#   hack/conformance-areas.sh LABEL=_output/conformance/<agent>-<ts>/junit.xml...
#
# The selection (what each area's "specs" column counts) comes from a Ginkgo
# dry run of _output/bin/e2e.test with CONFORMANCE_FOCUS and CONFORMANCE_SKIP
# (defaults: the whole [NodeConformance] selection, 389 specs in v1.37.2 (197 in v1.35.4),
# without [Disruptive]), so a spec a run never reached (an interrupted run)
# counts as "not run" rather than vanishing. Per run: passed; failed (failed,
# timed out, panicked or interrupted); skipped (selected, but the spec
# skipped itself), not selected by the run (its focus or skip regexp left it
# out: listed, counted as other); not run
# (selected, not reported: the run was interrupted before it).
#
# The node e2e suite (hack/node-conformance.sh; docs/conformance.md, "The
# node e2e suite"): NODE_E2E=1 takes the selection from a dry run of
# _output/bin/e2e_node.test instead, by default selection 1 of the suite's
# own files (focus [NodeConformance], skip [Serial]|[Disruptive], focus file
# test/e2e_node/: 193 specs in v1.37.2 (174 in v1.35.4)), and adds the suite's areas
# (Containers Lifecycle, MirrorPod, Hostname of Pod, Device Plugin Failures,
# ...) to those of the specs it shares with e2e.test:
#
#   NODE_E2E=1 hack/conformance-areas.sh kubelet=_output/node-conformance/kubelet-<ts>/junit.xml \
#     crivk=_output/node-conformance/crivk-<ts>/junit.xml
#
# Environment: CONFORMANCE_FOCUS, CONFORMANCE_SKIP (ginkgo --focus, --skip),
# CONFORMANCE_FOCUS_FILE and CONFORMANCE_LABEL_FILTER (--focus-file,
# --label-filter; set them empty for none), E2E_TEST (the test binary).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE_E2E=${NODE_E2E:-0}
FOCUS=${CONFORMANCE_FOCUS:-'\[NodeConformance\]'}
if [ "${NODE_E2E}" = 1 ]; then
  SKIP=${CONFORMANCE_SKIP:-'\[Serial\]|\[Disruptive\]'}
  FOCUS_FILE=${CONFORMANCE_FOCUS_FILE-test/e2e_node/}
  LABEL_FILTER=${CONFORMANCE_LABEL_FILTER:-}
  E2E=${E2E_TEST:-${ROOT}/_output/bin/e2e_node.test}
  build=e2e_node.test
else
  SKIP=${CONFORMANCE_SKIP:-'\[Disruptive\]'}
  FOCUS_FILE=${CONFORMANCE_FOCUS_FILE:-}
  LABEL_FILTER=${CONFORMANCE_LABEL_FILTER:-}
  E2E=${E2E_TEST:-${ROOT}/_output/bin/e2e.test}
  build=e2e.test
fi

if [ $# -eq 0 ]; then
  echo "usage: $0 LABEL=JUNIT.xml..." >&2
  exit 2
fi
[ -x "${E2E}" ] || { echo "conformance-areas: ${E2E} missing (hack/build-kube.sh ${build})" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
select_args=(--ginkgo.focus="${FOCUS}" --ginkgo.skip="${SKIP}")
[ -z "${FOCUS_FILE}" ] || select_args+=(--ginkgo.focus-file="${FOCUS_FILE}")
[ -z "${LABEL_FILTER}" ] || select_args+=(--ginkgo.label-filter="${LABEL_FILTER}")
# e2e_node.test has no --provider; its dry run contacts nothing either.
[ "${NODE_E2E}" = 1 ] || select_args+=(--provider=local)
(cd "${tmp}" && "${E2E}" --ginkgo.dry-run --ginkgo.no-color "${select_args[@]}" \
  --ginkgo.junit-report="${tmp}/selection.xml" >"${tmp}/dry-run.log" 2>&1) || {
  tail -n 20 "${tmp}/dry-run.log" >&2
  exit 1
}

# results JUNIT: "status<TAB>name" for every [It] spec of a Ginkgo JUnit
# report; status is passed, failed, skipped-by-filter or skipped (the spec
# skipped itself, or an interrupt skipped it).
results() {
  awk '
    function flush() { if (name != "") print status "\t" name; name = "" }
    /<testcase / {
      flush()
      if (match($0, /name="\[It\] [^"]*"/) == 0) next
      name = substr($0, RSTART + 11, RLENGTH - 12)
      sub(/ \[[^]]*\]$/, "", name)   # the trailing label list Ginkgo appends
      match($0, /status="[a-z]*"/)
      status = substr($0, RSTART + 8, RLENGTH - 9)
      if (status == "timedout" || status == "panicked" || status == "interrupted") status = "failed"
      next
    }
    name != "" && /<skipped message="skipped">/ { status = "skipped-by-filter" }
    /<\/testcase>/ { flush() }
    END { flush() }' "$1"
}

results "${tmp}/selection.xml" | awk -F'\t' '$1 == "passed" {print $2}' | sort -u >"${tmp}/selected"
labels=()
for arg in "$@"; do
  label=${arg%%=*}
  file=${arg#*=}
  [ -f "${file}" ] || { echo "conformance-areas: ${file}: no such file" >&2; exit 1; }
  labels+=("${label}")
  results "${file}" >"${tmp}/run-${#labels[@]}"
done

awk -F'\t' -v nruns="${#labels[@]}" -v labels="${labels[*]}" -v node="${NODE_E2E}" '
  # The own areas of the node e2e suite (test/e2e_node), before the ones it
  # shares with e2e.test (test/e2e/common).
  function node_area(n) {
    if (n ~ /Containers Lifecycle/ && n ~ /[Rr]estartable [Ii]nit|[Ss]idecar/) return "Containers Lifecycle: restartable init containers (sidecars)"
    if (n ~ /Containers Lifecycle/) return "Containers Lifecycle: init and regular containers"
    if (n ~ /MirrorPod/) return "MirrorPod (static pods)"
    if (n ~ /Deleted pods handling/) return "Deleted pods handling"
    if (n ~ /Device Plugin/) return "Device Plugin Failures"
    if (n ~ /Hostname of Pod/) return "Hostname of Pod (FQDN)"
    if (n ~ /Kubelet Cgroup Manager/) return "Kubelet Cgroup Manager (pod and QoS cgroups)"
    if (n ~ /AppArmor/) return "AppArmor"
    if (n ~ /ContainerLogPath/) return "ContainerLogPath"
    if (n ~ /Summary API|ContainerMetrics/) return "Summary API, ContainerMetrics"
    if (n ~ /ProcMount|Pod SIGKILL|Kubelet Volume Manager|Container Runtime Conformance Test/) return "ProcMount, SIGKILL, Volume Manager, Runtime Conformance"
    if (n ~ /^\[sig-node\] Security Context/ && n ~ /PID namespace|pid namespace/) return "Security Context (PID namespace sharing)"
    return ""
  }
  function area(n,   a) {
    if (node == 1 && (a = node_area(n)) != "") return a
    if (n ~ /^\[sig-network\]/) return "Networking (Granular Checks: Pods)"
    if (n ~ /Probing restartable init container/) return "Sidecars: probing restartable init containers"
    if (n ~ /Restartable Init Container Lifecycle Hook/) return "Sidecars: restartable init container lifecycle hooks"
    if (n ~ /^\[sig-node\] Probing container/) return "Probing container"
    if (n ~ /^\[sig-node\] Container Lifecycle Hook/) return "Container Lifecycle Hook"
    if (n ~ /^\[sig-node\] InitContainer/) return "InitContainer"
    if (n ~ /^\[sig-node\] Pods /) return "Pods"
    if (n ~ /^\[sig-node\] (Container Runtime|Containers) /) return "Container Runtime, Containers (images, commands, termination messages)"
    if (n ~ /^\[sig-node\] (Security Context|PrivilegedPod)/) return "Security Context, PrivilegedPod"
    if (n ~ /^\[sig-node\] Sysctls/) return "Sysctls"
    if (n ~ /^\[sig-node\] (ConfigMap|Secrets|Downward API|Variable Expansion) /) return "Environment: ConfigMap, Secrets, Downward API, Variable Expansion"
    if (n ~ /^\[sig-storage\] ConfigMap /) return "Volumes: ConfigMap"
    if (n ~ /^\[sig-storage\] Secrets /) return "Volumes: Secret"
    if (n ~ /^\[sig-storage\] Downward API volume/) return "Volumes: Downward API"
    if (n ~ /^\[sig-storage\] EmptyDir/) return "Volumes: EmptyDir"
    if (n ~ /^\[sig-storage\] HostPath/) return "Volumes: HostPath"
    if (n ~ /^\[sig-storage\] Projected/) return "Volumes: Projected"
    if (n ~ /^\[sig-node\] (Kubelet |KubeletManagedEtcHosts)/) return "Kubelet (logs, read-only root, /etc/hosts)"
    return "Others (Ephemeral Containers, RuntimeClass, PodOSRejection)"
  }
  function unescape(s) {
    gsub(/&#34;/, "\"", s); gsub(/&#39;/, "\047", s); gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&amp;/, "\\&", s)
    return s
  }
  FILENAME ~ /\/selected$/ { sel[$0] = 1; a = area($0); if (!(a in total)) order[++nareas] = a; total[a]++; all++; next }
  {
    r = substr(FILENAME, index(FILENAME, "/run-") + 5) + 0
    if (!($2 in sel)) next
    st[r, $2] = $1
  }
  END {
    split(labels, lab, " ")
    hdr = "| area | specs |"; sep = "| --- | --- |"
    for (r = 1; r <= nruns; r++) { hdr = hdr " " lab[r] " passed | " lab[r] " failed | " lab[r] " other |"; sep = sep " --- | --- | --- |" }
    print hdr; print sep
    for (n in sel) {
      a = area(n)
      for (r = 1; r <= nruns; r++) {
        s = ((r, n) in st) ? st[r, n] : "not run"
        if (s == "passed") p[r, a]++
        else if (s == "failed") f[r, a]++
        else o[r, a]++
        if (s == "passed") P[r]++; else if (s == "failed") F[r]++; else O[r]++
        if (s != "passed") bad[r] = bad[r] sprintf("- %s: %s\n", s == "skipped-by-filter" ? "not selected by the run" : s, unescape(n))
      }
    }
    # the areas sorted by name, "Others" last
    for (i = 1; i <= nareas; i++) for (j = i + 1; j <= nareas; j++) {
      ki = (order[i] ~ /^Others/) ? "~" : order[i]; kj = (order[j] ~ /^Others/) ? "~" : order[j]
      if (kj < ki) { t = order[i]; order[i] = order[j]; order[j] = t }
    }
    for (i = 1; i <= nareas; i++) {
      a = order[i]; line = "| " a " | " total[a] " |"
      for (r = 1; r <= nruns; r++) line = line " " p[r, a] + 0 " | " f[r, a] + 0 " | " o[r, a] + 0 " |"
      print line
    }
    line = "| **all** | **" all "** |"
    for (r = 1; r <= nruns; r++) line = line " **" P[r] + 0 "** | **" F[r] + 0 "** | **" O[r] + 0 "** |"
    print line
    for (r = 1; r <= nruns; r++) {
      printf "\n%s: %d passed, %d failed, %d other (skipped or not run) of %d selected\n", lab[r], P[r], F[r], O[r], all
      n = split(bad[r], lines, "\n"); m = 0
      for (i = 1; i < n; i++) sorted[++m] = lines[i]
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (sorted[j] < sorted[i]) { t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t }
      for (i = 1; i <= m; i++) print sorted[i]
      delete sorted
    }
  }' "${tmp}/selected" "${tmp}"/run-*
