#!/usr/bin/env bash
# Stops what scripts/kube-up.sh started, by the PIDs recorded in the state dir.
#
# Usage: KCACHE_UPSTREAM_STATE=DIR scripts/kube-down.sh [all|apiserver|etcd] [--purge]
#   all (default)  stop kube-apiserver, then etcd
#   apiserver      stop only kube-apiserver (etcd keeps its data; restart with kube-up.sh apiserver)
#   etcd           stop only etcd (restart with kube-up.sh etcd)
#   --purge        with `all`: also delete the state dir
# A process is signalled only if its command line still names the state dir (so a recycled PID
# is never hit): SIGTERM, then SIGKILL after a grace period of ${KCACHE_KUBE_STOP_GRACE:-5}
# seconds (kube-apiserver closes its port at once but then lingers ~20 s in a controller's
# shutdown; etcd holds open client streams up to ~10 s; killing either loses nothing: etcd's
# writes are in the page cache). Exits non-zero if a process would not stop.
set -euo pipefail

what="${1:-all}"
purge="${2:-}"
state="${KCACHE_UPSTREAM_STATE:?set KCACHE_UPSTREAM_STATE to the state dir of kube-up.sh}"
[[ -d "$state" ]] || { echo "kube-down: no state dir $state (nothing to stop)" >&2; exit 0; }
state="$(cd "$state" && pwd)"

# alive PID: the process exists and is not a zombie (an orphan that exited may wait a while for
# init to reap it; it no longer holds its ports or files).
alive() {
  local st
  st="$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)" || return 1
  [[ -n "$st" && "$st" != Z && "$st" != X ]]
}

stop() { # stop NAME
  local name="$1" pidfile="$state/$1.pid" pid i
  [[ -f "$pidfile" ]] || return 0
  pid="$(cat "$pidfile")"
  if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$state"; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 $((${KCACHE_KUBE_STOP_GRACE:-5} * 10))); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then
      echo "kube-down: $name (pid $pid) still running ${KCACHE_KUBE_STOP_GRACE:-5}s after SIGTERM; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do
        alive "$pid" || break
        sleep 0.1
      done
      if alive "$pid"; then
        echo "kube-down: FAILED to stop $name (pid $pid)" >&2
        return 1
      fi
    fi
    echo "kube-down: stopped $name (pid $pid)" >&2
  fi
  rm -f "$pidfile"
}

rc=0
case "$what" in
  all) stop apiserver || rc=1; stop etcd || rc=1 ;;
  apiserver) stop apiserver || rc=1 ;;
  etcd) stop etcd || rc=1 ;;
  *) echo "kube-down: unknown argument '$what' (expected all, apiserver or etcd)" >&2; exit 2 ;;
esac
[[ $rc -eq 0 ]] || exit $rc

if [[ "$what" == all && "$purge" == --purge ]]; then
  rm -rf "$state"
fi
