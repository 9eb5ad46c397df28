//! The peer configurations of a run (program, initial-list mode, storage, wire format) and
//! one run's record; `peer_process` runs the peer itself.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use kcache_bench::{
    PeerLine,
    peer::{Dataset, Mode},
    server_cost::{self, PhaseCost},
};
use kube_client::Client;
use serde::Serialize;

use super::BenchArgs;

/// A peer program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum PeerKind {
    /// kcache's informer (`kcache-peer`).
    Kcache,
    /// kube-runtime's reflector (`kube-rs-peer`).
    KubeRs,
    /// client-go's shared informer (`harness/client-go-peer`).
    ClientGo,
}

impl PeerKind {
    /// The name the peer prints in its line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            PeerKind::Kcache => "kcache",
            PeerKind::KubeRs => "kube-rs",
            PeerKind::ClientGo => "client-go",
        }
    }
}

/// One peer configuration: program, initial-list mode, storage, wire format.
#[derive(Debug, Clone)]
pub(super) struct Config {
    pub kind: PeerKind,
    pub mode: Mode,
    pub storage: Option<String>,
    pub protobuf: bool,
    pub program: PathBuf,
}

impl Config {
    /// `peer mode[ storage][ protobuf]`, as [`PeerLine::label`] names the line it prints.
    pub(super) fn label(&self) -> String {
        let mut s = format!("{} {}", self.kind.name(), self.mode.as_str());
        if let Some(storage) = &self.storage {
            s.push(' ');
            s.push_str(storage);
        }
        if self.protobuf {
            s.push_str(" protobuf");
        }
        s
    }

    /// Whether this is a limit line (`kcache-peer --storage limit`): the server's cost alone,
    /// with no update phase.
    pub(super) fn is_limit(&self) -> bool {
        self.storage.as_deref() == Some(LIMIT_STORAGE)
    }
}

/// The kcache storage whose line is the server-bound limit (nothing decoded, no updates).
pub(super) const LIMIT_STORAGE: &str = "limit";

/// One run's outcome.
#[derive(Debug, Serialize)]
pub(super) struct Record {
    pub n: usize,
    pub run: usize,
    pub label: String,
    pub peer: PeerKind,
    pub mode: &'static str,
    pub storage: Option<String>,
    pub protobuf: bool,
    #[serde(serialize_with = "ser_line")]
    pub line: Result<PeerLine, String>,
    /// What the run cost the API server (with `--server-pid`, or the embedded server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerCost>,
}

/// The API server's cost over one run: while the peer synced, and while it took the updates
/// (from its sync to its exit: the updater's requests are in it).
#[derive(Debug, Clone, Copy, Serialize)]
pub(super) struct ServerCost {
    pub sync: PhaseCost,
    pub update: Option<PhaseCost>,
}

fn ser_line<S: serde::Serializer>(
    line: &Result<PeerLine, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match line {
        Ok(line) => line.serialize(s),
        Err(e) => serde_json::json!({ "error": e }).serialize(s),
    }
}

/// What every run of one dataset shares.
pub(super) struct Context<'a> {
    pub args: &'a BenchArgs,
    pub kubeconfig: &'a Path,
    pub client: &'a Client,
    pub namespace: &'a str,
    pub n: usize,
    /// Pods patched (update events timed) per run, at most `n`.
    pub updates: usize,
    /// The API server's process, when its cost is measured.
    pub server: Option<server_cost::Server>,
}

fn client_go_program(args: &BenchArgs) -> anyhow::Result<PathBuf> {
    if let Some(p) = &args.client_go_peer {
        return Ok(p.clone());
    }
    let cache = std::env::var_os("KCACHE_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/kcache")))
        .context("no --client-go-peer, and neither KCACHE_CACHE_DIR nor HOME is set")?;
    let newest = std::fs::read_dir(&cache)
        .with_context(|| format!("looking for client-go-peer in {}", cache.display()))?
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("client-go-peer-")
        })
        .map(|e| e.path().join("client-go-peer"))
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    newest.with_context(|| {
        format!(
            "no client-go-peer in {} (build it with scripts/build-harness.sh client-go-peer, or pass --client-go-peer)",
            cache.display()
        )
    })
}

fn sibling_program(args: &BenchArgs, name: &str) -> anyhow::Result<PathBuf> {
    let dir = match &args.peer_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("this program has no directory")?
            .to_path_buf(),
    };
    let path = dir.join(name);
    if !path.is_file() {
        bail!(
            "{} not found (build it: cargo build -p {name}, or pass --peer-dir)",
            path.display()
        );
    }
    Ok(path)
}

/// A peer's storage modes (`None`: the peer has no such choice), each with its wire formats
/// (`false` JSON, `true` protobuf).
type Formats = Vec<(Option<String>, Vec<bool>)>;

/// The storage modes of a kcache peer and the wire formats of each
/// (`kcache-peer --list-formats`: lines like `typed json protobuf`).
fn kcache_formats(program: &Path) -> anyhow::Result<Formats> {
    let out = std::process::Command::new(program)
        .arg("--list-formats")
        .output()
        .with_context(|| format!("running {} --list-formats", program.display()))?;
    if !out.status.success() {
        bail!("{} --list-formats failed", program.display());
    }
    parse_formats(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("reading {} --list-formats", program.display()))
}

/// Parses `--list-formats` output.
fn parse_formats(text: &str) -> anyhow::Result<Formats> {
    let mut storages = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let storage = words.next().context("empty line")?.to_owned();
        let mut formats = Vec::new();
        for word in words {
            match word {
                "json" => formats.push(false),
                "protobuf" => formats.push(true),
                other => bail!("unknown wire format {other:?} for storage {storage}"),
            }
        }
        if formats.is_empty() {
            bail!("storage {storage} lists no wire format");
        }
        storages.push((Some(storage), formats));
    }
    if storages.is_empty() {
        bail!("no storage mode listed");
    }
    Ok(storages)
}

/// Every configuration to run, in the order they alternate: per peer, per mode, per storage,
/// JSON then protobuf (where the peer offers it, unless `--no-protobuf`), kept to `--only`
/// when given.
pub(super) fn configs(args: &BenchArgs) -> anyhow::Result<Vec<Config>> {
    let mut configs = Vec::new();
    for &kind in &args.peers {
        let (program, storages): (PathBuf, Formats) = match kind {
            PeerKind::Kcache => {
                let program = sibling_program(args, "kcache-peer")?;
                let storages = kcache_formats(&program)?;
                (program, storages)
            }
            PeerKind::KubeRs => (
                sibling_program(args, "kube-rs-peer")?,
                vec![(None, vec![false])],
            ),
            PeerKind::ClientGo => (client_go_program(args)?, vec![(None, vec![false, true])]),
        };
        for mode in [Mode::ListWatch, Mode::Streaming] {
            for (storage, formats) in &storages {
                if !offers(args.dataset, storage.as_deref()) {
                    continue;
                }
                for &protobuf in formats {
                    // Custom resources are served in JSON only.
                    if protobuf && (args.no_protobuf || args.dataset == Dataset::Widgets) {
                        continue;
                    }
                    configs.push(Config {
                        kind,
                        mode,
                        storage: storage.clone(),
                        protobuf,
                        program: program.clone(),
                    });
                }
            }
        }
    }
    select(configs, &args.only)
}

/// The kcache storages that have a custom-resource form: the typed `Widget`, the default
/// (lean) line and the limit line; the others are Pod-specific comparisons.
pub(super) const WIDGET_STORAGES: [&str; 3] = ["typed", "default", LIMIT_STORAGE];

/// Whether a peer configuration with this storage (`None`: the peer has no storage choice)
/// runs on `dataset`.
fn offers(dataset: Dataset, storage: Option<&str>) -> bool {
    match (dataset, storage) {
        (Dataset::Pods, _) | (Dataset::Widgets, None) => true,
        (Dataset::Widgets, Some(s)) => WIDGET_STORAGES.contains(&s),
    }
}

/// Keeps the configurations whose label is in `only` (all of them when `only` is empty).
///
/// # Errors
/// A label of `only` that names no configuration (a typo would silently run nothing).
fn select(configs: Vec<Config>, only: &[String]) -> anyhow::Result<Vec<Config>> {
    if only.is_empty() {
        return Ok(configs);
    }
    let labels: Vec<String> = configs.iter().map(Config::label).collect();
    if let Some(unknown) = only.iter().find(|o| !labels.contains(&o.trim().to_owned())) {
        bail!(
            "--only {unknown:?} names no configuration; the configurations are: {}",
            labels.join(", ")
        );
    }
    Ok(configs
        .into_iter()
        .filter(|c| only.iter().any(|o| o.trim() == c.label()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(kind: PeerKind, mode: Mode, storage: Option<&str>, protobuf: bool) -> Config {
        Config {
            kind,
            mode,
            storage: storage.map(str::to_owned),
            protobuf,
            program: PathBuf::from("peer"),
        }
    }

    #[test]
    fn list_formats_output_gives_each_storage_its_formats() {
        let parsed =
            parse_formats("typed json protobuf\nmetadata json\n\ncompact json protobuf\n").unwrap();
        assert_eq!(
            parsed,
            vec![
                (Some("typed".to_owned()), vec![false, true]),
                (Some("metadata".to_owned()), vec![false]),
                (Some("compact".to_owned()), vec![false, true]),
            ]
        );
        assert!(parse_formats("typed yaml").is_err());
        assert!(parse_formats("typed").is_err());
        assert!(parse_formats("").is_err());
    }

    #[test]
    fn only_keeps_the_named_configurations_and_rejects_unknown_labels() {
        let all = || {
            vec![
                config(PeerKind::ClientGo, Mode::ListWatch, None, false),
                config(PeerKind::ClientGo, Mode::ListWatch, None, true),
                config(PeerKind::Kcache, Mode::ListWatch, Some("typed"), true),
                config(PeerKind::Kcache, Mode::Streaming, Some("typed"), true),
            ]
        };
        let labels = |c: Vec<Config>| c.iter().map(Config::label).collect::<Vec<_>>();
        assert_eq!(labels(select(all(), &[]).unwrap()).len(), 4);
        let only = [
            "client-go list-watch protobuf".to_owned(),
            " kcache list-watch typed protobuf".to_owned(),
        ];
        assert_eq!(
            labels(select(all(), &only).unwrap()),
            [
                "client-go list-watch protobuf",
                "kcache list-watch typed protobuf"
            ]
        );
        let err = select(all(), &["kcache list-watch typed json".to_owned()]).unwrap_err();
        assert!(err.to_string().contains("names no configuration"), "{err}");
    }

    #[test]
    fn widgets_run_the_storages_with_a_custom_resource_form_only() {
        assert!(offers(Dataset::Pods, Some("metadata")));
        assert!(offers(Dataset::Widgets, None));
        for s in ["typed", "default", "limit"] {
            assert!(offers(Dataset::Widgets, Some(s)), "{s}");
        }
        for s in ["stripped", "metadata", "compact"] {
            assert!(!offers(Dataset::Widgets, Some(s)), "{s}");
        }
    }

    #[test]
    fn the_limit_storage_is_the_limit_line() {
        let limit = config(PeerKind::Kcache, Mode::Streaming, Some("limit"), true);
        assert!(limit.is_limit());
        assert_eq!(limit.label(), "kcache streaming limit protobuf");
        assert!(!config(PeerKind::Kcache, Mode::Streaming, Some("typed"), true).is_limit());
        assert!(!config(PeerKind::ClientGo, Mode::Streaming, None, true).is_limit());
    }
}
