//! `InitialList::Auto` at work: the server's version decides, a failed or hanging `/version`
//! lists, and a server that refuses the streaming list is listed from then on.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;

use super::hardening_tests::start;
use super::*;
use crate::{
    lister_watcher::{self, ListParams, ObjectList, ServerVersion, WatchParams},
    testing::{Call, FakeSource, config_map as cm},
};

/// What `/version` does.
#[derive(Clone, Copy)]
enum Version {
    Is(u32),
    Fails,
    Hangs,
}

/// A [`FakeSource`] that answers `server_version` as told.
#[derive(Clone)]
struct Versioned {
    inner: FakeSource<ConfigMap>,
    version: Version,
    /// What `uses_protobuf` says (the wire of a built-in kind in kcache-client).
    protobuf: bool,
}

impl ListerWatcher<ConfigMap> for Versioned {
    async fn list(
        &self,
        params: &ListParams,
    ) -> Result<ObjectList<ConfigMap>, lister_watcher::Error> {
        self.inner.list(params).await
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<ConfigMap>, lister_watcher::Error> {
        self.inner.watch(params, resource_version).await
    }

    async fn server_version(&self) -> Option<ServerVersion> {
        match self.version {
            Version::Is(minor) => Some(ServerVersion::new(1, minor)),
            Version::Fails => None,
            Version::Hangs => std::future::pending().await,
        }
    }

    fn uses_protobuf(&self) -> bool {
        self.protobuf
    }
}

/// `(streaming lists, plain lists)` the source was asked for.
fn requests(src: &FakeSource<ConfigMap>) -> (usize, usize) {
    let calls = src.calls();
    let streams = calls
        .iter()
        .filter(|c| {
            matches!(
                c,
                Call::Watch {
                    send_initial_events: true,
                    ..
                }
            )
        })
        .count();
    let lists = calls
        .iter()
        .filter(|c| matches!(c, Call::List { .. }))
        .count();
    (streams, lists)
}

async fn synced_with(version: Version, src: &FakeSource<ConfigMap>) -> (usize, usize) {
    synced_over(version, false, src).await
}

async fn synced_over(
    version: Version,
    protobuf: bool,
    src: &FakeSource<ConfigMap>,
) -> (usize, usize) {
    src.upsert(cm("a"));
    let lw = Versioned {
        inner: src.clone(),
        version,
        protobuf,
    };
    let run = start(&lw, Config::default());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !run.handle.health().synced_once && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(run.handle.health().synced_once, "synced");
    assert_eq!(run.names(), ["a"]);
    run.stop().await;
    requests(src)
}

#[tokio::test(start_paused = true)]
async fn auto_lists_on_1_34_to_1_36_and_streams_on_1_37() {
    for (minor, streams) in [(34, false), (35, false), (36, false), (37, true)] {
        let src = FakeSource::new();
        let (streamed, listed) = synced_with(Version::Is(minor), &src).await;
        if streams {
            assert_eq!((streamed, listed), (1, 0), "1.{minor}: one streaming list");
        } else {
            assert_eq!((streamed, listed), (0, 1), "1.{minor}: one LIST");
        }
    }
}

/// Over protobuf (built-in kinds), `Auto` streams from 1.34, where the `WatchList` gate is on
/// by default: the server then costs what client-go's default costs it, without the memory
/// a LIST per client takes (BENCHMARKS.md, the fleet on v1.36.5 in protobuf).
#[tokio::test(start_paused = true)]
async fn auto_streams_protobuf_from_1_34_and_json_from_1_37() {
    for (minor, protobuf, streams) in [
        (33, true, false),
        (34, true, true),
        (36, true, true),
        (36, false, false),
        (37, false, true),
    ] {
        let src = FakeSource::new();
        let (streamed, listed) = synced_over(Version::Is(minor), protobuf, &src).await;
        let wire = if protobuf { "protobuf" } else { "JSON" };
        if streams {
            assert_eq!((streamed, listed), (1, 0), "1.{minor} {wire}: one stream");
        } else {
            assert_eq!((streamed, listed), (0, 1), "1.{minor} {wire}: one LIST");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn auto_lists_when_the_version_request_fails() {
    let src = FakeSource::new();
    assert_eq!(synced_with(Version::Fails, &src).await, (0, 1));
}

/// A `/version` that never answers costs at most the version deadline, then the reflector lists.
#[tokio::test(start_paused = true)]
async fn auto_lists_when_the_version_request_hangs() {
    let src = FakeSource::new();
    let started = tokio::time::Instant::now();
    assert_eq!(synced_with(Version::Hangs, &src).await, (0, 1));
    assert!(
        started.elapsed() >= VERSION_DEADLINE && started.elapsed() < VERSION_DEADLINE * 2,
        "synced {:?} after the start",
        started.elapsed()
    );
}

/// On a 1.37 server that refuses the streaming list (its `WatchList` gate off), `Auto` falls
/// back to a LIST and lists on every later round; `Stream` tries the stream again each round.
#[tokio::test(start_paused = true)]
async fn auto_stops_streaming_after_the_server_refuses_it_stream_does_not() {
    for (strategy, streams_after) in [(InitialList::Auto, 0), (InitialList::Stream, 1)] {
        let src = FakeSource::new();
        src.upsert(cm("a"));
        src.set_supports_watch_list(false);
        let lw = Versioned {
            inner: src.clone(),
            version: Version::Is(37),
            protobuf: false,
        };
        let run = start(&lw, Config::default().initial_list(strategy));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            run.names(),
            ["a"],
            "{strategy}: synced by the fallback LIST"
        );
        assert_eq!(
            requests(&src),
            (1, 1),
            "{strategy}: one refused stream, one LIST"
        );
        // The next round: a 410 ends the watch and the reflector relists.
        src.compact();
        src.drop_watches();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (streams, lists) = requests(&src);
        assert_eq!(
            streams - 1,
            streams_after,
            "{strategy}: streaming lists on the next round"
        );
        assert!(lists >= 2, "{strategy}: relisted ({lists} lists)");
        run.stop().await;
    }
}

#[test]
fn the_default_is_auto() {
    assert_eq!(Config::default().initial_list, InitialList::Auto);
}
