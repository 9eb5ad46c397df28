#!/usr/bin/env bash
# Builds (or reuses) the Go programs of harness/: the upstream kube-apiserver and etcd, and the
# client-go peer. Each binary is cached under ${KCACHE_CACHE_DIR:-~/.cache/kcache}/, keyed by
# its pinned version and a hash of its module (go.mod, go.sum, sources), the Go version and the
# build flags, so it is rebuilt only when one of those changes.
#
# Usage: scripts/build-harness.sh [--kube-version VERSION] [kube-apiserver|etcd|client-go-peer|controller-runtime-peer]...
#        (default: kube-apiserver, etcd and client-go-peer)
# Prints the absolute path of each requested binary on stdout, one per line, in order.
# Progress and errors go to stderr; a failed build prints its log tail and exits non-zero.
#
# kube-apiserver is built at the version harness/kube-apiserver/go.mod pins (v1.36.5) unless
# --kube-version or $KCACHE_KUBE_VERSION names another release (v1.34.4, v1.35.4, v1.36.5 and
# v1.37.2 are known to build; any vMAJOR.MINOR.PATCH the Go module proxy serves may). For
# another version the module is generated under the cache (harness/kube-apiserver's main.go,
# its go.mod with k8s.io/kubernetes at VERSION and the staging modules at v0.MINOR.PATCH, then
# `go mod tidy`), once per version; the binary is cached per version like the pinned one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# Go needs a home for its caches; CI's environment may lack HOME.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cache="${KCACHE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kcache}"

die() { printf 'build-harness: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not installed (the harness needs Go >= 1.26 on PATH)"

export GOTOOLCHAIN=local   # never download another toolchain
export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0       # static binaries, as upstream ships them; no C toolchain needed

# module whose version names the cache directory, per component
pinned_module() {
  case "$1" in
    kube-apiserver) echo k8s.io/kubernetes ;;
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    client-go-peer) echo k8s.io/client-go ;;
    controller-runtime-peer) echo sigs.k8s.io/controller-runtime ;;
    *) die "unknown component '$1' (expected kube-apiserver, etcd, client-go-peer or controller-runtime-peer)" ;;
  esac
}

# The pinned kube-apiserver version (what harness/kube-apiserver/go.mod requires).
pinned_kube_version() {
  awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$root/harness/kube-apiserver/go.mod"
}

# A module directory building kube-apiserver at $1: harness/kube-apiserver itself for the pinned
# version, else one generated (once) under the cache.
kube_apiserver_dir() {
  local want="$1" pinned gen staging
  pinned="$(pinned_kube_version)"
  [[ -n "$pinned" ]] || die "cannot read the pinned k8s.io/kubernetes version from harness/kube-apiserver/go.mod"
  if [[ -z "$want" || "$want" == "$pinned" ]]; then
    echo "$root/harness/kube-apiserver"
    return
  fi
  [[ "$want" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] \
    || die "kube version '$want' is not of the form v1.MINOR.PATCH (e.g. v1.37.2)"
  staging="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
  gen="$cache/harness-kube-apiserver-$want"
  if [[ ! -f "$gen/go.sum" || "$gen/main.go" -ot "$root/harness/kube-apiserver/main.go" ]]; then
    printf 'build-harness: generating the kube-apiserver module for %s in %s\n' "$want" "$gen" >&2
    rm -rf "$gen.tmp.$$"
    mkdir -p "$gen.tmp.$$"
    cp "$root/harness/kube-apiserver/main.go" "$gen.tmp.$$/"
    # k8s.io/kubernetes requires its staging modules as v0.0.0 and replaces them with
    # ./staging/src paths; a module that depends on it replaces each with the published
    # v0.MINOR.PATCH. The list differs by release, so it is read from that release's go.mod.
    local upstream_mod staging_mods
    upstream_mod="$(cd "$gen.tmp.$$" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$want" \
      | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -f "$upstream_mod" ]] || die "cannot download k8s.io/kubernetes@$want (go mod download)"
    staging_mods="$(awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { print $1 }' "$upstream_mod")"
    [[ -n "$staging_mods" ]] || die "no staging modules in k8s.io/kubernetes@$want's go.mod"
    {
      echo "module kcache.local/harness/kube-apiserver"
      echo
      grep -E '^(go|godebug) ' "$root/harness/kube-apiserver/go.mod"
      echo
      echo "require ("
      echo "	k8s.io/component-base $staging"
      echo "	k8s.io/kubernetes $want"
      echo ")"
      echo
      echo "replace ("
      local m
      for m in $staging_mods; do echo "	$m => $m $staging"; done
      echo ")"
    } >"$gen.tmp.$$/go.mod"
    local attempt
    for attempt in 1 2 3; do
      (cd "$gen.tmp.$$" && GOFLAGS="-mod=mod -buildvcs=false" go mod tidy) >"$gen.tmp.$$/tidy.log" 2>&1 && break
      if [[ $attempt == 3 ]]; then
        printf 'build-harness: FAILED: go mod tidy for kube-apiserver %s; last lines:\n' "$want" >&2
        tail -n 40 "$gen.tmp.$$/tidy.log" >&2
        exit 1
      fi
      sleep $((attempt * 5))
    done
    grep -q "k8s.io/kubernetes $want" "$gen.tmp.$$/go.mod" \
      || die "the generated go.mod does not require k8s.io/kubernetes $want (see $gen.tmp.$$)"
    rm -rf "$gen"
    mv "$gen.tmp.$$" "$gen"
  fi
  echo "$gen"
}

build_one() {
  local name="$1" dir="$root/harness/$1" mod version ldflags key out log tmp start
  if [[ "$name" == kube-apiserver ]]; then
    dir="$(kube_apiserver_dir "$kube_version")"
  fi
  [[ -f "$dir/go.mod" ]] || die "missing $dir/go.mod"
  mod="$(pinned_module "$name")"
  # `replace` wins over `require`: take the version the module is actually built at.
  version="$(cd "$dir" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$mod")" \
    || die "cannot resolve the version of $mod in $dir (go list failed)"
  ldflags="-s -w"
  if [[ "$name" == kube-apiserver ]]; then
    # What upstream's build stamps, so /version reports the real release.
    local minor="${version#v1.}"; minor="${minor%%.*}"
    ldflags+=" -X k8s.io/component-base/version.gitVersion=$version"
    ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
    ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
    ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  fi
  key="$( { go version; go env GOOS GOARCH; echo "$ldflags"; \
            cd "$dir" && cat go.mod go.sum $(ls ./*.go | grep -v '_test\.go$'); } | sha256sum | cut -c1-12)"
  out="$cache/$name-$version-$key/$name"
  if [[ -x "$out" ]]; then
    echo "$out"
    return
  fi
  mkdir -p "$(dirname "$out")"
  log="$(dirname "$out")/build.log"
  # One builder at a time per binary (several checkouts may run the test command at once).
  exec {lock}>"$(dirname "$out")/.lock"
  flock "$lock"
  if [[ ! -x "$out" ]]; then
    printf 'build-harness: building %s %s (cached at %s; first build of kube-apiserver takes ~10+ min on 2 cores)\n' \
      "$name" "$version" "$(dirname "$out")" >&2
    start=$SECONDS
    tmp="$out.tmp.$$"
    # Fetch the modules first, retrying: a network hiccup should not cost a 10-minute build.
    local attempt
    for attempt in 1 2 3; do
      (cd "$dir" && go mod download) >"$log" 2>&1 && break
      if [[ $attempt == 3 ]]; then
        printf 'build-harness: FAILED: go mod download for harness/%s (3 attempts); last lines of %s:\n' "$name" "$log" >&2
        tail -n 40 "$log" >&2
        exit 1
      fi
      printf 'build-harness: go mod download failed (attempt %s of 3), retrying\n' "$attempt" >&2
      sleep $((attempt * 5))
    done
    if ! (cd "$dir" && nice -n 10 go build -trimpath -ldflags="$ldflags" -o "$tmp" .) >>"$log" 2>&1; then
      rm -f "$tmp"
      printf 'build-harness: FAILED: go build of harness/%s (%s); last lines of %s:\n' "$name" "$version" "$log" >&2
      tail -n 40 "$log" >&2
      exit 1
    fi
    mv -f "$tmp" "$out"
    printf 'build-harness: built %s in %ss\n' "$name" "$((SECONDS - start))" >&2
  fi
  exec {lock}>&-
  echo "$out"
}

kube_version="${KCACHE_KUBE_VERSION:-}"
components=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kube-version) [[ $# -ge 2 ]] || die "--kube-version needs a version (e.g. v1.37.2)"
                    kube_version="$2"; shift 2 ;;
    --kube-version=*) kube_version="${1#*=}"; shift ;;
    *) components+=("$1"); shift ;;
  esac
done
[[ ${#components[@]} -gt 0 ]] || components=(kube-apiserver etcd client-go-peer)
for c in "${components[@]}"; do
  build_one "$c"
done
