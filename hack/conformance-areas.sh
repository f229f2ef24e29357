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
# (defaults: the whole [NodeConformance] selection, 197 specs in v1.35.4,
# without [Disruptive]), so a spec a run never reached (an interrupted run)
# counts as "not run" rather than vanishing. Per run: passed; failed (failed,
# timed out, panicked or interrupted); skipped (selected, but the spec
# skipped itself), not selected by the run (its focus or skip regexp left it
# out: listed, counted as other); not run
# (selected, not reported: the run was interrupted before it).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FOCUS=${CONFORMANCE_FOCUS:-'\[NodeConformance\]'}
SKIP=${CONFORMANCE_SKIP:-'\[Disruptive\]'}
E2E=${E2E_TEST:-${ROOT}/_output/bin/e2e.test}

if [ $# -eq 0 ]; then
  echo "usage: $0 LABEL=JUNIT.xml..." >&2
  exit 2
fi
[ -x "${E2E}" ] || { echo "conformance-areas: ${E2E} missing (hack/build-kube.sh e2e.test)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
(cd "${tmp}" && "${E2E}" --ginkgo.dry-run --ginkgo.no-color --ginkgo.focus="${FOCUS}" --ginkgo.skip="${SKIP}" \
  --ginkgo.junit-report="${tmp}/selection.xml" --provider=local >"${tmp}/dry-run.log" 2>&1) || {
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

awk -F'\t' -v nruns="${#labels[@]}" -v labels="${labels[*]}" '
  function area(n) {
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
