#!/usr/bin/env bash
# The dependency requirements in the workspace Cargo.toml claim a range ("kube = 5" means any
# 5.x from 5.0.0): check the library crates (what users build; the binaries, tests and benches
# are built with Cargo.lock) at one end of it.
#
# Usage: scripts/dependency-bounds.sh [lowest|newest]
# - lowest (the default, run by scripts/test.sh): every direct dependency at the lowest version
#   its requirement allows (`cargo update -Z direct-minimal-versions`, nightly-only; the nightly
#   of public-api.sh). It depends only on what crates.io has already published at those
#   versions, so a new release elsewhere cannot break it.
# - newest (scripts/dependency-newest.sh; not run by CI, whose result must follow from
#   Cargo.lock alone): every dependency at the newest version the requirements allow
#   (`cargo update`). Its outcome changes whenever a dependency publishes a release.
#
# Both run in a scratch copy of the workspace: the tree's Cargo.lock is never written.
# Needs the crates.io index.
set -euo pipefail
cd "$(dirname "$0")/.."

end="${1:-lowest}"
case "$end" in
  lowest | newest) ;;
  *) echo "usage: $0 [lowest|newest]" >&2; exit 2 ;;
esac

NIGHTLY="$(sed -n 's/^NIGHTLY=//p' scripts/public-api.sh)"
if [[ $end == lowest ]] && ! rustup toolchain list | grep -q "^$NIGHTLY-"; then
  rustup toolchain install "$NIGHTLY" --profile minimal
fi

# The workspace's files (tracked and new, not ignored; the benchmark results left out).
scratch="$(mktemp -d "${TMPDIR:-/tmp}/kcache-bounds.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
git ls-files -co --exclude-standard -z -- . ':!bench/results' |
  while IFS= read -r -d '' f; do if [[ -e $f ]]; then printf '%s\0' "$f"; fi; done |
  tar --null -T - -cf - | tar -xf - -C "$scratch"
# The build directory stays the caller's (CARGO_TARGET_DIR, else the tree's target/).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

cd "$scratch"
if [[ $end == lowest ]]; then
  echo "dependency-bounds: lowest direct versions allowed"
  cargo +"$NIGHTLY" update --quiet -Z direct-minimal-versions
else
  echo "dependency-bounds: newest versions allowed"
  cargo update --quiet
fi
# Built alone the libraries enable no k8s-openapi version (users' binaries choose it).
K8S_OPENAPI_ENABLED_VERSION=1.36 cargo check --quiet -p kcache -p kcache-client -p kcache-proto \
  -p kcache-apiserver -p kcache-metrics -p kcache-runtime -p kcache-testenv
echo "dependency-bounds: the library crates build at the $end versions allowed"
