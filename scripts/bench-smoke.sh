#!/usr/bin/env bash
# Smoke test of `kcache bench` against the upstream kube-apiserver started by
# scripts/kube-up.sh (env file exported, or sourced from $1): 500 pods, 1 run, every peer
# (kcache, kube-rs, client-go) in every mode and wire format, with debug builds. Asserts only
# that every peer configuration produced a valid result line (the bench itself validates each
# line: pod count, update count, plausible figures), that kcache's protobuf lines were answered
# in protobuf and its JSON lines in JSON, that the limit lines (kcache-peer --storage limit:
# the server's cost alone) ran in both modes and formats, saw every pod and read a body of
# plausible size, and that the reports were written — never a speed.
# Then `kcache bench` with its defaults (the embedded server, every peer) at 100 pods, 1 run:
# it must pass as it is, protobuf configurations included. Then the custom-resource dataset
# (`--dataset widgets`: the bench installs a CRD) against the upstream server, 200 objects,
# 1 run: client-go's dynamic informer, kube-rs, kcache's typed, default and limit lines, all
# in JSON, each holding every object and seeing every update. The upstream runs also report
# what they cost kube-apiserver (--server-pid), and a small fleet (1 and 3 peers starting at
# once) runs against it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [[ -n "${1:-}" ]]; then set -a; . "$1"; set +a; fi
: "${KCACHE_UPSTREAM_KUBECONFIG:?source the env file written by scripts/kube-up.sh}"
: "${KCACHE_UPSTREAM_APISERVER_PID:?source the env file written by scripts/kube-up.sh}"

fail() { printf 'bench-smoke: FAILED: %s\n' "$*" >&2; exit 1; }
command -v python3 >/dev/null || fail "python3 is not installed (needed to check results.json)"

client_go_peer="$(scripts/build-harness.sh client-go-peer)" || fail "build harness/client-go-peer"
cargo build --locked -p kcache-cli -p kube-rs-peer -p kcache-peer || fail "cargo build of the bench binaries"
out="$(mktemp -d "${TMPDIR:-/tmp}/kcache-bench-smoke.XXXXXX")"
# The peers' logs stay when the smoke fails (their path is printed), for the post-mortem.
trap 'rc=$?; if [[ $rc -eq 0 ]]; then rm -rf "$out"; else echo "bench-smoke: peer logs kept in $out/logs" >&2; fi' EXIT

# The check of the limit lines (kcache-peer --storage limit), shared by both checks below.
cat >"$out/smoke_limits.py" <<'PY'
def check_limits(runs, n):
    limit = [x for x in runs if x["storage"] == "limit"]
    want = {(m, pb) for m in ("list-watch", "streaming") for pb in (False, True)}
    assert {(x["mode"], x["protobuf"]) for x in limit} == want, limit
    for x in limit:
        line = x["line"]
        assert line["n"] == n and line["update_events"] is None, x
        # Every pod's bytes went through: at least 1 kB of JSON or protobuf each.
        assert line["body_bytes"] >= 1000 * n, x
        key = "list_requests" if x["mode"] == "list-watch" else "watch_list_requests"
        assert line[key] >= 1, x
PY
export PYTHONPATH="$out"

cargo run --locked -q -p kcache-cli --bin kcache -- bench \
  --server kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" --server-pid "$KCACHE_UPSTREAM_APISERVER_PID" \
  --objects 500 --runs 1 \
  --peers kcache,kube-rs,client-go --client-go-peer "$client_go_peer" --out "$out" \
  || fail "kcache bench (peer logs: see the lines above)"

# The defaults: the embedded server (which answers protobuf too), every peer, every mode.
cargo run --locked -q -p kcache-cli --bin kcache -- bench --objects 100 --runs 1 \
  --client-go-peer "$client_go_peer" --out "$out/defaults" \
  || fail "kcache bench with its defaults against the embedded server"
python3 - "$out/defaults" <<'PY' || fail "default-server results in $out/defaults"
import json, os, sys
from smoke_limits import check_limits
r = json.load(open(os.path.join(sys.argv[1], "results.json")))
runs = r["runs"]
bad = [x for x in runs if "error" in x["line"]]
assert not bad, bad
check_limits(runs, 100)
kcache_pb = [x for x in runs if x["peer"] == "kcache" and x["protobuf"]]
assert kcache_pb, "no kcache protobuf configuration against the embedded server"
for x in kcache_pb:
    assert x["line"]["protobuf_responses"] > 0 and x["line"]["json_responses"] == 0, x
print(f"bench-smoke: defaults against the embedded server: {len(runs)} peer runs, all valid")
PY

python3 - "$out" <<'PY' || fail "results in $out"
import json, os, sys
from smoke_limits import check_limits
out = sys.argv[1]
r = json.load(open(os.path.join(out, "results.json")))
runs = r["runs"]
peers = {x["peer"] for x in runs}
assert peers == {"kcache", "kube-rs", "client-go"}, peers
for x in runs:
    line = x["line"]
    assert "error" not in line, x
    assert line["peer"] == x["peer"] and line["mode"] == x["mode"], x
    assert line["n"] == 500, x
    if x["storage"] != "limit":
        assert line["update_events"] == 500, x
    # What the run cost kube-apiserver: CPU, and bytes for the 500 pods it sent (gzip lists
    # compress these alike pods to ~0.5 kB each: 100 bytes a pod is a floor for any format).
    cost = x["server"]
    assert cost["sync"]["cpu_s"] > 0 and cost["sync"]["written_bytes"] >= 100 * 500, x
    assert (cost["update"] is None) == (x["storage"] == "limit"), x
check_limits(runs, 500)
modes = {(x["peer"], x["mode"]) for x in runs}
for p in peers:
    assert {(p, "list-watch"), (p, "streaming")} <= modes, (p, modes)
kcache = [x for x in runs if x["peer"] == "kcache"]
assert any(x["protobuf"] for x in kcache), "no kcache protobuf configuration"
for x in kcache:
    line = x["line"]
    assert line["protobuf"] == x["protobuf"], x
    if x["protobuf"]:
        assert line["protobuf_responses"] > 0 and line["json_responses"] == 0, x
    else:
        assert line["protobuf_responses"] == 0 and line["json_responses"] > 0, x
md = open(os.path.join(out, "results.md")).read()
assert "Ratios protobuf / JSON" in md, "no protobuf/JSON ratios in results.md"
assert "Sync wall × limit" in md, "no × limit table in results.md"
assert "cost the API server" in md, "no server-cost table in results.md"
for f in ("results.md", "chart-500.png"):
    assert os.path.getsize(os.path.join(out, f)) > 0, f
print(f"bench-smoke: {len(runs)} peer runs, all valid: " + ", ".join(sorted(x['label'] for x in runs)))
PY

# A fleet of controllers restarting: 1 and 3 members of kcache's default line and client-go's
# streaming line start at once against the upstream server; every member syncs, and the
# fleet's cost to kube-apiserver is read from its /proc.
cargo run --locked -q -p kcache-cli --bin kcache -- bench \
  --server kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" --server-pid "$KCACHE_UPSTREAM_APISERVER_PID" \
  --objects 200 --runs 1 --fleet 1,3 --peers kcache,client-go --client-go-peer "$client_go_peer" \
  --only "kcache list-watch default,client-go streaming" --out "$out/fleet" \
  || fail "kcache bench --fleet (peer logs: see the lines above)"
python3 - "$out/fleet" <<'PY' || fail "fleet results in $out/fleet"
import json, os, sys
r = json.load(open(os.path.join(sys.argv[1], "fleet.json")))
fleets = r["fleets"]
assert {(x["label"], x["size"]) for x in fleets} == {
    (label, size) for label in ("kcache list-watch default", "client-go streaming") for size in (1, 3)
}, fleets
for x in fleets:
    assert x["error"] is None and x["members_ok"] == x["size"], x
    # Every member read every pod: at least 100 bytes each (gzip) went out per member.
    assert x["server"]["cpu_s"] > 0 and x["server"]["written_bytes"] >= 100 * 200 * x["size"], x
assert "| client-go streaming | 3 | 1/1 |" in open(os.path.join(sys.argv[1], "fleet.md")).read()
print(f"bench-smoke: fleets: {len(fleets)} fleet starts, every member synced")
PY

cargo run --locked -q -p kcache-cli --bin kcache -- bench --dataset widgets \
  --server kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" --objects 200 --runs 1 \
  --peers kcache,kube-rs,client-go --client-go-peer "$client_go_peer" --out "$out/widgets" \
  || fail "kcache bench --dataset widgets (peer logs: see the lines above)"
python3 - "$out/widgets" <<'PY' || fail "custom-resource results in $out/widgets"
import json, os, sys
r = json.load(open(os.path.join(sys.argv[1], "results.json")))
runs = r["runs"]
assert "Dataset: widgets" in r["server"], r["server"]
bad = [x for x in runs if "error" in x["line"]]
assert not bad, bad
labels = {x["label"] for x in runs}
want = {f"{p} {m}" for p in ("client-go", "kube-rs") for m in ("list-watch", "streaming")}
want |= {f"kcache {m} {s}" for m in ("list-watch", "streaming") for s in ("typed", "default", "limit")}
assert labels == want, sorted(labels ^ want)
for x in runs:
    line = x["line"]
    assert line["n"] == 200 and not x["protobuf"], x
    if x["storage"] == "limit":
        assert line["update_events"] is None and line["body_bytes"] >= 3000 * 200, x
    else:
        assert line["update_events"] == 200, x
    if x["peer"] == "kcache":
        assert line["protobuf_responses"] == 0 and line["json_responses"] > 0, x
print(f"bench-smoke: custom resources: {len(runs)} peer runs, all valid")
PY

# Each run deletes what it loaded: none of either dataset's objects is left on the server.
command -v kubectl >/dev/null || fail "kubectl is not installed (Debian package kubectl)"
left="$(kubectl --kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" --request-timeout=20s \
  get pods,widgets.bench.kcache.io -A -l app.kubernetes.io/managed-by=kcache-bench -o name)" \
  || fail "listing what the bench runs left on the server"
[ -z "$left" ] || fail "the bench runs left $(printf '%s\n' "$left" | wc -l) of their objects on the server"
echo "bench-smoke: the bench runs deleted their datasets (none of their objects left)"

# The operator benchmark (kcache bench-operator) at a tiny size, 1 run: the Team operator on
# kcache-runtime, controller-runtime and kube-runtime must each reconcile every Team with the
# right Pod count (the driver checks each ConfigMap on the server) and see every update.
cr_peer="$(scripts/build-harness.sh controller-runtime-peer)" \
  || fail "build harness/controller-runtime-peer (the operator benchmark's Go peer)"
cargo build --locked -p operator-peer || fail "cargo build -p operator-peer (the operator benchmark's Rust peers)"
cargo run --locked -q -p kcache-cli --bin kcache -- bench-operator --kubeconfig "$KCACHE_UPSTREAM_KUBECONFIG" \
  --n 200 --teams 10 --namespaces 5 --namespace op-smoke --runs 1 --updates 50 --update-rate 200 \
  --timeout 180s --cleanup --controller-runtime-peer "$cr_peer" --out "$out/operator" \
  || fail "kcache bench-operator (tiny run: 200 pods, 10 teams, 3 peers); peer logs in $out/operator/logs"
python3 - "$out/operator" <<'PY' || fail "operator benchmark results in $out/operator"
import json, os, sys
r = json.load(open(os.path.join(sys.argv[1], "results.json")))
peers = sorted(x["peer"] for x in r["runs"])
assert peers == ["controller-runtime", "kcache-runtime", "kube-runtime"], peers
for x in r["runs"]:
    assert x["verified_teams"] == 10, x
    assert x["line"]["update_events"] >= 50, x
print("bench-smoke: operator benchmark: 3 peers, every Team reconciled with the right count")
PY
