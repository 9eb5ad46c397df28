#!/usr/bin/env python3
"""Turns a `kcache bench` results.json into the compact file kept in bench/results/.

Usage: bench/compact-results.py OUT_DIR/results.json DATE COMMIT > bench/results/NAME.json

DATE is the day of the run (YYYY-MM-DD), COMMIT the commit whose code the peers were built from
(or, for a set recorded with a change, that change's commit). The output
holds what BENCHMARKS.md quotes and nothing the bench regenerates: the machine, the server, the
`kcache bench` command that reproduces the set (rebuilt from the runs' labels, counts and
update phase), the object size, every run's figures (one row per run, `columns` names them) and
per configuration the median, min and max of each figure. Charts, logs and results.md are left
out: `kcache bench --out DIR` writes them again.
"""
import json
import statistics
import sys

COLUMNS = [
    ("sync_ms", lambda l: l.get("sync_ms"), 1),
    ("sync_cpu_s", lambda l: l.get("sync_cpu_s"), 3),
    ("rss_after_sync_mb", lambda l: mb(l.get("rss_after_sync_bytes")), 1),
    ("peak_rss_mb", lambda l: mb(l.get("vmhwm_bytes")), 1),
    ("update_events", lambda l: l.get("update_events"), 0),
    ("update_cpu_us_per_event", lambda l: per_event(l), 1),
    ("update_events_per_s", lambda l: l.get("update_events_per_s"), 1),
    ("sync_page_faults", lambda l: l.get("sync_page_faults"), 0),
    ("update_page_faults", lambda l: l.get("update_page_faults"), 0),
    ("wire_bytes", lambda l: l.get("wire_bytes"), 0),
    ("body_bytes", lambda l: l.get("body_bytes"), 0),
]


def mb(b):
    return None if b is None else b / 1e6


def per_event(line):
    cpu, events = line.get("update_cpu_s"), line.get("update_events")
    return None if not cpu or not events else cpu / events * 1e6


def rounded(v, digits):
    if v is None:
        return None
    return int(round(v)) if digits == 0 else round(v, digits)


def command(r, runs):
    labels = sorted({x["label"] for x in runs}, key=lambda l: [x["label"] for x in runs].index(l))
    per = max(sum(1 for x in runs if x["label"] == l and x.get("line")) for l in labels)
    ns = sorted({x["n"] for x in runs})
    updates = {x["line"].get("update_events") for x in runs if x.get("line")} - {None}
    dataset = "widgets" if "widgets" in str(r.get("server", "")) else "pods"
    cmd = ["kcache bench --server kubeconfig \"$KCACHE_UPSTREAM_KUBECONFIG\"",
           "--client-go-peer \"$(scripts/build-harness.sh client-go-peer)\""]
    if dataset == "widgets":
        cmd.append("--dataset widgets")
    cmd.append("--objects " + ",".join(str(n) for n in ns))
    cmd.append(f"--runs {per}")
    if not updates:
        cmd.append("--updates 0")
    elif len(updates) == 1 and max(updates) < min(ns):
        cmd.append(f"--updates {max(updates)}")
    cmd.append("--only \"" + ",".join(labels) + "\"")
    return " ".join(cmd)


def main(path, date, commit):
    with open(path, encoding="utf-8") as f:
        r = json.load(f)
    runs = r["runs"]
    machine = r.get("machine", {})
    out = {
        "date": date,
        "commit": commit,
        "server": "kube-apiserver v1.36.5 + etcd 3.6 (scripts/kube-up.sh)",
        "dataset": "widgets" if "widgets" in str(r.get("server", "")) else "pods",
        "machine": {
            "cpu": machine.get("cpu"),
            "cpus": machine.get("cpus"),
            "memory_gb": round(int(machine.get("memory", "0 0").split()[1]) / 1e6, 1),
            "kernel": machine.get("kernel"),
        },
        "object_json_bytes": r.get("pod_json_bytes"),
        "command": command(r, runs),
        "columns": ["label", "n", "run"] + [c for c, _, _ in COLUMNS],
        "runs": [],
        "medians": {},
    }
    for x in runs:
        line = x.get("line")
        if not line:
            out["runs"].append([x["label"], x["n"], x["run"]] + [None] * len(COLUMNS))
            continue
        out["runs"].append(
            [x["label"], x["n"], x["run"]] + [rounded(get(line), d) for _, get, d in COLUMNS]
        )
    for label in dict.fromkeys(x["label"] for x in runs):
        for n in sorted({x["n"] for x in runs}):
            rows = [x["line"] for x in runs if x["label"] == label and x["n"] == n and x.get("line")]
            if not rows:
                continue
            figures = {}
            for name, get, d in COLUMNS:
                vals = [get(l) for l in rows if get(l) is not None]
                if vals:
                    figures[name] = [rounded(statistics.median(vals), d), rounded(min(vals), d),
                                     rounded(max(vals), d)]
            out["medians"][f"{label} @ {n}"] = figures
    # One run or one configuration a line: small, and diffs read well.
    text = json.dumps({k: v for k, v in out.items() if k not in ("runs", "medians")}, indent=1)
    body = ",\n".join("  " + json.dumps(row) for row in out["runs"])
    meds = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in out["medians"].items())
    sys.stdout.write(text[:-2] + f',\n "runs": [\n{body}\n ],\n "medians (median, min, max)": {{\n{meds}\n }}\n}}\n')


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
