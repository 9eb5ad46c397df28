#!/usr/bin/env bash
# Regenerates src/generated/ (prost types + conversions to k8s-openapi) from the vendored
# .proto files in proto/. Needs no protoc: the codegen uses protox, a pure-Rust compiler.
#
#   crates/kcache-proto/regen.sh            # regenerate from proto/
#   crates/kcache-proto/regen.sh --refresh  # first copy the .proto files from the Go module
#                                           # cache (k8s.io/api, k8s.io/apimachinery @ $K8S_VERSION)
set -euo pipefail
cd "$(dirname "$0")"
K8S_VERSION="${K8S_VERSION:-v0.36.5}"

if [[ "${1:-}" == "--refresh" ]]; then
  mod="$(go env GOMODCACHE)/k8s.io"
  for p in core/v1 coordination/v1 apps/v1; do
    install -D -m 644 "$mod/api@$K8S_VERSION/$p/generated.proto" "proto/k8s.io/api/$p/generated.proto"
  done
  for p in pkg/runtime pkg/runtime/schema pkg/apis/meta/v1 pkg/api/resource pkg/util/intstr; do
    install -D -m 644 "$mod/apimachinery@$K8S_VERSION/$p/generated.proto" "proto/k8s.io/apimachinery/$p/generated.proto"
  done
  python3 codegen/gofacts.py "$mod" "$K8S_VERSION" > proto/go-field-facts.tsv
fi

# The k8s-openapi sources the conversions are matched against: the version pinned in the
# workspace, feature v1_36.
openapi_src="$(cargo metadata --format-version 1 --manifest-path ../../Cargo.toml \
  | python3 -c 'import json,sys; m=json.load(sys.stdin); print(next(p["manifest_path"] for p in m["packages"] if p["name"]=="k8s-openapi"))')"
openapi_src="$(dirname "$openapi_src")/src/v1_36"

rm -rf src/generated
cargo run --quiet --manifest-path codegen/Cargo.toml -- proto src/generated "$openapi_src"
rustfmt --edition 2024 src/generated/*.rs
echo "regenerated $(ls src/generated | wc -l) files in src/generated"
