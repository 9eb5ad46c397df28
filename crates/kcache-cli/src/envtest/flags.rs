//! Command-line flags as Go's pflag (kube-apiserver) and flag (etcd) packages read them:
//! `--name=value`, `--name value` for flags taking a value, a bare `--name` for booleans.

use std::collections::BTreeMap;

/// A flag's kind: a boolean may stand alone (`--allow-privileged`), a value flag needs one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Bool,
    Value,
}

impl Kind {
    /// The kind of `name` in a program's tables of boolean and value flags (`None`: unknown).
    pub(crate) fn of(name: &str, bools: &[&str], values: &[&str]) -> Option<Self> {
        if bools.contains(&name) {
            Some(Self::Bool)
        } else if values.contains(&name) {
            Some(Self::Value)
        } else {
            None
        }
    }
}

/// The flags given, by name; a repeated flag keeps every value in order.
#[derive(Debug, Default)]
pub(crate) struct Flags {
    values: BTreeMap<String, Vec<String>>,
    /// Arguments that are no flag.
    pub(crate) positional: Vec<String>,
}

impl Flags {
    /// The last value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Whether `name` was given.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// A boolean flag's value (`--x`, `--x=true`); `default` when absent.
    pub(crate) fn bool(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => parse_bool(v).ok_or_else(|| {
                format!("invalid argument \"{v}\" for \"--{name}\" flag: strconv.ParseBool: parsing \"{v}\": invalid syntax")
            }),
        }
    }

    /// Names of every flag given.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Why the command line was refused: the words the Go program prints.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A flag the program does not define.
    Unknown(String),
    /// A value flag at the end of the line.
    NeedsArgument(String),
}

/// Parses `args` against `known` (`-x` and `--x` alike, as both packages accept).
pub(crate) fn parse(
    args: &[String],
    known: &dyn Fn(&str) -> Option<Kind>,
) -> Result<Flags, Refusal> {
    let mut flags = Flags::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            flags.positional.extend(it.by_ref().cloned());
            break;
        }
        let Some(body) = arg
            .strip_prefix("--")
            .or_else(|| arg.strip_prefix('-'))
            .filter(|b| !b.is_empty())
        else {
            flags.positional.push(arg.clone());
            continue;
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (body, None),
        };
        let Some(kind) = known(name) else {
            return Err(Refusal::Unknown(name.to_owned()));
        };
        let value = match (inline, kind) {
            (Some(v), _) => v,
            (None, Kind::Bool) => "true".to_owned(),
            (None, Kind::Value) => match it.next() {
                Some(v) => v.clone(),
                None => return Err(Refusal::NeedsArgument(name.to_owned())),
            },
        };
        flags.values.entry(name.to_owned()).or_default().push(value);
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(name: &str) -> Option<Kind> {
        match name {
            "allow-privileged" => Some(Kind::Bool),
            "secure-port" | "v" => Some(Kind::Value),
            _ => None,
        }
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn reads_the_forms_go_accepts() {
        let f = parse(
            &args(&["--secure-port=6443", "--allow-privileged", "-v", "4", "x"]),
            &known,
        )
        .unwrap();
        assert_eq!(f.get("secure-port"), Some("6443"));
        assert_eq!(f.bool("allow-privileged", false), Ok(true));
        assert_eq!(f.get("v"), Some("4"));
        assert_eq!(f.positional, vec!["x".to_owned()]);
        assert!(f.bool("secure-port", false).is_err());
    }

    #[test]
    fn refuses_unknown_flags_and_missing_values() {
        assert_eq!(
            parse(&args(&["--foo=1"]), &known).unwrap_err(),
            Refusal::Unknown("foo".to_owned())
        );
        assert_eq!(
            parse(&args(&["--secure-port"]), &known).unwrap_err(),
            Refusal::NeedsArgument("secure-port".to_owned())
        );
    }
}
