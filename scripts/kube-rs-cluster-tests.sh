#!/usr/bin/env bash
# kube-rs's own cluster tests, taken from the crates as published (kube,
# kube-client, kube-runtime at the version in Cargo.lock), run against the upstream kube-apiserver
# started by scripts/kube-up.sh and against `kcache serve` (HTTPS, generated CA + admin token).
#
# The published crates are copied from the cargo registry into a scratch workspace under the
# build directory (the registry is never modified), their lib tests are compiled once with the
# features those tests need, and every cluster test (`#[ignore = "needs cluster…"]` and the like;
# the `client::auth` exec tests are ignored for platform reasons and need no server, so they are
# left out) runs on its own, with a time bound, once per server. Prints a table; fails when a test
# that passes on kube-apiserver fails on kcache. Tests failing on kube-apiserver too (a bare
# kube-apiserver has no nodes, kubelet or scheduler, so pods never run) are listed, not fatal.
#
# Usage: scripts/kube-rs-cluster-tests.sh [ENV_FILE]   (the env file written by kube-up.sh; or
# have its KCACHE_UPSTREAM_* variables exported).
# Environment: KCACHE_KUBE_RS_TEST_TIMEOUT  seconds per test and server (default 90);
#              CARGO_TARGET_DIR             build directory (default target/).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [[ -n "${1:-}" ]]; then set -a; . "$1"; set +a; fi
: "${KCACHE_UPSTREAM_KUBECONFIG:?source the env file written by scripts/kube-up.sh}"

fail() { printf 'kube-rs-cluster-tests: FAILED: %s\n' "$*" >&2; exit 1; }
note() { printf 'kube-rs-cluster-tests: %s\n' "$*" >&2; }
per_test_timeout="${KCACHE_KUBE_RS_TEST_TIMEOUT:-90}"

target_dir="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$target_dir"
target_dir="$(cd "$target_dir" && pwd)"
export CARGO_TARGET_DIR="$target_dir"

# The version of the kube crates this workspace uses, and their published sources.
kube_version="$(awk '/^name = "kube"$/ {getline; sub(/^version = "/, ""); sub(/"$/, ""); print; exit}' Cargo.lock)"
[[ -n "$kube_version" ]] || fail "no kube package in Cargo.lock"
cargo fetch --locked >/dev/null || fail "cargo fetch (the kube crates' sources)"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
crates=(kube kube-client kube-runtime kube-core kube-derive)
declare -A src
for c in "${crates[@]}"; do
  d="$(ls -d "$cargo_home"/registry/src/*/"$c-$kube_version" 2>/dev/null | head -n 1 || true)"
  [[ -n "$d" && -f "$d/Cargo.toml" ]] || fail "source of $c $kube_version not in $cargo_home/registry/src"
  src[$c]="$d"
done

# Scratch workspace: copies of the five crates, patched so that they use each other. Made once
# per kube version (then reused, so that cargo rebuilds nothing).
scratch="$target_dir/kube-rs-cluster-tests"
ws="$scratch/ws-$kube_version"
if [[ ! -f "$ws/.prepared" ]]; then
  rm -rf "$ws"
  mkdir -p "$ws"
  for c in "${crates[@]}"; do cp -R "${src[$c]}" "$ws/$c"; done
  chmod -R u+w "$ws"
  # Publishing dropped the path-only dev-dependency on `kube` (see each Cargo.toml.orig): restore it.
  grep -q 'kube = { path = "../kube", features = \["derive", "client", "ws"\] }' \
    "$ws/kube-client/Cargo.toml.orig" || fail "kube-client's Cargo.toml.orig changed: review the restored dev-dependency"
  printf '\n[dev-dependencies.kube]\npath = "../kube"\nfeatures = ["derive", "client", "ws"]\n' \
    >>"$ws/kube-client/Cargo.toml"
  printf '\n[dev-dependencies.kube]\npath = "../kube"\nfeatures = ["derive", "client", "runtime"]\n' \
    >>"$ws/kube-runtime/Cargo.toml"
  # Our lock file seeds the versions; the crates' dev-dependencies are resolved on top of it.
  cp Cargo.lock "$ws/Cargo.lock"
  {
    echo '[workspace]'
    echo 'members = ["kube", "kube-client", "kube-runtime"]'
    echo 'resolver = "2"'
    echo '[patch.crates-io]'
    for c in "${crates[@]}"; do echo "$c = { path = \"$c\" }"; done
  } >"$ws/Cargo.toml"
  touch "$ws/.prepared"
fi

# Features the cluster tests are gated on (kube: derive, runtime; kube-client: rustls-tls,
# ws, kubelet-debug, unstable-client); rustls-tls also gives kube-runtime's tests a TLS stack.
# Not openssl-tls: it would need the OpenSSL headers on the machine, for one test
# (custom_client_openssl_tls_configuration) that sends no credentials and fails on both servers.
features="kube/derive,kube/runtime,kube-client/rustls-tls"
features="$features,kube-client/ws,kube-client/kubelet-debug,kube-client/unstable-client"
note "building the lib tests of kube, kube-client, kube-runtime $kube_version (features $features)"
build_json="$scratch/build.json"
(cd "$ws" && cargo test --workspace --lib --no-run --features "$features" \
  --message-format=json-render-diagnostics >"$build_json") || fail "cargo test --no-run in $ws"
mapfile -t bins < <(python3 - "$build_json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"].replace("_", "-") + "\t" + m["executable"])
PY
)
[[ ${#bins[@]} -eq 3 ]] || fail "expected 3 test binaries, got ${#bins[@]}: ${bins[*]}"

# The tests: every ignored lib test except the client::auth exec ones.
tests_file="$scratch/tests.tsv"
: >"$tests_file"
for b in "${bins[@]}"; do
  crate="${b%%$'\t'*}" exe="${b#*$'\t'}"
  "$exe" --list --ignored --format terse 2>/dev/null | sed -n 's/: test$//p' \
    | grep -v '^client::auth::' | sed "s|^|$crate\t$exe\t|" >>"$tests_file" || true
done
n_tests="$(wc -l <"$tests_file")"
((n_tests >= 20)) || fail "found only $n_tests cluster tests (expected about 28)"
note "$n_tests cluster tests"

# kcache serve: built by cargo, HTTPS on a free loopback port, its kubeconfig in the scratch dir.
cargo build --locked -p kcache-cli >&2 || fail "cargo build -p kcache-cli"
kcache_bin="$target_dir/debug/kcache"
kcache_dir="$scratch/kcache-serve"
rm -rf "$kcache_dir"
mkdir -p "$kcache_dir"
kcache_pid=""
stop_kcache() { [[ -z "$kcache_pid" ]] || { kill -INT "$kcache_pid" 2>/dev/null || true; wait "$kcache_pid" 2>/dev/null || true; }; }
trap stop_kcache EXIT
"$kcache_bin" serve --listen 127.0.0.1:0 --write-kubeconfig "$kcache_dir/kubeconfig" \
  >"$kcache_dir/serve.log" 2>&1 &
kcache_pid=$!
for _ in $(seq 1 300); do
  [[ -s "$kcache_dir/kubeconfig" ]] && break
  kill -0 "$kcache_pid" 2>/dev/null || { cat "$kcache_dir/serve.log" >&2; fail "kcache serve exited"; }
  sleep 0.1
done
[[ -s "$kcache_dir/kubeconfig" ]] || fail "kcache serve wrote no kubeconfig in 30s"

# One run per server: each test alone, bounded; a line "crate test result seconds" per test.
run_all() { # run_all NAME KUBECONFIG
  local name="$1" kubeconfig="$2" logs="$scratch/logs-$1" crate exe test rc t0
  rm -rf "$logs"
  mkdir -p "$logs"
  : >"$scratch/results-$name.tsv"
  while IFS=$'\t' read -r crate exe test; do
    t0=$SECONDS
    rc=0
    (cd "$ws/$crate" && KUBECONFIG="$kubeconfig" RUST_BACKTRACE=0 timeout -k 5 "$per_test_timeout" \
      "$exe" --ignored --exact "$test" --test-threads=1) >"$logs/$crate--$test.log" 2>&1 || rc=$?
    local result=fail
    if [[ $rc -eq 0 ]] && grep -q '^test result: ok. 1 passed' "$logs/$crate--$test.log"; then
      result=pass
    elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
      result=timeout
    fi
    printf '%s\t%s\t%s\t%s\n' "$crate" "$test" "$result" "$((SECONDS - t0))" >>"$scratch/results-$name.tsv"
  done <"$tests_file"
}
note "running against kube-apiserver ($KCACHE_UPSTREAM_KUBECONFIG)"
run_all upstream "$KCACHE_UPSTREAM_KUBECONFIG"
note "running against kcache serve ($kcache_dir/kubeconfig)"
run_all kcache "$kcache_dir/kubeconfig"

# The table, the reasons of upstream failures, and the verdict.
python3 - "$scratch" <<'PY'
import os, re, sys
scratch = sys.argv[1]
def load(name):
    rows = {}
    for line in open(os.path.join(scratch, f"results-{name}.tsv")):
        crate, test, result, secs = line.rstrip("\n").split("\t")
        rows[(crate, test)] = (result, secs)
    return rows
up, kc = load("upstream"), load("kcache")
def reason(name, crate, test):
    text = open(os.path.join(scratch, f"logs-{name}", f"{crate}--{test}.log"), errors="replace").read()
    for pat in (r"Error: (.*)", r"panicked at .*?:\n(.*)", r"(thread .* panicked.*)"):
        m = re.search(pat, text)
        if m:
            return m.group(1).strip()[:160]
    return text.strip().splitlines()[-1][:160] if text.strip() else "no output"
w = max(len(f"{c}::{t}") for c, t in up)
print(f"\n{'test':<{w}}  {'kube-apiserver':<14}  {'kcache serve':<12}")
regressions, env_fail = [], []
for key in sorted(up):
    u, k = up[key][0], kc[key][0]
    flag = "  <-- REGRESSION" if u == "pass" and k != "pass" else ""
    print(f"{key[0] + '::' + key[1]:<{w}}  {u:<14}  {k:<12}{flag}")
    if flag:
        regressions.append(key)
    if u != "pass":
        env_fail.append(key)
print()
for crate in sorted({c for c, _ in up}):
    keys = [k for k in up if k[0] == crate]
    print(f"{crate}: {len(keys)} tests, {sum(up[k][0] == 'pass' for k in keys)} pass on kube-apiserver, "
          f"{sum(kc[k][0] == 'pass' for k in keys)} pass on kcache serve")
if env_fail:
    print("\nfailing on kube-apiserver too (not counted):")
    for c, t in env_fail:
        print(f"  {c}::{t}: {up[(c, t)][0]}: {reason('upstream', c, t)}")
if regressions:
    print("\npass on kube-apiserver, fail on kcache serve (logs in " + scratch + "/logs-kcache):")
    for c, t in regressions:
        print(f"  {c}::{t}: {kc[(c, t)][0]}: {reason('kcache', c, t)}")
    sys.exit(1)
print("\nkube-rs-cluster-tests: every test passing on kube-apiserver passes on kcache serve")
PY
