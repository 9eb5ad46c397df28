#!/usr/bin/env python3
"""Sharded controller benchmark: per-replica RSS and sync CPU with 1-4 replicas, and the time
to rebalance after a join and after a SIGKILL, on the upstream kube-apiserver with the
ShardedListAndWatch feature gate on and off.

    cargo build --release -p kcache-examples --example sharded_controller
    python3 bench/sharding.py [--objects 30000] [--gates on,off]

For each gate setting it starts its own kube-apiserver + etcd (scripts/kube-up.sh with
KCACHE_FEATURE_GATES), creates the ConfigMaps, then for 1, 2, 3, 4 replicas starts that many
`sharded_controller` processes (12 shards, `--list-watch` so list answers are observable) and
waits until the shards are spread and every replica's cache holds its shards' objects; it
reads each process's RSS (VmRSS) and CPU time (utime + stime) then. With 4 replicas it also
measures the rebalance after a 4th joins a group of 3 and the takeover after a SIGKILL.
Results go to stdout as a table; nothing is asserted (the test suite does that).
"""
import argparse
import json
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "examples", "sharded_controller")
SHARDS = 12
TICKS = os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, gates):
        self.state = tempfile.mkdtemp(prefix="kcache-shard-bench-")
        env = dict(os.environ, KCACHE_UPSTREAM_STATE=self.state, KCACHE_FEATURE_GATES=gates)
        subprocess.run([os.path.join(ROOT, "scripts", "kube-up.sh")], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        vals = dict(l.split("=", 1) for l in open(os.path.join(self.state, "env")).read().split("\n") if "=" in l)
        self.url = vals["KCACHE_UPSTREAM_URL"]
        self.kubeconfig = vals["KCACHE_UPSTREAM_KUBECONFIG"]
        self.token = open(vals["KCACHE_UPSTREAM_ADMIN_TOKEN_FILE"]).read().strip()
        self.ctx = ssl.create_default_context(cafile=vals["KCACHE_UPSTREAM_CA"])

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self.ctx) as r:
            return json.loads(r.read() or b"null")

    def stop(self):
        env = dict(os.environ, KCACHE_UPSTREAM_STATE=self.state)
        subprocess.run([os.path.join(ROOT, "scripts", "kube-down.sh"), "all"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Replica:
    def __init__(self, server, ns, ident):
        self.ident = ident
        self.shards = set()
        self.objects = 0
        self.synced = False
        self.proc = subprocess.Popen(
            [BIN, "--kubeconfig", server.kubeconfig, "--namespace", ns, "--identity", ident,
             "--shards", str(SHARDS), "--lease-duration", "4", "--renew-deadline", "2",
             "--retry-period", "0.4", "--list-watch", "--lease-name", "bench"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=dict(os.environ, RUST_LOG="warn"))
        self.started = time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            p = line.split()
            if p[0] == "SHARDS":
                self.shards = set() if p[3] == "-" else {int(x) for x in p[3].split(",")}
            elif p[0] == "OBJECTS":
                self.objects = int(p[3])
            elif p[0] == "SYNCED":
                self.synced = True

    def usage(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICKS
        rss = 0
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
        return rss, cpu

    def stop(self, sig=signal.SIGTERM):
        try:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)
        except Exception:
            self.proc.kill()


def shard_counts(server, ns):
    counts = [0] * SHARDS
    items = server.request("GET", f"/api/v1/namespaces/{ns}/configmaps")["items"]
    for it in items:
        h = 0xcbf29ce484222325
        for b in it["metadata"]["uid"].encode():
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        counts[shard_of(h)] += 1
    return counts


def shard_of(h):
    i = (h * SHARDS) >> 64
    while i + 1 < SHARDS and ((i + 1) << 64) // SHARDS <= h:
        i += 1
    while i > 0 and (i << 64) // SHARDS > h:
        i -= 1
    return i


def settled(replicas, counts):
    owned = [s for r in replicas for s in r.shards]
    if sorted(owned) != list(range(SHARDS)):
        return False
    fair = -(-SHARDS // len(replicas))
    if any(len(r.shards) > fair for r in replicas):
        return False
    return all(r.synced and r.objects == sum(counts[s] for s in r.shards) for r in replicas)


def wait(cond, within=120):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > within:
            raise TimeoutError("not settled")
        time.sleep(0.05)
    return time.monotonic() - t0


def run(gate, objects):
    server = Server("ShardedListAndWatch=true" if gate == "on" else "")
    rows = []
    try:
        ns = "bench"
        server.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        t0 = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: server.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i}"}, "data": {"k": "v" * 100}}), range(objects)))
        print(f"# gate {gate}: {objects} ConfigMaps created in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        counts = shard_counts(server, ns)
        for n in (1, 2, 3, 4):
            replicas = [Replica(server, ns, f"r{i}") for i in range(n)]
            took = wait(lambda: settled(replicas, counts))
            use = [r.usage() for r in replicas]
            rows.append((gate, n, took, [u[0] for u in use], [u[1] for u in use],
                         [r.objects for r in replicas]))
            if n == 3:
                join = Replica(server, ns, "r3")
                replicas.append(join)
                t_join = wait(lambda: settled(replicas, counts))
                victim = replicas[1]
                victim.stop(signal.SIGKILL)
                replicas.remove(victim)
                t_kill = wait(lambda: settled(replicas, counts))
                rows.append((gate, "join 3→4", t_join, None, None, None))
                rows.append((gate, "SIGKILL 4→3", t_kill, None, None, None))
            for r in replicas:
                r.stop()
            time.sleep(1)
    finally:
        server.stop()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=30000)
    ap.add_argument("--gates", default="on,off")
    args = ap.parse_args()
    if not os.path.exists(BIN):
        sys.exit(f"build it first: cargo build --release -p kcache-examples --example sharded_controller ({BIN})")
    print("| gate | replicas | settled after (s) | RSS per replica (MB, median / max) | sync CPU per replica (s, median / max) | objects per replica |")
    print("|---|---|---|---|---|---|")
    for gate in args.gates.split(","):
        for gate_, n, took, rss, cpu, objs in run(gate, args.objects):
            if rss is None:
                print(f"| {gate_} | {n} | {took:.2f} | | | |")
            else:
                print(f"| {gate_} | {n} | {took:.2f} | {statistics.median(rss):.1f} / {max(rss):.1f} | "
                      f"{statistics.median(cpu):.2f} / {max(cpu):.2f} | {objs} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
