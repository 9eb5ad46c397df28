#!/usr/bin/env bash
# Public-API snapshots of the library crates: lists each crate's public API with
# cargo-public-api and compares it with the checked-in api/<crate>.txt, so that a change to the
# surface users depend on is deliberate and shows up in review.
#
#   scripts/public-api.sh            # check: fail with a diff if a listing differs from its file
#   scripts/public-api.sh --update   # rewrite api/<crate>.txt from the current source
#
# What is listed:
# - Each crate with its default features only (kcache-client: with `protobuf`; kcache-proto:
#   without `serde`). kcache is listed without its `testing` feature: rustdoc always sees
#   `kcache::testing`, `leaderelection::FakeLock`/`LockOp` and `sharding::FakeLeases` (they are
#   `cfg(any(test, feature = "testing", doc))`), so the items gated on `feature = "testing"` are
#   removed from the rustdoc JSON before listing, with everything they contain or re-export and
#   the trait impls for them. The run fails if it finds none to remove (a nightly bump that
#   changed how rustdoc JSON records cfgs).
# - kcache-proto without its prost-generated code: the `generated` module, its re-exports `api`
#   and `apimachinery`, and every item defined under src/generated/ (the generated ToProto /
#   FromProto impls) are removed the same way; listed, they were 23,000 of the crate's 23,800
#   lines, every type twice. That code follows the upstream .proto files
#   (crates/kcache-proto/regen.sh); the hand-written surface is listed, and its signatures still
#   name the generated types.
# - Blanket impls (`impl<T> Any for T`, `From<T> for T`, ...) are omitted (`--omit
#   blanket-impls`): they follow from the standard library, not from this code. Auto-trait impls
#   (Send, Sync, Unpin, ...) are kept: losing one breaks users. `#[doc(hidden)]` items are not
#   listed (rustdoc leaves them out of its JSON).
#
# Tools: cargo-public-api (CPA_VERSION below), installed once with `cargo install --locked`
# under ${KCACHE_CACHE_DIR:-~/.cache/kcache}/ (a debug build: it compiles in half the time and
# lists a crate in under a second), and the nightly toolchain NIGHTLY below (rustdoc JSON is
# nightly-only), installed with rustup if missing. The nightly is pinned: cargo-public-api
# 0.50-0.52 reads rustdoc JSON format 57, which nightlies emit from 2025-08-02 until format 58
# (late June 2026); a newer nightly's JSON is refused below. Bump the two together.
# The nightly build has its own target directory under the cache directory (about 600 MB,
# $KCACHE_PUBLIC_API_TARGET_DIR overrides it), so a fresh clone, as in CI, does not rebuild the
# dependencies; runs that share it take turns (flock).
set -euo pipefail
cd "$(dirname "$0")/.."

CPA_VERSION=0.52.0
NIGHTLY=nightly-2026-06-01
RUSTDOC_JSON_FORMAT=57
crates=(kcache kcache-client kcache-proto kcache-apiserver kcache-metrics kcache-runtime kcache-testenv)

update=0
case "${1:-}" in
  "") ;;
  --update) update=1 ;;
  -h | --help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "public-api.sh: unknown argument '$1' (use --update or nothing)" >&2; exit 2 ;;
esac
command -v python3 >/dev/null || { echo "public-api.sh: python3 is not installed" >&2; exit 1; }

cache="${KCACHE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kcache}"
cpa_root="$cache/cargo-public-api-$CPA_VERSION"
cpa="$cpa_root/bin/cargo-public-api"
if [[ ! -x "$cpa" ]]; then
  echo "public-api.sh: installing cargo-public-api $CPA_VERSION into $cpa_root (once)" >&2
  CARGO_PROFILE_DEV_DEBUG=0 cargo install --locked --debug --quiet \
    "cargo-public-api@$CPA_VERSION" --root "$cpa_root"
fi
if ! rustup toolchain list | grep -q "^$NIGHTLY-"; then
  echo "public-api.sh: installing the $NIGHTLY toolchain (once)" >&2
  rustup toolchain install "$NIGHTLY" --profile minimal
fi

target="${KCACHE_PUBLIC_API_TARGET_DIR:-$cache/public-api-target}"
mkdir -p "$target" api
exec 9>"$target/.public-api.lock"
if ! flock -n 9; then
  echo "public-api.sh: waiting for another run that uses $target" >&2
  flock 9
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/kcache-public-api.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Removes from rustdoc JSON the items gated on the `testing` feature and, in kcache-proto, the
# generated code (see the header), then writes the JSON cargo-public-api lists.
filter_rustdoc_json() {
  python3 - "$@" <<'PY'
import json, sys

src, dst, crate, want_format = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
d = json.load(open(src))
if d.get("format_version") != want_format:
    sys.exit(f"public-api.sh: {src} has rustdoc JSON format {d.get('format_version')}, "
             f"cargo-public-api reads {want_format}: is the pinned nightly in use?")
idx = d["index"]

def gated_on_testing(it):
    # rustdoc keeps the cfg an item was compiled under as a `CfgTrace` attribute.
    for a in it.get("attrs") or []:
        s = a.get("other", "") if isinstance(a, dict) else str(a)
        if "CfgTrace" in s and 'Some("testing")' in s and "Not(" not in s:
            return True
    return False

def generated(it):
    if crate != "kcache-proto":
        return False
    if "/src/generated/" in (it.get("span") or {}).get("filename", ""):
        return True
    inner = it.get("inner", {})
    if it.get("name") == "generated" and "module" in inner:
        return True
    use = inner.get("use")
    return bool(use and (use["source"] == "generated" or use["source"].startswith("generated::")))

testing = {k for k, it in idx.items() if gated_on_testing(it)}
if crate == "kcache" and not testing:
    sys.exit("public-api.sh: no item of kcache is gated on feature \"testing\" in its rustdoc "
             "JSON: the filter no longer recognises the cfg attributes; fix it in this script")
drop = testing | {k for k, it in idx.items() if generated(it)}

# ... with what they contain or re-export, and the impls for the dropped types (`impl LeaseLock
# for FakeLock`), which are reached through the traits.
def impl_target(it):
    imp = it.get("inner", {}).get("impl")
    path = imp and isinstance(imp.get("for"), dict) and imp["for"].get("resolved_path")
    return str(path["id"]) if path else None

def contents(it):
    inner = it.get("inner", {})
    if "module" in inner:
        return {str(i) for i in inner["module"]["items"]}
    if "use" in inner and inner["use"].get("id") is not None:
        return {str(inner["use"]["id"])}
    return set()

while True:
    more = set().union(*(contents(idx[k]) for k in drop if k in idx))
    more |= {k for k, it in idx.items() if impl_target(it) in drop}
    more -= drop
    if not more:
        break
    drop |= more

for k in drop:
    idx.pop(k, None)
for it in idx.values():
    inner = it.get("inner", {})
    for kind, field in (("module", "items"), ("trait", "implementations"), ("struct", "impls"),
                        ("enum", "impls"), ("union", "impls")):
        if field in inner.get(kind, {}):
            inner[kind][field] = [i for i in inner[kind][field] if str(i) not in drop]
with open(dst, "w") as f:
    json.dump(d, f)
PY
}

# rustdoc JSON of every library crate, in one build so that the dependencies are compiled once
# (a build per crate compiles the shared ones again with each crate's feature set). Cargo unifies
# the features of the crates built together; none of them turns on a non-default feature of
# another, so each is documented with its default features. Cargo re-documents them on every
# run: the JSON output leaves no index.html for its freshness check.
packages=()
for crate in "${crates[@]}"; do packages+=(-p "$crate"); done
# The libraries alone enable no k8s-openapi version: name it.
RUSTDOCFLAGS="-Z unstable-options --output-format json" \
  K8S_OPENAPI_ENABLED_VERSION=1.36 cargo +"$NIGHTLY" doc --no-deps --lib --locked --target-dir "$target" "${packages[@]}"

failed=()
for crate in "${crates[@]}"; do
  filter_rustdoc_json "$target/doc/${crate//-/_}.json" "$work/$crate.json" "$crate" \
    "$RUSTDOC_JSON_FORMAT"
  "$cpa" --rustdoc-json "$work/$crate.json" --omit blanket-impls --color never >"$work/$crate.txt"

  snapshot="api/$crate.txt"
  if ((update)); then
    if cmp -s "$work/$crate.txt" "$snapshot"; then
      echo "public-api.sh: $snapshot unchanged"
    else
      cp "$work/$crate.txt" "$snapshot"
      echo "public-api.sh: $snapshot written ($(wc -l <"$snapshot") lines)"
    fi
  elif [[ ! -f "$snapshot" ]]; then
    echo "public-api.sh: $snapshot is missing" >&2
    failed+=("$crate")
  elif ! diff -u --label "$snapshot (checked in)" --label "$crate (current source)" \
    "$snapshot" "$work/$crate.txt" >"$work/$crate.diff"; then
    echo "public-api.sh: the public API of $crate differs from $snapshot:" >&2
    cat "$work/$crate.diff" >&2
    failed+=("$crate")
  else
    echo "public-api.sh: $crate matches $snapshot ($(wc -l <"$snapshot") lines)"
  fi
done

if ((${#failed[@]})); then
  printf '\npublic-api.sh: the public API changed in: %s\n' "${failed[*]}" >&2
  echo "public-api.sh: run scripts/public-api.sh --update if the change is deliberate," \
    "and commit api/ with it" >&2
  exit 1
fi
