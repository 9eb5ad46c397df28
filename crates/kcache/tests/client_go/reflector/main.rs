//! client-go v0.36.5's `reflector_test.go`, ported one for one (see `README.md`).
//!
//! client-go's tests drive one `ListAndWatch` round, or its internals (`watch`, `handleWatch`,
//! `list`), with a scripted `ListWatch` and `watch.NewFake()`. kcache exposes only
//! `Reflector::run`, which loops over rounds until cancelled, so each port runs the reflector
//! against a scripted lister-watcher (`support::Lw`) and a rendezvous fake watch
//! (`support::fake_watch`), and ends the run where the Go round ends: by cancelling it (as the
//! Go test cancels its context), or from the watch error handler when the Go round would return
//! an error. Where client-go's round ends and the next one starts (a relist), the port looks at
//! the requests the reflector made. Time is paused tokio time: backoffs pass instantly and are
//! measured exactly.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kcache::{
    fifo::{DeltaFifo, DeltaFifoConfig, DeltaObject, DeltaType, Fifo, RealFifo},
    lister_watcher::{ObjectList, WatchEvent},
    reflector::{BackoffConfig, Config, ReflectorStore, StoreError},
    store::{KeyError, ObjectKey, ThreadSafeStore, meta_namespace_key_func},
    testing::{RecordingStore, StoreOp},
};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use support::*;

/// client-go 1.36's reflector defaults: the streaming list on (its `WatchListClient` gate;
/// kcache's default, `InitialList::Auto`, lists on a server of unknown version, see `Config::initial_list`) and no watch idle timeout (its HTTP/2
/// transport pings instead; the ports keep kcache's backstop out of the way so that paused time
/// can run freely while a watch is open).
fn base() -> Config {
    Config::default()
        .initial_list(kcache::reflector::InitialList::Stream)
        .watch_idle_timeout(Duration::ZERO)
}

/// A reflector that lists then watches: client-go's tests wrap their `ListWatch` with
/// `toListWatcherWithUnSupportedWatchListSemantics`, or build a `Reflector{}` literal.
fn list_mode() -> Config {
    base().initial_list(kcache::reflector::InitialList::List)
}

/// A backoff of exactly `d` every time (no growth, no jitter), so that gaps between requests
/// count the backoffs taken, as client-go's `fakeDelayFunc` counts its calls.
fn fixed(d: Duration) -> BackoffConfig {
    BackoffConfig::new(d, d).factor(1.0).jitter(0.0)
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(None, name)
}

/// A watch script: the first `closing` watches close at once (a very short watch, which
/// ends client-go's round: kcache relists after a backoff, as client-go's `Run` does), the
/// next one cancels the run (client-go's test cancels its context on watch).
fn watch_closing_then_cancel(
    closing: usize,
    cancel: &CancellationToken,
) -> impl FnMut(&Opts) -> Result<kcache::lister_watcher::WatchStream<Pod>, LwError> + Send + 'static
{
    let c = cancel.clone();
    let mut n = 0;
    move |_| {
        n += 1;
        if n <= closing {
            Ok(closed())
        } else {
            c.cancel();
            Ok(pending())
        }
    }
}

mod list_and_watch;
mod relist;
mod stores;
mod support;
mod watch_round;
