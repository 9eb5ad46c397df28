//! How the reflector gets its initial state: a paginated LIST, a streaming list, or chosen by
//! the server ([`InitialList`]).

use std::{fmt, str::FromStr};

/// How a reflector gets the state it starts (and restarts) from. Set by
/// [`Config::initial_list`](super::Config::initial_list); the default is [`InitialList::Auto`].
///
/// # Why `Auto` decides as it does
///
/// A streaming list (`sendInitialEvents=true`, KEP-3157) sends one watch event per object;
/// a paginated LIST sends pages of 500. Measured with kcache against kube-apiserver v1.36.5
/// (BENCHMARKS.md, "The initial list: paginated LIST or streaming list", 2026-12-06), the
/// streaming list cost the client 36–46% more CPU
/// and, over JSON, 1.5–1.9× the sync wall time; the server's own time (the limit lines) was
/// 1.2–1.8× that of the LIST. A LIST asks for gzip (`Accept-Encoding: gzip`); a streaming list
/// is uncompressed until kube-apiserver 1.37, so it also moves several times the bytes
/// (upstream measured 1,572 MB against 232 MB for 165,000 pods).
///
/// Facts from the Kubernetes sources (`k8s.io/apiserver` `pkg/features/kube_features.go` and
/// `pkg/endpoints/handlers/watch.go`, `k8s.io/kubernetes` `pkg/features/kube_features.go`,
/// read at v1.36.5 and v1.37.2):
///
/// - the `WatchList` gate (the server side of the streaming list) is beta and on by default
///   from 1.34 (on in 1.32, off again in 1.33);
/// - the `WatchListCompression` gate does not exist in 1.36; it is beta and **on by default
///   in 1.37**: a watch that is a watch-list request (`sendInitialEvents=true`) and asks for
///   `Accept-Encoding: gzip` is answered with `Content-Encoding: gzip`, flushed per event
///   batch. Ordinary watches stay uncompressed.
///
/// Over protobuf (kcache-client's wire for built-in kinds) the streaming list costs the server
/// less than a LIST per client: a fleet of 25 clients syncing 10,000 pods at once on v1.36.5
/// (BENCHMARKS.md, "The fleet on kube-apiserver v1.36.5 in protobuf", 2026-12-07) took the
/// server 16.5 CPU seconds by LIST and 37.4 by stream (client-go's default, the same stream:
/// 48.7), but the LISTs grew its memory by 2.0 GB (each response is built whole) and the
/// streams by 0.14 GB. Over JSON (custom resources) before 1.37 the stream sends 16× the bytes
/// of a gzip LIST and cost the server about twice the CPU.
///
/// So `Auto` streams on kube-apiserver 1.37 and later (kcache-client asks for gzip on
/// streaming lists), and over protobuf from 1.34 (where the `WatchList` gate is on by
/// default); it lists JSON before 1.37, on a server whose version cannot be read
/// (`/version` failed or timed out, or a lister-watcher that does not tell), and on other
/// distributions of unknown lineage. It decides from the server's version, read once and
/// cached per client, and from the first answer: if the server refuses the streaming list
/// (the `WatchList` gate turned off, an aggregated API without it), `Auto` lists from then on
/// instead of trying the stream again on every relist as [`InitialList::Stream`] does. It
/// never waits on a guess: the version request is bounded, and a streaming list that does not
/// reach its initial-events-end bookmark within [`Config::list_timeout`](super::Config::list_timeout)
/// falls back to a LIST.
///
/// client-go 1.35+ streams by default (its `WatchListClient` gate) whatever the server; that is
/// [`InitialList::Stream`]. The `Auto` choice on 1.37 rests on the gate's default and on
/// upstream's byte counts; kcache's own 1.37 timing is not measured yet.
///
/// ```
/// use kcache::reflector::{Config, InitialList};
/// let config = Config::default().initial_list(InitialList::Stream);
/// assert_eq!(config.initial_list, InitialList::Stream);
/// assert_eq!(Config::default().initial_list, InitialList::Auto);
/// assert_eq!("list".parse::<InitialList>(), Ok(InitialList::List));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InitialList {
    /// A paginated LIST at `resourceVersion="0"` (later relists at the last synced RV), then a
    /// WATCH: client-go's behaviour before 1.35, and what every server supports.
    List,
    /// A streaming list (`sendInitialEvents=true`), falling back to a LIST for a round when
    /// the server refuses it, and trying it again on the next round: client-go 1.35+.
    Stream,
    /// [`InitialList::Stream`] on kube-apiserver 1.37 and later (watch-list responses are
    /// compressed there) and over protobuf from 1.34, [`InitialList::List`] elsewhere; see
    /// the type's docs.
    #[default]
    Auto,
}

impl InitialList {
    /// The command-line spelling: `list`, `stream` or `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::List => "list",
            Self::Stream => "stream",
            Self::Auto => "auto",
        }
    }
}

impl fmt::Display for InitialList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`InitialList`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown initial list strategy {0:?}: expected list, stream or auto")]
pub struct ParseInitialListError(String);

impl FromStr for InitialList {
    type Err = ParseInitialListError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "list" => Ok(Self::List),
            "stream" => Ok(Self::Stream),
            "auto" => Ok(Self::Auto),
            other => Err(ParseInitialListError(
                crate::lister_watcher::trim_for_display(other, 40),
            )),
        }
    }
}

/// The first kube-apiserver minor version whose watch-list responses are compressed by
/// default (`WatchListCompression`, beta, on by default in 1.37).
pub const FIRST_COMPRESSED_WATCH_LIST_MINOR: u32 = 37;

/// The first kube-apiserver minor version from which the `WatchList` gate (the server side of
/// the streaming list) stays on by default (on in 1.32, off again in 1.33).
pub const FIRST_WATCH_LIST_MINOR: u32 = 34;

/// What `Auto` picks for a server of `version` (`None`: unknown) when lists and watches are
/// in protobuf (`protobuf`, kcache-client's wire for built-in kinds) or JSON. `List` or
/// `Stream`, never `Auto`.
///
/// ```
/// use kcache::lister_watcher::ServerVersion;
/// use kcache::reflector::{InitialList, auto_initial_list};
/// let v1_36 = ServerVersion::new(1, 36);
/// assert_eq!(auto_initial_list(Some(&v1_36), false), InitialList::List);
/// assert_eq!(auto_initial_list(Some(&v1_36), true), InitialList::Stream);
/// assert_eq!(auto_initial_list(Some(&ServerVersion::new(1, 37)), false), InitialList::Stream);
/// assert_eq!(auto_initial_list(None, true), InitialList::List);
/// ```
pub fn auto_initial_list(
    version: Option<&crate::lister_watcher::ServerVersion>,
    protobuf: bool,
) -> InitialList {
    let first_streaming_minor = if protobuf {
        FIRST_WATCH_LIST_MINOR
    } else {
        FIRST_COMPRESSED_WATCH_LIST_MINOR
    };
    match version {
        Some(v) if v.major == 1 && v.minor >= first_streaming_minor => InitialList::Stream,
        _ => InitialList::List,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lister_watcher::ServerVersion;

    #[test]
    fn auto_lists_on_1_34_to_1_36_and_streams_from_1_37() {
        for (minor, want) in [
            (34, InitialList::List),
            (35, InitialList::List),
            (36, InitialList::List),
            (37, InitialList::Stream),
            (38, InitialList::Stream),
        ] {
            let v = ServerVersion::new(1, minor);
            assert_eq!(auto_initial_list(Some(&v), false), want, "1.{minor}");
        }
    }

    #[test]
    fn auto_streams_protobuf_where_the_watch_list_gate_is_on_by_default() {
        for (minor, want) in [
            (33, InitialList::List),
            (34, InitialList::Stream),
            (36, InitialList::Stream),
            (37, InitialList::Stream),
        ] {
            let v = ServerVersion::new(1, minor);
            assert_eq!(auto_initial_list(Some(&v), true), want, "1.{minor}");
        }
        assert_eq!(auto_initial_list(None, true), InitialList::List);
    }

    #[test]
    fn auto_lists_when_the_version_is_unknown_or_foreign() {
        assert_eq!(auto_initial_list(None, false), InitialList::List);
        assert_eq!(
            auto_initial_list(Some(&ServerVersion::new(2, 0)), true),
            InitialList::List,
            "a major version we know nothing of"
        );
    }

    #[test]
    fn parses_and_prints_the_command_line_spelling() {
        for s in [InitialList::List, InitialList::Stream, InitialList::Auto] {
            assert_eq!(s.as_str().parse::<InitialList>(), Ok(s));
        }
        let err = "watchlist".parse::<InitialList>().unwrap_err();
        assert!(err.to_string().contains("list, stream or auto"), "{err}");
    }
}
