#!/usr/bin/env bash
# Compatibility run: for each kube-apiserver release given, build (or reuse) it with
# scripts/build-harness.sh, start it with etcd (scripts/kube-up.sh), run the checks that use the
# upstream server against it, stop it, and write a table of the results.
#
# Usage: scripts/compat.sh VERSION...          e.g. scripts/compat.sh v1.34.4 v1.35.4 v1.36.5 v1.37.2
#
# Checks (KCACHE_COMPAT_STEPS, space-separated, default "smoke tests kube-rs bench"):
#   smoke    scripts/upstream-smoke.sh (namespaces, configmaps, list/watch, RBAC, TLS)
#   tests    the integration tests that talk to the upstream server: cargo test of
#            $KCACHE_COMPAT_CARGO_ARGS (default: -p kcache-client -p kcache-cli
#            -p kcache-conformance --tests), KCACHE_UPSTREAM set, never skipped
#   kube-rs  scripts/kube-rs-cluster-tests.sh (kube-rs's own cluster tests)
#   bench    scripts/bench-smoke.sh (500 pods, 1 run, every peer)
# The first kube-apiserver build of a version takes ~15 min on 2 cores (cached afterwards).
#
# Output: the table on stdout and in ${KCACHE_COMPAT_OUT:-target/compat}/compat-<UTC date>.md,
# each check's log beside it. Exit status 1 when any check failed on any version.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1

[[ $# -gt 0 ]] || { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
for v in "$@"; do
  [[ "$v" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "compat: '$v' is not a release (v1.MINOR.PATCH)" >&2; exit 2; }
done

steps="${KCACHE_COMPAT_STEPS:-smoke tests kube-rs bench}"
read -r -a cargo_args <<<"${KCACHE_COMPAT_CARGO_ARGS:--p kcache-client -p kcache-cli -p kcache-conformance --tests}"
stamp="$(date -u +%Y-%m-%dT%H%MZ)"
out="${KCACHE_COMPAT_OUT:-$root/target/compat}"
mkdir -p "$out"
table="$out/compat-$stamp.md"
note() { printf 'compat: %s\n' "$*" >&2; }

# run_step VERSION NAME COMMAND...: runs the command with its output in a log; prints a cell.
run_step() {
  local version="$1" name="$2" log start rc passed failed
  shift 2
  log="$out/$version-$name.log"
  start=$SECONDS
  note "$version: $name"
  "$@" >"$log" 2>&1
  rc=$?
  local took="$((SECONDS - start)) s"
  if [[ "$name" == tests ]]; then
    passed="$(grep -o '^test result: [a-zA-Z]*\. [0-9]* passed' "$log" | awk '{s += $4} END {print s + 0}')"
    failed="$(grep -o '[0-9]* failed;' "$log" | awk '{s += $1} END {print s + 0}')"
    if [[ $rc -eq 0 ]]; then cell="pass ($passed tests, $took)"; else cell="**FAIL** ($failed of $((passed + failed)) failed, $took; $(basename "$log"))"; fi
  elif [[ $rc -eq 0 ]]; then
    cell="pass ($took)"
  else
    cell="**FAIL** (exit $rc, $took; $(basename "$log"))"
  fi
  [[ $rc -eq 0 ]] || any_failed=1
  printf '%s' "$cell"
}

any_failed=0
header="| kube-apiserver |"
rule="|---|"
for s in $steps; do header+=" $s |"; rule+="---|"; done
rows=()
for version in "$@"; do
  row="| $version |"
  note "$version: build (scripts/build-harness.sh --kube-version $version)"
  if ! KCACHE_KUBE_VERSION="$version" scripts/build-harness.sh etcd kube-apiserver >"$out/$version-build.log" 2>&1; then
    any_failed=1
    for _ in $steps; do row+=" **not run**: build failed ($version-build.log) |"; done
    rows+=("$row")
    continue
  fi
  state="$(mktemp -d "${TMPDIR:-/tmp}/kcache-compat.XXXXXX")"
  if ! KCACHE_KUBE_VERSION="$version" KCACHE_UPSTREAM_STATE="$state" scripts/kube-up.sh >"$out/$version-up.log" 2>&1; then
    any_failed=1
    for _ in $steps; do row+=" **not run**: kube-up failed ($version-up.log) |"; done
    rows+=("$row")
    continue
  fi
  for s in $steps; do
    case "$s" in
      smoke) cell="$(run_step "$version" smoke bash -c "set -a; . '$state/env'; set +a; exec scripts/upstream-smoke.sh")" ;;
      tests) cell="$(run_step "$version" tests bash -c "set -a; . '$state/env'; set +a; exec cargo test --locked --no-fail-fast ${cargo_args[*]}")" ;;
      kube-rs) cell="$(run_step "$version" kube-rs bash -c "set -a; . '$state/env'; set +a; exec scripts/kube-rs-cluster-tests.sh")" ;;
      bench) cell="$(run_step "$version" bench bash -c "set -a; . '$state/env'; set +a; exec scripts/bench-smoke.sh")" ;;
      *) cell="unknown check '$s'" ;;
    esac
    [[ "$cell" != *FAIL* && "$cell" != unknown* ]] || any_failed=1
    row+=" $cell |"
  done
  KCACHE_UPSTREAM_STATE="$state" scripts/kube-down.sh all >>"$out/$version-up.log" 2>&1 || note "$version: kube-down failed (see $version-up.log)"
  rows+=("$row")
done

{
  echo "Compatibility run of $stamp ($(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(uname -m)): scripts/compat.sh $*"
  echo
  echo "$header"
  echo "$rule"
  printf '%s\n' "${rows[@]}"
} | tee "$table"
note "table written to $table"
exit "$any_failed"
