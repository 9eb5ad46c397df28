#!/usr/bin/env bash
# Smoke test of the upstream kube-apiserver started by scripts/kube-up.sh, using the env file it
# wrote (exported in the environment, or sourced from $1): kubectl can list namespaces; create,
# list and watch a ConfigMap as admin; the unprivileged user is authenticated but forbidden;
# TLS verification is on (an unverified client is refused). Exits non-zero with the failing
# check named.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -n "${1:-}" ]]; then set -a; . "$1"; set +a; fi
: "${KCACHE_UPSTREAM_KUBECONFIG:?source the env file written by scripts/kube-up.sh}"

fail() { printf 'upstream-smoke: FAILED: %s\n' "$*" >&2; exit 1; }
command -v kubectl >/dev/null || fail "kubectl is not installed (Debian package kubectl)"

k() { kubectl --kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" --request-timeout=20s "$@"; }
ns="kcache-smoke-$$"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"; k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true' EXIT

k get namespaces -o name >"$tmp/ns" || fail "kubectl get namespaces"
grep -qx namespace/default "$tmp/ns" || fail "namespace default not listed: $(cat "$tmp/ns")"

k create namespace "$ns" >/dev/null || fail "create namespace $ns"
k -n "$ns" create configmap first --from-literal=k=v1 >/dev/null || fail "create configmap first"

# `get --watch` lists, then watches from the list's resourceVersion: once it has printed the
# existing object, every later change must arrive, however late the watch request lands.
k -n "$ns" get configmaps --watch --output-watch-events -o 'custom-columns=TYPE:.type,NAME:.object.metadata.name' \
  >"$tmp/watch" 2>"$tmp/watch.err" &
watcher=$!
for _ in $(seq 1 200); do grep -q 'ADDED *first' "$tmp/watch" && break; sleep 0.1; done
grep -q 'ADDED *first' "$tmp/watch" || fail "watch did not list configmap first: $(cat "$tmp/watch" "$tmp/watch.err")"
k -n "$ns" create configmap second --from-literal=k=v2 >/dev/null || fail "create configmap second"
k -n "$ns" delete configmap first >/dev/null || fail "delete configmap first"
for _ in $(seq 1 100); do grep -q 'DELETED *first' "$tmp/watch" && break; sleep 0.1; done
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true
grep -q 'ADDED *second' "$tmp/watch" || fail "watch missed ADDED second: $(cat "$tmp/watch" "$tmp/watch.err")"
grep -q 'DELETED *first' "$tmp/watch" || fail "watch missed DELETED first: $(cat "$tmp/watch" "$tmp/watch.err")"

names="$(k -n "$ns" get configmaps -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}')" || fail "list configmaps"
[[ "$names" == second ]] || fail "list configmaps: expected only 'second', got: $names"

if kubectl --kubeconfig "$KCACHE_UPSTREAM_ALICE_KUBECONFIG" --request-timeout=20s -n "$ns" get configmaps \
  >/dev/null 2>"$tmp/alice.err"; then
  fail "alice (no RBAC bindings) could list configmaps"
fi
grep -q Forbidden "$tmp/alice.err" || fail "alice: expected Forbidden, got: $(cat "$tmp/alice.err")"

if curl -sS --max-time 10 -o /dev/null "$KCACHE_UPSTREAM_URL/version" 2>/dev/null; then
  fail "a client without the CA was accepted (TLS verification must stay on)"
fi
curl -fsS --max-time 10 --cacert "$KCACHE_UPSTREAM_CA" -o /dev/null "$KCACHE_UPSTREAM_URL/version" \
  || fail "GET /version with the CA"

echo "upstream-smoke: kube-apiserver $KCACHE_UPSTREAM_VERSION at $KCACHE_UPSTREAM_URL passed (namespaces, configmap create/list/watch, RBAC, TLS)"
