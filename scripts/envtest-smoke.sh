#!/usr/bin/env bash
# Go's envtest on kcache: builds the kcache binary, writes the envtest assets
# (`kcache envtest-assets`: kube-apiserver, etcd, kubectl) into a temporary directory and runs
# harness/envtest-smoke — an unchanged controller-runtime v0.25.3 envtest test (CRDs from a
# directory, a controller-runtime client, AddUser) — with KUBEBUILDER_ASSETS pointing there.
# With KCACHE_ENVTEST_ASSETS=DIR it uses that directory instead (e.g. symlinks to the real
# kube-apiserver and etcd, to run the same test on them). Exits non-zero naming the failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fail() { printf 'envtest-smoke: FAILED: %s\n' "$*" >&2; exit 1; }
command -v go >/dev/null || fail "go is not installed"

[[ -z "$(gofmt -l "$root/harness/envtest-smoke")" ]] || fail "gofmt: $(gofmt -l "$root/harness/envtest-smoke")"
assets="${KCACHE_ENVTEST_ASSETS:-}"
if [[ -z "$assets" ]]; then
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  (cd "$root" && cargo build --locked -p kcache-cli --bin kcache) || fail "cargo build kcache"
  assets="$(mktemp -d)"
  trap 'rm -rf "$assets"' EXIT
  "$CARGO_TARGET_DIR/debug/kcache" envtest-assets "$assets" >/dev/null || fail "kcache envtest-assets"
fi
for bin in kube-apiserver etcd kubectl; do
  [[ -x "$assets/$bin" ]] || fail "$assets/$bin is missing"
done
(cd "$root/harness/envtest-smoke" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go vet ./... && \
  KUBEBUILDER_ASSETS="$assets" GOTOOLCHAIN=local GOFLAGS=-mod=readonly go test -count=1 -v ./...) \
  || fail "go test of harness/envtest-smoke with KUBEBUILDER_ASSETS=$assets"
echo "envtest-smoke: ok ($assets)"
