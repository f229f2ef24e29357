# shellcheck shell=bash
# Sourced by the test scripts (hack/test.sh, hack/helm-e2e.sh,
# hack/conformance.sh): naming the evidence a failed tier left (issue #34).
# Each tier writes it, before its clean-up, into
# _output/test-logs/<tier>/<test>/ with an index.txt that lists every file
# and what it holds (test/evidence). The caller sets ROOT.

# evidence_dirs BASE: the directories under BASE holding an index.txt.
evidence_dirs() {
  find "$1" -name index.txt -printf '%h\n' 2>/dev/null | sort
}

# print_evidence PREFIX TIER [MAX]: for every evidence directory of TIER
# (_output/test-logs/TIER/...), a line "PREFIX: evidence of the failed TIER
# tier: DIR/ (N files, listed in its index.txt)", then up to MAX (default
# 40; 0: none) of its files, one a line.
print_evidence() {
  local prefix=$1 tier=$2 max=${3:-40} d rel n found=0
  while IFS= read -r d; do
    [ -n "${d}" ] || continue
    found=1
    rel=${d#"${ROOT}/"}
    n=$(find "${d}" -type f | wc -l)
    echo "${prefix}: evidence of the failed ${tier} tier: ${rel}/ (${n} files, listed in its index.txt)"
    [ "${max}" -gt 0 ] || continue
    find "${d}" -type f -printf '%P\n' | sort | head -n "${max}" | sed "s|^|${prefix}:   ${rel}/|"
    [ "${n}" -le "${max}" ] || echo "${prefix}:   ... and $((n - max)) more in ${rel}/"
  done < <(evidence_dirs "${ROOT}/_output/test-logs/${tier}")
  [ "${found}" = 1 ] || echo "${prefix}: the failed ${tier} tier left no evidence directory under _output/test-logs/${tier}/"
}

# dump_evidence DIR ARGS...: the cluster-side evidence through client-go
# (go run ./test/evidence/dump -out DIR ARGS...); quiet, never fails.
dump_evidence() {
  local dir=$1
  shift
  mkdir -p "${dir}"
  (cd "${ROOT}" && go run ./test/evidence/dump -out "${dir}" "$@") >"${dir}/dump.log" 2>&1 ||
    echo "evidence: go run ./test/evidence/dump failed, see ${dir}/dump.log" >&2
}
