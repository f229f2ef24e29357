# shellcheck shell=bash
# Shared by hack/conformance.sh and hack/node-conformance.sh (sourced): the
# summary of a Ginkgo run of an e2e binary; and by hack/test.sh: the check
# of a ginkgo tier's count against its selection.

# ginkgo_summary LOG BINARY HEADER SKIPPED_NOTE RC prints, and writes to
# summary.txt beside LOG (the caller's log function reports a missing summary): HEADER; "Ran R of T Specs; skipped K
# (SKIPPED_NOTE), pending N"; "P passed, F failed"; then the names of the
# failed specs. It reads Ginkgo's last lines of LOG ("Ran R of T Specs in S
# seconds" and "SUCCESS!|FAIL! -- P Passed | F Failed | N Pending | K
# Skipped"; the failed specs are listed under "Summarizing N Failures:" as
# "[FAIL] ..." (or [TIMEDOUT], [PANICKED], [INTERRUPTED]) lines). Without a
# summary in LOG it prints LOG's last lines and returns 1; otherwise it
# returns 0 only when no spec failed and RC (the run's exit status) is 0.
ginkgo_summary() {
  local file=$1 binary=$2 header=$3 note=$4 rc=$5 tally ran passed failed pending skipped
  tally=$(grep -Eo '[0-9]+ Passed \| [0-9]+ Failed \| [0-9]+ Pending \| [0-9]+ Skipped' "${file}" | tail -n 1) || true
  if [ -z "${tally}" ]; then
    log "${binary} exited with ${rc} and no summary; last lines of ${file}:"
    tail -n 30 "${file}"
    return 1
  fi
  read -r passed _ _ failed _ _ pending _ _ skipped _ <<<"${tally}"
  ran=$(grep -Eo 'Ran [0-9]+ of [0-9]+ Specs' "${file}" | tail -n 1) || true
  {
    echo "${header}"
    echo "${ran:-Ran ? specs}; skipped ${skipped} (${note}), pending ${pending}"
    echo "${passed} passed, ${failed} failed"
    sed -n '/^Summarizing [0-9]* Failure/,/^Ran [0-9]* of/p' "${file}" |
      sed -nE 's/^[[:space:]]*\[(FAIL|TIMEDOUT|PANICKED|INTERRUPTED)\][[:space:]]*//p'
  } | tee "$(dirname "${file}")/summary.txt"
  [ "${failed}" -eq 0 ] && [ "${rc}" -eq 0 ]
}

# ginkgo_count_check OUT WANT WHAT: a tier's count (hack/test.sh). OUT is
# the output of hack/conformance.sh or hack/node-conformance.sh, whose last
# summary (ginkgo_summary above) says "Ran R of T Specs; ..." and "P passed,
# F failed"; WANT is how many specs the tier's selection WHAT must run.
# Unless R and P both equal WANT it prints one line saying what differs and
# returns 1: a run with no failure and exit 0 passes the suite, not the
# tier, when a spec of the list skipped itself, a line matched no spec, or
# the run ran none at all.
ginkgo_count_check() {
  local out=$1 want=$2 what=$3 ran passed
  ran=$(sed -nE 's/^Ran ([0-9]+) of [0-9]+ Specs.*/\1/p' "${out}" | tail -n 1)
  passed=$(sed -nE 's/^([0-9]+) passed, [0-9]+ failed$/\1/p' "${out}" | tail -n 1)
  if [ -n "${want}" ] && [ "${ran}" = "${want}" ] && [ "${passed}" = "${want}" ]; then
    return 0
  fi
  echo "test: ${what}: COUNT MISMATCH: ${want:-?} specs selected, ${ran:-no count of} ran, ${passed:-no count of} passed (a spec skipped itself, a line matched none or several, or the run stopped early)"
  return 1
}
