#!/usr/bin/env bash
# Records the OpenAPI documents of a running kube-apiserver into the embedded server's data:
# `/openapi/v2` and every `/openapi/v3/<path>` of the `/openapi/v3` index, bundled as one
# JSON object {"version", "v2", "v3": {"<path>": document}} and gzip-compressed to
# crates/kcache-apiserver/data/openapi-<version>.json.gz.
#
# Run it against a fresh upstream server with no CustomResourceDefinitions (the bundle must
# hold the built-in schemas only), e.g.:
#   KCACHE_UPSTREAM_STATE=$(mktemp -d) scripts/kube-up.sh
#   set -a; . "$KCACHE_UPSTREAM_STATE/env"; set +a
#   KUBECONFIG=$KCACHE_UPSTREAM_KUBECONFIG scripts/record-openapi.sh
#   scripts/kube-down.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v kubectl >/dev/null || { echo "record-openapi: kubectl is needed" >&2; exit 1; }
command -v python3 >/dev/null || { echo "record-openapi: python3 is needed" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

version="$(kubectl get --raw /version | python3 -c 'import json,sys; print(json.load(sys.stdin)["gitVersion"])')"
if [[ "$(kubectl get --raw /apis/apiextensions.k8s.io/v1/customresourcedefinitions | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" != 0 ]]; then
  echo "record-openapi: the server has CustomResourceDefinitions; use a fresh one" >&2
  exit 1
fi
kubectl get --raw /openapi/v2 >"$work/v2.json"
kubectl get --raw /openapi/v3 >"$work/v3.json"
mkdir -p "$work/v3"
python3 - "$work/v3.json" >"$work/paths" <<'PY'
import json, sys
for p in sorted(json.load(open(sys.argv[1]))["paths"]):
    print(p)
PY
i=0
while read -r p; do
  kubectl get --raw "/openapi/v3/$p" >"$work/v3/$i.json"
  printf '%s\t%s\n' "$i" "$p" >>"$work/index"
  i=$((i + 1))
done <"$work/paths"

out="$root/crates/kcache-apiserver/data/openapi-${version}.json.gz"
python3 - "$work" "$version" "$out" <<'PY'
import gzip, json, sys
work, version, out = sys.argv[1:]
v3 = {}
for line in open(f"{work}/index"):
    i, p = line.rstrip("\n").split("\t")
    v3[p] = json.load(open(f"{work}/v3/{i}.json"))
bundle = {"version": version, "v2": json.load(open(f"{work}/v2.json")), "v3": v3}
data = json.dumps(bundle, separators=(",", ":"), sort_keys=True).encode()
# mtime=0: the same documents give the same bytes.
with open(out, "wb") as f:
    with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9, mtime=0) as g:
        g.write(data)
print(f"record-openapi: {len(v3)} v3 documents, {len(data)} bytes of JSON, "
      f"{len(open(out, 'rb').read())} compressed -> {out}", file=sys.stderr)
PY
