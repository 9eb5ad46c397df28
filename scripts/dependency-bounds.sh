#!/usr/bin/env bash
# The dependency requirements in the workspace Cargo.toml claim a range ("kube = 5" means any
# 5.x from 5.0.0): check the library crates (what users build; the binaries, tests and benches
# are built with Cargo.lock) at both ends of it.
# - lowest: every direct dependency at the lowest version its requirement allows
#   (`cargo update -Z direct-minimal-versions`, nightly-only; the nightly of public-api.sh);
# - newest: every dependency at the newest version the requirements allow (`cargo update`).
# Cargo.lock is restored afterwards, whatever happens. Needs the crates.io index.
set -euo pipefail
cd "$(dirname "$0")/.."

NIGHTLY="$(sed -n 's/^NIGHTLY=//p' scripts/public-api.sh)"
if ! rustup toolchain list | grep -q "^$NIGHTLY-"; then
  rustup toolchain install "$NIGHTLY" --profile minimal
fi

saved="$(mktemp "${TMPDIR:-/tmp}/kcache-lock.XXXXXX")"
cp Cargo.lock "$saved"
restore() { cp "$saved" Cargo.lock && rm -f "$saved"; }
trap restore EXIT

check() {
  # Built alone the libraries enable no k8s-openapi version (users' binaries choose it).
  K8S_OPENAPI_ENABLED_VERSION=1.36 cargo check --quiet -p kcache -p kcache-client -p kcache-proto \
    -p kcache-apiserver -p kcache-metrics -p kcache-runtime -p kcache-testenv
}

echo "dependency-bounds: lowest direct versions allowed"
cargo +"$NIGHTLY" update --quiet -Z direct-minimal-versions
check
echo "dependency-bounds: newest versions allowed"
cp "$saved" Cargo.lock
cargo update --quiet
check
echo "dependency-bounds: both ends build"
