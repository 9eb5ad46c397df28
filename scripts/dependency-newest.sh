#!/usr/bin/env bash
# The library crates built with every dependency at the newest version the workspace's
# requirements allow (`cargo update` in a scratch copy; the tree's Cargo.lock is untouched).
# Not part of CI (scripts/test.sh builds from Cargo.lock, so that its result does not change
# without a commit): run it before a release and before raising or loosening a requirement in
# Cargo.toml, and after a dependency publishes a release that matters to kcache.
set -euo pipefail
exec "$(dirname "$0")/dependency-bounds.sh" newest
