#!/usr/bin/env bash
# Starts the upstream etcd + kube-apiserver (built by scripts/build-harness.sh) on 127.0.0.1 only,
# for tests. Everything lives in one state directory:
#   pki/          own CA, apiserver serving cert (127.0.0.1, localhost), service-account key,
#                 a client certificate for user `erin` in group `kcache:cert-users` (erin.crt/key)
#   tokens.csv    static tokens: `admin` (group system:masters) and `alice` (no RBAC bindings)
#   admin.token, alice.token          the bearer tokens (mode 0600; never printed)
#   admin.kubeconfig, alice.kubeconfig  TLS verification on (CA embedded), token via tokenFile
#   env           KEY=VALUE lines describing the running servers (see the end of this file)
#   etcd.log, apiserver.log, *.pid, ports
#
# Usage:
#   scripts/kube-up.sh [--kube-version VERSION] [all|etcd|apiserver]
#   scripts/kube-up.sh [all]     create a fresh state dir (or use $KCACHE_UPSTREAM_STATE if it is
#                                set and empty/new), start etcd, then kube-apiserver; print the
#                                env file's path on stdout
#   scripts/kube-up.sh etcd      (re)start only etcd in $KCACHE_UPSTREAM_STATE (same port, same data)
#   scripts/kube-up.sh apiserver (re)start only kube-apiserver in $KCACHE_UPSTREAM_STATE
# Stop with scripts/kube-down.sh [all|etcd|apiserver].
#
# Environment:
#   KCACHE_KUBE_VERSION          the kube-apiserver release to start (default: the pinned v1.36.5;
#                                v1.34.4, v1.35.4, v1.37.2 are known to build); --kube-version sets
#                                it too. Built and cached per version by scripts/build-harness.sh.
#   KCACHE_UPSTREAM_STATE        state dir (required for `etcd` / `apiserver`)
#   KCACHE_KUBE_READY_TIMEOUT    seconds to wait for each server to be ready (default 180)
#   KCACHE_ETCD_COMPACTION_INTERVAL  apiserver's --etcd-compaction-interval (default 10s, short so
#                                that tests can provoke 410 Expired)
#   KCACHE_APISERVER_EXTRA_ARGS  extra kube-apiserver flags, space-separated (e.g. --watch-cache=false)
#   KCACHE_FEATURE_GATES         extra feature gates, comma-separated, added to WatchList=true
#                                (e.g. ShardedListAndWatch=true for KEP-5866 shard selectors)
# On failure: names the failed step, prints the relevant log tail, stops what it started, exits 1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
umask 077

if [[ "${1:-}" == --kube-version ]]; then
  [[ -n "${2:-}" ]] || { echo 'kube-up: --kube-version needs a version (e.g. v1.37.2)' >&2; exit 1; }
  export KCACHE_KUBE_VERSION="$2"
  shift 2
elif [[ "${1:-}" == --kube-version=* ]]; then
  export KCACHE_KUBE_VERSION="${1#*=}"
  shift
fi
what="${1:-all}"
timeout="${KCACHE_KUBE_READY_TIMEOUT:-180}"

fail() { # fail STEP [LOGFILE]
  printf 'kube-up: FAILED at step: %s\n' "$1" >&2
  if [[ -n "${2:-}" && -f "$2" ]]; then
    printf -- '--- last lines of %s ---\n' "$2" >&2
    tail -n 40 "$2" >&2
    printf -- '--- end of %s ---\n' "$2" >&2
  fi
  if [[ "$what" == all && -n "${state:-}" && -d "${state:-}" ]]; then
    KCACHE_UPSTREAM_STATE="$state" "$root/scripts/kube-down.sh" all >&2 || true
  fi
  exit 1
}
note() { printf 'kube-up: %s\n' "$*" >&2; }

need() { # need COMMAND DEBIAN-PACKAGE
  command -v "$1" >/dev/null && return
  note "$1 missing: installing Debian package $2"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"; } >&2 \
    || fail "install $2 (needed for $1)"
}
need openssl openssl
need curl curl
need flock util-linux

port_free() { # nothing listening on 127.0.0.1:$1
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
pick_port() { # a free port below the usual ephemeral range (32768+)
  local p i
  for i in $(seq 1 200); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
    if port_free "$p" && ! grep -qx "$p" "$state/ports.taken" 2>/dev/null; then
      echo "$p" >>"$state/ports.taken"
      echo "$p"
      return
    fi
  done
  fail "pick a free port on 127.0.0.1"
}

wait_until() { # wait_until STEP LOGFILE PID COMMAND...
  local step="$1" log="$2" pid="$3" deadline=$((SECONDS + timeout))
  shift 3
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || fail "$step (the process exited)" "$log"
    ((SECONDS < deadline)) || fail "$step (not ready after ${timeout}s)" "$log"
    sleep 0.3
  done
}

# ---------------------------------------------------------------- state and binaries
if [[ "$what" == all ]]; then
  if [[ -n "${KCACHE_UPSTREAM_STATE:-}" ]]; then
    state="$KCACHE_UPSTREAM_STATE"
    if [[ -e "$state/etcd.pid" || -e "$state/apiserver.pid" ]]; then
      fail "state dir $state is in use (run scripts/kube-down.sh first)"
    fi
    mkdir -p "$state"
  else
    state="$(mktemp -d "${TMPDIR:-/tmp}/kcache-kube.XXXXXX")"
  fi
else
  state="${KCACHE_UPSTREAM_STATE:?set KCACHE_UPSTREAM_STATE to the state dir of a kube-up.sh all run}"
  [[ -f "$state/ports" ]] || fail "$state is not a kube-up.sh state dir (no ports file)"
fi
state="$(cd "$state" && pwd)"
[[ "$state" != *[[:space:]]* ]] || fail "state dir path must not contain spaces: $state"

# A restart (`etcd` / `apiserver`) keeps the version the state dir was started with.
if [[ "$what" != all && -z "${KCACHE_KUBE_VERSION:-}" && -f "$state/env" ]]; then
  KCACHE_KUBE_VERSION="$(sed -n 's/^KCACHE_UPSTREAM_VERSION=//p' "$state/env")"
  export KCACHE_KUBE_VERSION
fi
bins="$("$root/scripts/build-harness.sh" etcd kube-apiserver)" || fail "build the harness (scripts/build-harness.sh)"
etcd_bin="$(sed -n 1p <<<"$bins")"
apiserver_bin="$(sed -n 2p <<<"$bins")"

# ---------------------------------------------------------------- certificates, tokens, ports
if [[ "$what" == all ]]; then
  pki="$state/pki"
  mkdir -p "$pki"
  {
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
      -keyout "$pki/ca.key" -out "$pki/ca.crt" -subj "/CN=kcache-test-ca" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" &&
    openssl req -newkey rsa:2048 -nodes -sha256 \
      -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" -subj "/CN=kube-apiserver" &&
    printf '%s\n' \
      "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1" \
      "basicConstraints=critical,CA:FALSE" \
      "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" \
      "subjectKeyIdentifier=hash" \
      "authorityKeyIdentifier=keyid" >"$pki/apiserver.ext" &&
    openssl x509 -req -sha256 -days 825 -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
      -CAcreateserial -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" &&
    openssl req -newkey rsa:2048 -nodes -sha256 \
      -keyout "$pki/erin.key" -out "$pki/erin.csr" -subj "/O=kcache:cert-users/CN=erin" &&
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=clientAuth" >"$pki/client.ext" &&
    openssl x509 -req -sha256 -days 825 -in "$pki/erin.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
      -CAcreateserial -extfile "$pki/client.ext" -out "$pki/erin.crt" &&
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key"
  } >"$state/pki.log" 2>&1 || fail "generate certificates with openssl" "$state/pki.log"

  admin_token="$(openssl rand -hex 32)"
  alice_token="$(openssl rand -hex 32)"
  printf '%s' "$admin_token" >"$state/admin.token"
  printf '%s' "$alice_token" >"$state/alice.token"
  printf '%s,admin,admin-uid,"system:masters"\n%s,alice,alice-uid\n' "$admin_token" "$alice_token" >"$state/tokens.csv"
  chmod 600 "$state/admin.token" "$state/alice.token" "$state/tokens.csv"
  unset admin_token alice_token

  etcd_port="$(pick_port)"
  etcd_peer_port="$(pick_port)"
  api_port="$(pick_port)"
  printf 'etcd_port=%s\netcd_peer_port=%s\napi_port=%s\n' "$etcd_port" "$etcd_peer_port" "$api_port" >"$state/ports"
fi
# shellcheck source=/dev/null
. "$state/ports"
pki="$state/pki"
etcd_url="http://127.0.0.1:$etcd_port"
api_url="https://127.0.0.1:$api_port"

# ---------------------------------------------------------------- etcd
start_etcd() {
  [[ ! -f "$state/etcd.pid" ]] || fail "start etcd: already running (pid file $state/etcd.pid)"
  port_free "$etcd_port" || fail "start etcd: 127.0.0.1:$etcd_port is taken by another process"
  note "starting etcd on $etcd_url"
  setsid "$etcd_bin" \
    --name=kcache \
    --data-dir="$state/etcd-data" \
    --listen-client-urls="$etcd_url" \
    --advertise-client-urls="$etcd_url" \
    --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster="kcache=http://127.0.0.1:$etcd_peer_port" \
    --unsafe-no-fsync=true \
    --log-level=warn \
    >>"$state/etcd.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$state/etcd.pid"
  wait_until "wait for etcd health on $etcd_url/health" "$state/etcd.log" "$pid" \
    bash -c "curl -fsS --max-time 2 '$etcd_url/health' | grep -q '\"health\":\"true\"'"
  note "etcd ready (pid $pid)"
}

# ---------------------------------------------------------------- kube-apiserver
start_apiserver() {
  [[ ! -f "$state/apiserver.pid" ]] || fail "start kube-apiserver: already running (pid file $state/apiserver.pid)"
  port_free "$api_port" || fail "start kube-apiserver: 127.0.0.1:$api_port is taken by another process"
  local -a extra=()
  # shellcheck disable=SC2206
  [[ -z "${KCACHE_APISERVER_EXTRA_ARGS:-}" ]] || extra=(${KCACHE_APISERVER_EXTRA_ARGS})
  note "starting kube-apiserver on $api_url ${extra[*]:-}"
  setsid "$apiserver_bin" \
    --etcd-servers="$etcd_url" \
    --etcd-compaction-interval="${KCACHE_ETCD_COMPACTION_INTERVAL:-10s}" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="$api_port" \
    --cert-dir="$state/pki/apiserver-cert-dir" \
    --tls-cert-file="$pki/apiserver.crt" \
    --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --token-auth-file="$state/tokens.csv" \
    --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.key" \
    --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --feature-gates="WatchList=true${KCACHE_FEATURE_GATES:+,$KCACHE_FEATURE_GATES}" \
    --disable-admission-plugins=ServiceAccount \
    --endpoint-reconciler-type=none \
    --allow-privileged=true \
    "${extra[@]}" \
    >>"$state/apiserver.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$state/apiserver.pid"
  # /readyz is readable without credentials once RBAC's bootstrap roles exist; it also waits for etcd.
  wait_until "wait for kube-apiserver $api_url/readyz" "$state/apiserver.log" "$pid" \
    bash -c "curl -fsS --max-time 5 --cacert '$pki/ca.crt' '$api_url/readyz' | grep -qx ok"
  # The system namespaces are created by a post-start hook that /readyz does not wait for.
  printf 'Authorization: Bearer %s\n' "$(cat "$state/admin.token")" >"$state/admin.header"
  wait_until "wait for namespace default" "$state/apiserver.log" "$pid" \
    curl -fsS --max-time 5 --cacert "$pki/ca.crt" -H "@$state/admin.header" "$api_url/api/v1/namespaces/default"
  note "kube-apiserver ready (pid $pid)"
}

write_kubeconfig() { # write_kubeconfig USER
  local user="$1" ca
  ca="$(base64 -w0 <"$pki/ca.crt")"
  cat >"$state/$user.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kcache-upstream
  cluster:
    server: $api_url
    certificate-authority-data: $ca
users:
- name: $user
  user:
    tokenFile: $state/$user.token
contexts:
- name: $user@kcache-upstream
  context:
    cluster: kcache-upstream
    user: $user
    namespace: default
current-context: $user@kcache-upstream
EOF
  chmod 600 "$state/$user.kubeconfig"
}

write_env() {
  cat >"$state/env.tmp" <<EOF
KCACHE_UPSTREAM_STATE=$state
KCACHE_UPSTREAM_VERSION=$("$apiserver_bin" --version | awk '{print $2}')
KCACHE_UPSTREAM_URL=$api_url
KCACHE_UPSTREAM_FEATURE_GATES=WatchList=true${KCACHE_FEATURE_GATES:+,$KCACHE_FEATURE_GATES}
KCACHE_UPSTREAM_CA=$pki/ca.crt
KCACHE_UPSTREAM_CLIENT_CERT=$pki/erin.crt
KCACHE_UPSTREAM_CLIENT_KEY=$pki/erin.key
KCACHE_UPSTREAM_KUBECONFIG=$state/admin.kubeconfig
KCACHE_UPSTREAM_ALICE_KUBECONFIG=$state/alice.kubeconfig
KCACHE_UPSTREAM_ADMIN_TOKEN_FILE=$state/admin.token
KCACHE_UPSTREAM_ALICE_TOKEN_FILE=$state/alice.token
KCACHE_UPSTREAM_ETCD_URL=$etcd_url
KCACHE_UPSTREAM_ETCD_PID=$(cat "$state/etcd.pid" 2>/dev/null || true)
KCACHE_UPSTREAM_APISERVER_PID=$(cat "$state/apiserver.pid" 2>/dev/null || true)
KCACHE_UPSTREAM_APISERVER_LOG=$state/apiserver.log
KCACHE_UPSTREAM_ETCD_LOG=$state/etcd.log
KCACHE_UPSTREAM_UP=$root/scripts/kube-up.sh
KCACHE_UPSTREAM_DOWN=$root/scripts/kube-down.sh
EOF
  mv -f "$state/env.tmp" "$state/env"
}

case "$what" in
  all)
    start_etcd
    start_apiserver
    write_kubeconfig admin
    write_kubeconfig alice
    ;;
  etcd) start_etcd ;;
  apiserver) start_apiserver ;;
  *) fail "unknown argument '$what' (expected all, etcd or apiserver)" ;;
esac
write_env
echo "$state/env"
