#!/usr/bin/env bash
# Stops what scripts/kube-up.sh started, by the PIDs recorded in the state dir.
#
# Usage: KCACHE_UPSTREAM_STATE=DIR scripts/kube-down.sh [all|apiserver|etcd] [--purge]
#   all (default)  stop kube-apiserver, then etcd
#   apiserver      stop only kube-apiserver (etcd keeps its data; restart with kube-up.sh apiserver)
#   etcd           stop only etcd (restart with kube-up.sh etcd)
#   --purge        with `all`: also delete the state dir
# A process is signalled only if its command line still names the state dir (so a recycled PID
# is never hit): SIGTERM, then SIGKILL after 15 s. Exits non-zero if a process would not stop.
set -euo pipefail

what="${1:-all}"
purge="${2:-}"
state="${KCACHE_UPSTREAM_STATE:?set KCACHE_UPSTREAM_STATE to the state dir of kube-up.sh}"
[[ -d "$state" ]] || { echo "kube-down: no state dir $state (nothing to stop)" >&2; exit 0; }
state="$(cd "$state" && pwd)"

stop() { # stop NAME
  local name="$1" pidfile="$state/$1.pid" pid i
  [[ -f "$pidfile" ]] || return 0
  pid="$(cat "$pidfile")"
  if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$state"; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 150); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "kube-down: $name (pid $pid) ignored SIGTERM for 15s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
      if kill -0 "$pid" 2>/dev/null; then
        echo "kube-down: FAILED to stop $name (pid $pid)" >&2
        return 1
      fi
    fi
    echo "kube-down: stopped $name (pid $pid)" >&2
  fi
  rm -f "$pidfile"
}

case "$what" in
  all) stop apiserver; stop etcd ;;
  apiserver) stop apiserver ;;
  etcd) stop etcd ;;
  *) echo "kube-down: unknown argument '$what' (expected all, apiserver or etcd)" >&2; exit 2 ;;
esac

if [[ "$what" == all && "$purge" == --purge ]]; then
  rm -rf "$state"
fi
