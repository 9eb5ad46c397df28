#!/usr/bin/env bash
# The whole test suite: formatting, lints, docs, builds without default features and on the
# MSRV, unit + integration tests (against the embedded and the upstream kube-apiserver).
# The inner loop without the upstream server is scripts/quick-test.sh.
# Installs and starts everything the tests need; fails loudly if it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { current_step="$*"; printf '\n==> %s\n' "$*"; }
current_step="setup"
trap 'rc=$?; [[ $rc -eq 0 ]] || printf "\ntest.sh: FAILED at step: %s (exit %s)\n" "$current_step" "$rc" >&2' EXIT

# A one-shot run gains nothing from incremental state, which would double the disk it takes.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# The build takes several GB: say how much room there is, so that a full disk is plain to see.
df -h . | sed 's/^/test.sh: disk: /'

step "cargo fmt --check"
cargo fmt --all -- --check

step "no import circles in any crate (scripts/import-cycles.py; its allow-list warns)"
python3 scripts/import-cycles.py

step "the docs' checked claims agree with the code (scripts/doc-check)"
python3 scripts/doc-check

step "cargo clippy (-D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo doc (-D warnings)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "public API snapshots (scripts/public-api.sh)"
# Each library crate's public API against api/<crate>.txt (cargo-public-api on a pinned nightly,
# both installed under ~/.cache/kcache on first use).
scripts/public-api.sh

step "cargo check --no-default-features"
cargo check --workspace --no-default-features --locked

msrv="$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)"
step "cargo check on the MSRV (rust-version = $msrv)"
if ! rustup toolchain list | grep -q "^$msrv-"; then
  rustup toolchain install "$msrv" --profile minimal
fi
# The library crates users depend on (the CLI, benches and tests follow the stable toolchain);
# built alone they enable no k8s-openapi version (users' binaries choose it): name one.
K8S_OPENAPI_ENABLED_VERSION=1.36 cargo +"$msrv" check --locked -p kcache -p kcache-client \
  -p kcache-proto -p kcache-apiserver -p kcache-metrics -p kcache-runtime -p kcache-testenv

step "cargo package --list (the library crates package: manifests, versions of path deps, files)"
for crate in kcache kcache-proto kcache-client kcache-metrics kcache-runtime kcache-apiserver \
  kcache-testenv; do
  files="$(cargo package --list --locked --offline --allow-dirty -p "$crate")"
  for want in Cargo.toml README.md src/lib.rs; do
    grep -qx "$want" <<<"$files" || { echo "test.sh: $crate's package lacks $want" >&2; exit 1; }
  done
done

step "dependency requirements: the library crates build at the lowest versions allowed"
# In a scratch copy: Cargo.lock is not touched. The newest versions (scripts/dependency-newest.sh)
# are not checked here: CI's result must follow from the commit alone.
scripts/dependency-bounds.sh lowest

step "upstream kube-apiserver + etcd: build or reuse harness/, start (scripts/kube-up.sh)"
# The integration tests also run against the real server; it is described to them by the env
# file (KCACHE_UPSTREAM_*), exported here. A missing server is a failure, never a skip.
upstream_state="$(mktemp -d "${TMPDIR:-/tmp}/kcache-kube.XXXXXX")"
stop_upstream() {
  local rc=$?
  if ! KCACHE_UPSTREAM_STATE="$upstream_state" scripts/kube-down.sh all; then
    [[ $rc -ne 0 ]] || { rc=1; current_step="stop the upstream servers (scripts/kube-down.sh)"; }
  fi
  if [[ $rc -eq 0 ]]; then rm -rf "$upstream_state"; else
    printf 'test.sh: upstream server logs kept in %s\n' "$upstream_state" >&2
    printf 'test.sh: FAILED at step: %s (exit %s)\n' "$current_step" "$rc" >&2
  fi
  exit "$rc"
}
trap stop_upstream EXIT
trap 'exit 130' INT TERM # so that the EXIT trap stops the servers
KCACHE_UPSTREAM_STATE="$upstream_state" scripts/kube-up.sh >/dev/null
set -a
. "$upstream_state/env"
set +a
scripts/upstream-smoke.sh

step "client-go peer (harness/client-go-peer) smoke against the upstream server"
scripts/peer-smoke.sh

step "cargo test"
PROPTEST_CASES="${PROPTEST_CASES:-1000}" cargo test --workspace --locked --no-fail-fast

step "kube-rs's own cluster tests on kube-apiserver and kcache serve (scripts/kube-rs-cluster-tests.sh)"
# The published kube, kube-client and kube-runtime crates' cluster tests: every test that passes
# on the upstream server must pass on `kcache serve`.
scripts/kube-rs-cluster-tests.sh

du -sh target 2>/dev/null | sed 's/^/test.sh: build directory: /' || true

step "Go's envtest on the kcache assets (scripts/envtest-smoke.sh: controller-runtime v0.25.3, unchanged)"
scripts/envtest-smoke.sh

step "controller-runtime's own suites on the kcache assets (scripts/controller-runtime-suites.sh: v0.25.3's pkg/envtest, pkg/client and pkg/cache, unchanged)"
# Every spec must pass: they all pass on kube-apiserver v1.36.5 + etcd too.
scripts/controller-runtime-suites.sh

step "kcache bench smoke (500 pods, 1 run, every peer) against the upstream server"
scripts/bench-smoke.sh
