#!/usr/bin/env python3
"""Extracts per-field facts from the Go API types that the .proto files do not carry.

Go's protobuf marshaller always writes non-pointer fields (an empty string, a 0), while Go's
JSON marshaller omits them when the field is tagged omitempty/omitzero. To turn a protobuf
message into the same k8s-openapi value as the server's JSON, the conversion must know, per
field, whether the Go field is a pointer and whether its JSON tag omits the zero value.

Usage: gofacts.py GOMODCACHE/k8s.io VERSION > proto/go-field-facts.tsv
Output rows: <proto message full name> TAB <json name> TAB <ptr|val> TAB <omit|keep>
"""
import os, re, sys

root, version = sys.argv[1], sys.argv[2]
packages = {
    f"api@{version}/core/v1": "k8s.io.api.core.v1",
    f"api@{version}/apps/v1": "k8s.io.api.apps.v1",
    f"api@{version}/coordination/v1": "k8s.io.api.coordination.v1",
    f"apimachinery@{version}/pkg/apis/meta/v1": "k8s.io.apimachinery.pkg.apis.meta.v1",
    f"apimachinery@{version}/pkg/runtime": "k8s.io.apimachinery.pkg.runtime",
}
field_re = re.compile(r'^\s*(?:(\w+)\s+)?(\*?[\[\]\w.*]+(?:\[[\w.]+\][\w.*]+)?)\s+`([^`]*)`')
rows = []
for rel, pkg in packages.items():
    d = os.path.join(root, rel)
    for name in sorted(os.listdir(d)):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith("zz_") or name == "generated.pb.go":
            continue
        struct = None
        for line in open(os.path.join(d, name)):
            m = re.match(r"^type (\w+) struct \{", line)
            if m:
                struct = m.group(1)
                continue
            if line.startswith("}"):
                struct = None
                continue
            if not struct or "protobuf:\"" not in line:
                continue
            m = field_re.match(line)
            if not m:
                continue
            gotype, tags = m.group(2), m.group(3)
            j = re.search(r'json:"([^"]*)"', tags)
            p = re.search(r'protobuf:"[^"]*name=(\w+)', tags)
            if not j or not p:
                continue
            opts = j.group(1).split(",")[1:]
            omit = "omit" if ("omitempty" in opts or "omitzero" in opts) else "keep"
            ptr = "ptr" if gotype.startswith("*") else "val"
            rows.append(f"{pkg}.{struct}\t{p.group(1)}\t{ptr}\t{omit}")
print("\n".join(sorted(set(rows))))
