#!/usr/bin/env bash
# controller-runtime's own suites on kcache: builds the kcache binary, writes the envtest assets
# (`kcache envtest-assets`: kube-apiserver, etcd, kubectl) into a temporary directory, copies
# sigs.k8s.io/controller-runtime v0.25.3 unchanged from the Go module cache into a writable
# temporary directory and runs `go test` of ./pkg/envtest/..., ./pkg/client/ and ./pkg/cache/
# (ginkgo v2 suites, run by plain `go test`) with KUBEBUILDER_ASSETS pointing at the assets.
# Prints the spec counts and every failed spec per package; fails when any spec or package fails.
# With KCACHE_ENVTEST_ASSETS=DIR it uses that directory instead (e.g. symlinks to the real
# kube-apiserver and etcd, to run the same suites on them); KCACHE_CR_SUITES_LOG=FILE keeps the
# whole `go test -v` output there. Warm (kcache built, Go build cache filled) it takes about 3 min (pkg/cache about 100 s).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=v0.25.3
packages=(./pkg/envtest/... ./pkg/client/ ./pkg/cache/)
fail() { printf 'controller-runtime-suites: FAILED: %s\n' "$*" >&2; exit 1; }
command -v go >/dev/null || fail "go is not installed"

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; [[ -n "${KCACHE_CR_SUITES_LOG:-}" ]] && cp "$work/go-test.log" "$KCACHE_CR_SUITES_LOG"; rm -rf "$work"' EXIT
assets="${KCACHE_ENVTEST_ASSETS:-}"
if [[ -z "$assets" ]]; then
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  (cd "$root" && cargo build --locked -p kcache-cli --bin kcache) || fail "cargo build kcache"
  assets="$work/assets"
  mkdir "$assets"
  "$CARGO_TARGET_DIR/debug/kcache" envtest-assets "$assets" >/dev/null || fail "kcache envtest-assets"
fi
for bin in kube-apiserver etcd kubectl; do
  [[ -x "$assets/$bin" ]] || fail "$assets/$bin is missing"
done

export GOTOOLCHAIN=local GOFLAGS=-mod=readonly
src="$(go mod download -json "sigs.k8s.io/controller-runtime@$version" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -n "$src" && -d "$src" ]] || fail "go mod download sigs.k8s.io/controller-runtime@$version"
cp -r "$src" "$work/controller-runtime"
chmod -R u+w "$work/controller-runtime"

log="$work/go-test.log"
start=$SECONDS
status=0
(cd "$work/controller-runtime" && KUBEBUILDER_ASSETS="$assets" \
  go test -count=1 -timeout 15m -v "${packages[@]}") >"$log" 2>&1 || status=$?
elapsed=$((SECONDS - start))
sed -i 's/\x1b\[[0-9;]*m//g' "$log" # ginkgo's colours

# `go test` with several packages prints each package's output whole, then its ok/FAIL line;
# ginkgo ends each suite with "Ran N of M Specs" and "P Passed | F Failed | ...".
bad=0
awk -v assets="$assets" '
  /^Ran [0-9]+ of [0-9]+ Specs/ { ran = $2 " of " $4 " specs" }
  /Passed \| [0-9]+ Failed/ { counts = $0; sub(/^.*-- /, "", counts) }
  /^  \[FAIL\]|^\[FAIL\]/ && !/^\[FAIL\] in / { fails = fails "    " $0 "\n" }
  /^(ok|FAIL)[ \t]+sigs\.k8s\.io\// {
    pkg = $2; verdict = $1
    if (ran == "" && counts == "") summary = "no ginkgo suite"
    else summary = ran ": " counts
    printf "controller-runtime-suites: %-4s %s (%s) %s\n", verdict, pkg, $NF, summary
    printf "%s", fails
    ran = ""; counts = ""; fails = ""
  }
' "$log" || bad=1
if [[ $status -ne 0 || $bad -ne 0 ]]; then
  grep -E '^(FAIL|panic:|--- FAIL)|\[FAIL\]|\[PANICKED\]|\[TIMEDOUT\]' "$log" | head -60 >&2 || true
  fail "go test of controller-runtime $version ${packages[*]} with KUBEBUILDER_ASSETS=$assets (${elapsed}s)"
fi
echo "controller-runtime-suites: ok, controller-runtime $version ${packages[*]} in ${elapsed}s ($assets)"
