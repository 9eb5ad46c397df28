#!/usr/bin/env bash
# Builds (or reuses) the Go programs of harness/: the upstream kube-apiserver and etcd, and the
# client-go peer. Each binary is cached under ${KCACHE_CACHE_DIR:-~/.cache/kcache}/, keyed by
# its pinned version and a hash of its module (go.mod, go.sum, sources), the Go version and the
# build flags, so it is rebuilt only when one of those changes.
#
# Usage: scripts/build-harness.sh [kube-apiserver|etcd|client-go-peer]...   (default: all)
# Prints the absolute path of each requested binary on stdout, one per line, in order.
# Progress and errors go to stderr; a failed build prints its log tail and exits non-zero.
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
    *) die "unknown component '$1' (expected kube-apiserver, etcd or client-go-peer)" ;;
  esac
}

build_one() {
  local name="$1" dir="$root/harness/$1" mod version ldflags key out log tmp start
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

components=("$@")
[[ ${#components[@]} -gt 0 ]] || components=(kube-apiserver etcd client-go-peer)
for c in "${components[@]}"; do
  build_one "$c"
done
