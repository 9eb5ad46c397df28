//! The protobuf schema table kcache-apiserver decodes request bodies of every built-in kind
//! with (`crates/kcache-apiserver/data/protobuf-v0.36.5.json`), generated from the upstream
//! API definitions: the `generated.proto` files of `k8s.io/api` v0.36.5 (and of
//! apimachinery's meta/v1, runtime, resource and intstr) for the messages, fields, numbers
//! and types, and the Go struct tags of the same packages for each field's JSON name,
//! `omitempty` and whether it is a pointer (a present pointer keeps its zero value).
//!
//! `KCACHE_REGEN_PROTOBUF=1` (re)writes the file from `$(go env GOMODCACHE)`; otherwise the
//! test checks that the checked-in file is what the sources give, when the module cache has
//! them (it is skipped, saying so, when it does not).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn data_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kcache-apiserver/data/protobuf-v0.36.5.json")
}

fn mod_cache() -> Option<PathBuf> {
    let out = std::process::Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    p.join("k8s.io/api@v0.36.5").is_dir().then_some(p)
}

/// Go facts of one struct field: JSON name, omitempty, pointer.
type GoFields = BTreeMap<(String, String), (String, bool, bool)>;

/// `(struct, proto field name)` → facts, and the Go slice types (`type ExtraValue []string`),
/// from the package's Go sources.
fn go_facts(dir: &Path) -> (GoFields, Vec<String>) {
    let mut fields = GoFields::new();
    let mut slices = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (fields, slices);
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".go") || name.ends_with("_test.go") || name.starts_with("zz_") {
            continue;
        }
        let Ok(src) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let mut current = String::new();
        for line in src.lines() {
            let t = line.trim();
            if let Some(rest) = t.strip_prefix("type ") {
                let mut parts = rest.split_whitespace();
                let ty = parts.next().unwrap_or("").to_owned();
                match parts.next() {
                    Some("struct") => current = ty,
                    Some(s) if s.starts_with("[]") => slices.push(ty),
                    _ => {}
                }
                continue;
            }
            if t == "}" {
                current.clear();
                continue;
            }
            if current.is_empty() {
                continue;
            }
            let Some(tag_start) = t.find('`') else {
                continue;
            };
            let tag = &t[tag_start..];
            let Some(pb) = tag.split("protobuf:\"").nth(1) else {
                continue;
            };
            let Some(pname) = pb
                .split('"')
                .next()
                .unwrap_or("")
                .split(',')
                .find_map(|p| p.strip_prefix("name="))
            else {
                continue;
            };
            let json_tag = tag
                .split("json:\"")
                .nth(1)
                .and_then(|j| j.split('"').next())
                .unwrap_or("");
            let mut jparts = json_tag.split(',');
            let jname = jparts.next().unwrap_or("").to_owned();
            let omitempty = jparts.any(|p| p == "omitempty");
            let decl: Vec<&str> = t[..tag_start].split_whitespace().collect();
            let pointer = decl.get(1).is_some_and(|ty| ty.starts_with('*'));
            let jname = if jname.is_empty() {
                decl.first().copied().unwrap_or("").to_owned()
            } else {
                jname
            };
            fields.insert(
                (current.clone(), pname.to_owned()),
                (jname, omitempty, pointer),
            );
        }
    }
    (fields, slices)
}

/// The messages of one `generated.proto`, fully named, each with its fields as
/// `[number, jsonName, label, type, omitempty, pointer]` (label: `o`, `r` or `m:<key type>`).
fn messages(proto: &Path, go_dir: &Path, out: &mut BTreeMap<String, Value>) {
    let Ok(src) = std::fs::read_to_string(proto) else {
        return;
    };
    let (facts, slices) = go_facts(go_dir);
    let package = src
        .lines()
        .find_map(|l| l.strip_prefix("package "))
        .unwrap_or("")
        .trim_end_matches(';')
        .to_owned();
    let qualify = |ty: &str| -> String {
        if let Some(abs) = ty.strip_prefix('.') {
            abs.to_owned()
        } else if matches!(
            ty,
            "string" | "bytes" | "bool" | "int32" | "int64" | "double" | "float"
        ) {
            ty.to_owned()
        } else {
            format!("{package}.{ty}")
        }
    };
    let mut current: Option<(String, Vec<Value>)> = None;
    for line in src.lines() {
        let t = line.trim();
        if t.starts_with("//") || t.is_empty() {
            continue;
        }
        if let Some(rest) = t.strip_prefix("message ") {
            let name = rest.trim_end_matches('{').trim().to_owned();
            current = Some((name, Vec::new()));
            continue;
        }
        if t == "}" {
            if let Some((name, fields)) = current.take() {
                let mut m = json!({"fields": fields});
                if slices.contains(&name) {
                    m["list"] = json!(true);
                }
                out.insert(format!("{package}.{name}"), m);
            }
            continue;
        }
        let Some((msg, fields)) = current.as_mut() else {
            continue;
        };
        let Some((decl, number)) = t.trim_end_matches(';').split_once(" = ") else {
            continue;
        };
        let number: u64 = number.trim().parse().unwrap_or(0);
        let (label, ty, name) = if let Some(rest) = decl.strip_prefix("map<") {
            let (kv, name) = rest.split_once('>').unwrap_or(("", ""));
            let (k, v) = kv.split_once(',').unwrap_or(("", ""));
            (format!("m:{}", k.trim()), qualify(v.trim()), name.trim())
        } else {
            let parts: Vec<&str> = decl.split_whitespace().collect();
            let label = if parts.first() == Some(&"repeated") {
                "r"
            } else {
                "o"
            };
            (
                label.to_owned(),
                qualify(parts.get(1).copied().unwrap_or("")),
                parts.get(2).copied().unwrap_or(""),
            )
        };
        let (json_name, omitempty, pointer) = facts
            .get(&(msg.clone(), name.to_owned()))
            .cloned()
            .unwrap_or_else(|| (name.to_owned(), true, false));
        fields.push(json!([number, json_name, label, ty, omitempty, pointer]));
    }
}

fn generate(cache: &Path) -> Value {
    let mut out = BTreeMap::new();
    let api = cache.join("k8s.io/api@v0.36.5");
    let mut dirs = Vec::new();
    for group in std::fs::read_dir(&api)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        for version in std::fs::read_dir(group.path())
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            if version.path().join("generated.proto").is_file() {
                dirs.push(version.path());
            }
        }
    }
    let machinery = cache.join("k8s.io/apimachinery@v0.36.5/pkg");
    for sub in ["apis/meta/v1", "runtime", "api/resource", "util/intstr"] {
        dirs.push(machinery.join(sub));
    }
    dirs.sort();
    for d in dirs {
        messages(&d.join("generated.proto"), &d, &mut out);
    }
    json!({
        "source": "k8s.io/api v0.36.5 and k8s.io/apimachinery v0.36.5: generated.proto (messages, \
                   numbers, types) and the Go struct tags (JSON names, omitempty, pointers); \
                   written by crates/kcache-conformance/tests/protobuf_table.rs with \
                   KCACHE_REGEN_PROTOBUF=1. A field is [number, jsonName, label (o, r, m:<key>), \
                   type, omitempty, pointer]",
        "messages": out,
    })
}

#[test]
fn the_checked_in_protobuf_table_is_the_upstream_definitions() {
    let Some(cache) = mod_cache() else {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: the protobuf table check, because k8s.io/api@v0.36.5 is not in the Go module cache"
        );
        return;
    };
    let generated = generate(&cache);
    if std::env::var("KCACHE_REGEN_PROTOBUF").is_ok_and(|v| v == "1") {
        let mut text = serde_json::to_string(&generated).unwrap();
        text.push('\n');
        std::fs::write(data_file(), text).unwrap();
        eprintln!("wrote {}", data_file().display());
        return;
    }
    let checked_in: Value =
        serde_json::from_str(&std::fs::read_to_string(data_file()).unwrap()).unwrap();
    assert!(
        checked_in == generated,
        "the upstream definitions changed: regenerate {} with KCACHE_REGEN_PROTOBUF=1",
        data_file().display()
    );
}
