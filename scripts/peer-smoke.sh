#!/usr/bin/env bash
# Unit tests (go vet, go test) of harness/client-go-peer, then a smoke test of it against the
# upstream kube-apiserver started by scripts/kube-up.sh (env file exported, or sourced from $1):
# creates a namespace with a few pods with kubectl, runs the peer in each mode/format, checks its
# one JSON line (valid JSON, n equal to the pod count, the mode it claims is the one it used), its
# update counting, and that a wrong --n makes it fail. Exits non-zero naming the failing check.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -n "${1:-}" ]]; then set -a; . "$1"; set +a; fi
: "${KCACHE_UPSTREAM_KUBECONFIG:?source the env file written by scripts/kube-up.sh}"

fail() { printf 'peer-smoke: FAILED: %s\n' "$*" >&2; exit 1; }
command -v kubectl >/dev/null || fail "kubectl is not installed (Debian package kubectl)"
command -v python3 >/dev/null || fail "python3 is not installed (needed to check the JSON line)"

[[ -z "$(gofmt -l "$root/harness")" ]] || fail "gofmt: unformatted Go files: $(gofmt -l "$root/harness")"
(cd "$root/harness/client-go-peer" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go vet ./... && \
  GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 go test ./...) || fail "go vet / go test of harness/client-go-peer"
peer="$("$root/scripts/build-harness.sh" client-go-peer)" || fail "build harness/client-go-peer"
k() { kubectl --kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" --request-timeout=20s "$@"; }
ns="kcache-peer-smoke-$$"
pods=3
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"; k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true' EXIT

k create namespace "$ns" >/dev/null || fail "create namespace $ns"
for i in $(seq 1 "$pods"); do
  printf -- '---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p%s\n  namespace: %s\nspec:\n  containers:\n  - name: c\n    image: registry.invalid/none:1\n' "$i" "$ns"
done | k create -f - >/dev/null || fail "create $pods pods"

# check_line FILE MODE PROTOBUF UPDATES: the peer's stdout is exactly one valid JSON line with
# the expected fields.
check_line() {
  python3 - "$@" "$pods" <<'EOF' || fail "peer output $1: $(cat "$1")"
import json, sys
path, mode, protobuf, updates, pods = sys.argv[1], sys.argv[2], sys.argv[3] == "true", int(sys.argv[4]), int(sys.argv[5])
lines = open(path).read().splitlines()
assert len(lines) == 1, f"expected one line, got {len(lines)}"
r = json.loads(lines[0])
assert r["peer"] == "client-go", r
assert r["mode"] == mode and r["protobuf"] == protobuf, r
assert r["n"] == pods and r["expected_n"] == pods, r
assert r["sync_ms"] > 0 and r["sync_cpu_s"] >= 0, r
assert r["vmhwm_bytes"] >= r["rss_after_sync_bytes"] > 0, r
if mode == "streaming":
    assert r["watch_list_requests"] >= 1 and r["list_requests"] == 0, r
else:
    assert r["list_requests"] >= 1 and r["watch_list_requests"] == 0, r
if updates:
    assert r["update_events"] == updates, r
    assert r["update_events_per_s"] > 0 and r["update_cpu_s"] >= 0, r
else:
    assert r["update_events"] is None and r["update_events_per_s"] is None, r
EOF
}

for mode in list-watch streaming; do
  for protobuf in false true; do
    out="$tmp/$mode-$protobuf.json"
    "$peer" --kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" --namespace "$ns" --n "$pods" \
      --mode "$mode" --protobuf="$protobuf" --timeout 60s >"$out" 2>"$tmp/err" \
      || fail "client-go-peer --mode $mode --protobuf=$protobuf: $(cat "$tmp/err")"
    check_line "$out" "$mode" "$protobuf" 0
    echo "peer-smoke: $(cat "$out")"
  done
done

# Updates: once the peer has synced, change each pod once and expect exactly that many updates.
"$peer" --kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" --namespace "$ns" --n "$pods" --updates "$pods" \
  --ready-file "$tmp/ready" --timeout 60s >"$tmp/updates.json" 2>"$tmp/updates.err" &
peer_pid=$!
for _ in $(seq 1 600); do [[ -f "$tmp/ready" ]] || ! kill -0 "$peer_pid" 2>/dev/null && break; sleep 0.1; done
[[ -f "$tmp/ready" ]] || fail "client-go-peer --updates did not sync: $(cat "$tmp/updates.err")"
for i in $(seq 1 "$pods"); do
  k -n "$ns" annotate pod "p$i" kcache.test/touched=yes >/dev/null || fail "annotate pod p$i"
done
wait "$peer_pid" || fail "client-go-peer --updates $pods: $(cat "$tmp/updates.err")"
check_line "$tmp/updates.json" list-watch false "$pods"
echo "peer-smoke: $(cat "$tmp/updates.json")"

# A wrong expected count must fail.
if "$peer" --kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" --namespace "$ns" --n $((pods + 1)) \
  --timeout 60s >/dev/null 2>"$tmp/wrong.err"; then
  fail "client-go-peer accepted --n $((pods + 1)) for $pods pods"
fi
grep -q "expected --n=$((pods + 1))" "$tmp/wrong.err" || fail "wrong --n: unexpected error: $(cat "$tmp/wrong.err")"

echo "peer-smoke: client-go-peer passed (list-watch and streaming, JSON and protobuf, $pods updates, wrong --n rejected)"
