//! Generates the direct decoders: protobuf wire bytes straight into k8s-openapi structs
//! (`generated/decode_gen.rs`, runtime in `src/wire.rs`), for the same messages and with the
//! same field rules as the generated conversions.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Result, bail};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto};

use crate::{Facts, OpenapiStruct, flatten, is_map_field, openapi_def};

/// How a field is held while decoding and turned into the k8s-openapi field.
enum Shape {
    /// `Option<E>`
    One,
    /// `Vec<E>`
    Repeated,
    /// `BTreeMap<String, E>`
    Map,
}

/// Splits a k8s-openapi field type into (optional, shape, element type).
fn parse_type(ty: &str) -> (bool, Shape, String) {
    let (optional, inner) = match ty.strip_prefix("Option<").and_then(|t| t.strip_suffix('>')) {
        Some(inner) => (true, inner),
        None => (false, ty),
    };
    let fix = |t: &str| t.replace("crate::", "k8s_openapi::");
    if let Some(e) = inner.strip_prefix("std::vec::Vec<").and_then(|t| t.strip_suffix('>')) {
        (optional, Shape::Repeated, fix(e))
    } else if let Some(e) =
        inner.strip_prefix("std::collections::BTreeMap<std::string::String, ").and_then(|t| t.strip_suffix('>'))
    {
        (optional, Shape::Map, fix(e))
    } else {
        (optional, Shape::One, fix(inner))
    }
}

fn is_time(elem: &str) -> bool {
    elem.ends_with("::meta::v1::Time") || elem.ends_with("::meta::v1::MicroTime")
}

/// One flattened field of a message.
struct FieldPlan<'a> {
    f: &'a FieldDescriptorProto,
    /// The k8s-openapi field name.
    rust: String,
    local: String,
    shape: Shape,
    elem: String,
    finish: String,
}

fn plan<'a>(
    messages: &BTreeMap<String, DescriptorProto>,
    owner: &str,
    f: &'a FieldDescriptorProto,
    st: &OpenapiStruct,
    facts: &Facts,
) -> Result<FieldPlan<'a>> {
    let (rust, ty) = &st.fields[f.name()];
    let (optional, shape, elem) = parse_type(ty);
    let local = format!("f_{}", rust.trim_start_matches("r#"));
    let repeated = f.label() == Label::Repeated;
    let is_map = is_map_field(messages, f);
    match (&shape, repeated, is_map) {
        (Shape::One, false, false) | (Shape::Repeated, true, false) | (Shape::Map, true, true) => {}
        _ => bail!("{owner}.{}: protobuf shape does not match k8s-openapi type {ty}", f.name()),
    }
    if is_map {
        let key = &messages[f.type_name()].field[0];
        if key.r#type() != Type::String {
            bail!("{owner}.{}: map key is not a string", f.name());
        }
    }
    if is_time(&elem) && !matches!(shape, Shape::One) {
        bail!("{owner}.{}: repeated times are not supported", f.name());
    }
    let fact = facts.get(&(owner.to_owned(), f.name().to_owned()));
    let finish = match shape {
        Shape::One if is_time(&elem) && optional => format!("time_opt({local})?"),
        Shape::One if is_time(&elem) => format!("time_req({local})?"),
        Shape::One if optional && f.r#type() != Type::Message && fact.is_some_and(|&(ptr, omit)| !ptr && omit) => {
            format!("nz({local})")
        }
        Shape::One if optional => local.clone(),
        Shape::One => format!("{local}.unwrap_or_default()"),
        Shape::Repeated if optional => format!("nonempty_vec({local})"),
        Shape::Map if optional => format!("nonempty_map({local})"),
        Shape::Repeated | Shape::Map => local.clone(),
    };
    Ok(FieldPlan { f, rust: rust.clone(), local, shape, elem, finish })
}

/// The local's type.
fn local_type(p: &FieldPlan<'_>) -> String {
    let elem = if is_time(&p.elem) { "TimeRaw".to_owned() } else { p.elem.clone() };
    match p.shape {
        Shape::One => format!("Option<{elem}>"),
        Shape::Repeated => format!("Vec<{elem}>"),
        Shape::Map => format!("std::collections::BTreeMap<String, {elem}>"),
    }
}

/// The statement reading one occurrence of the field from reader `r` (key `wt`).
fn read_stmt(p: &FieldPlan<'_>) -> String {
    let elem = if is_time(&p.elem) { "TimeRaw".to_owned() } else { p.elem.clone() };
    let name = p.f.name();
    match p.shape {
        Shape::One => {
            format!("{} = Some(<{elem} as Wire>::read(&mut r, wt, cx).map_err(|e| e.at(\"{name}\"))?)", p.local)
        }
        Shape::Repeated => format!(
            "<{elem} as Wire>::read_repeated(&mut r, wt, cx, &mut {}).map_err(|e| e.at(\"{name}\"))?",
            p.local
        ),
        Shape::Map => format!(
            "{{ let (k, v) = map_entry::<{elem}>(&mut r, wt, cx).map_err(|e| e.at(\"{name}\"))?; {}.insert(k, v); }}",
            p.local
        ),
    }
}

/// The special arm a field gets before its ordinary one, if any.
fn guard(owner: &str, f: &FieldDescriptorProto) -> Option<String> {
    (owner == ".k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta" && f.name() == "managedFields")
        .then(|| format!("{} if cx.strip_managed_fields => r.skip(wt)?,", f.number()))
}

pub(crate) fn gen_decoders(
    messages: &BTreeMap<String, DescriptorProto>,
    openapi: &BTreeMap<String, OpenapiStruct>,
    facts: &Facts,
    candidates: &[String],
) -> Result<String> {
    let mut out = String::new();
    out.push_str("// @generated by crates/kcache-proto/codegen (regen.sh). Do not edit.\n");
    out.push_str("// Protobuf wire bytes straight into the k8s-openapi types, field by field.\n\n");
    out.push_str("#[allow(clippy::wildcard_imports, reason = \"generated code calls whichever helpers it needs\")]\nuse crate::wire::*;\n\n");
    for name in candidates {
        let msg = &messages[name];
        let st = &openapi[&openapi_def(name)];
        let flat = flatten(messages, msg, st);
        let mut plans = Vec::new();
        for (via, f) in &flat {
            let owner = match via {
                Some(v) => msg.field.iter().find(|g| g.name() == *v).map(|g| g.type_name().to_owned()).unwrap_or_default(),
                None => name.clone(),
            };
            plans.push((*via, owner.clone(), plan(messages, &owner, f, st, facts)?));
        }
        let mut body = String::new();
        for (_, _, p) in &plans {
            writeln!(body, "        let mut {}: {} = Default::default();", p.local, local_type(p))?;
        }
        body.push_str("        let mut r = Reader::new(buf);\n        while let Some((tag, wt)) = r.key()? {\n            match tag {\n");
        // Direct fields, then one arm per embedded struct reading its fields into ours.
        for (via, owner, p) in &plans {
            if via.is_none() {
                if let Some(g) = guard(owner, p.f) {
                    writeln!(body, "                {g}")?;
                }
                writeln!(body, "                {} => {},", p.f.number(), read_stmt(p))?;
            }
        }
        for f in &msg.field {
            let inner: Vec<_> = plans.iter().filter(|(via, _, _)| *via == Some(f.name())).collect();
            if inner.is_empty() {
                continue;
            }
            writeln!(body, "                {} => {{", f.number())?;
            writeln!(body, "                    let mut r = Reader::new(r.len(wt).map_err(|e| e.at(\"{}\"))?);", f.name())?;
            body.push_str("                    while let Some((tag, wt)) = r.key()? {\n                        match tag {\n");
            for (_, owner, p) in &inner {
                if let Some(g) = guard(owner, p.f) {
                    writeln!(body, "                            {g}")?;
                }
                writeln!(body, "                            {} => {},", p.f.number(), read_stmt(p))?;
            }
            body.push_str("                            _ => r.skip(wt)?,\n                        }\n                    }\n                }\n");
        }
        body.push_str("                _ => r.skip(wt)?,\n            }\n        }\n");
        body.push_str("        Ok(Self {\n");
        for (_, _, p) in &plans {
            writeln!(body, "            {}: {},", p.rust, p.finish)?;
        }
        body.push_str("        })\n");
        writeln!(
            out,
            "impl WireMessage for {t} {{\n    fn decode_msg(buf: &[u8], cx: &Cx) -> Result<Self, WireError> {{\n{body}    }}\n}}\nwire_message!({t});\n",
            t = st.path
        )?;
    }
    Ok(out)
}
