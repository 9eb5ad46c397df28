//! client-go v0.36.5's `reflector_watchlist_test.go`, ported one for one (see
//! `README.md`).
//!
//! client-go drives one `ListAndWatch` round against `fakeListWatcher`: one shared
//! `watch.NewFake()` handed out by every watch request (until the test stops and recreates it),
//! request counters and options, and a goroutine that sends the scenario's events and cancels
//! the context after some of them. The port keeps that lister-watcher (`support::FakeLw`) and
//! runs `Reflector::run` until the same cancellation; a round that client-go ends with an error
//! ends here from the watch error handler. Time is paused tokio time.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kcache::{
    lister_watcher::{ObjectList, WatchEvent},
    reflector::{BackoffConfig, Config},
    testing::RecordingStore,
};
use tokio_util::sync::CancellationToken;

use support::*;

/// client-go has no watch idle timeout; a backoff of exactly 1 s makes kcache's waits
/// measurable (client-go's tests do not look at them).
fn config(use_watch_list: bool) -> Config {
    Config::default()
        .watch_idle_timeout(Duration::ZERO)
        .initial_list(if use_watch_list {
            kcache::reflector::InitialList::Stream
        } else {
            kcache::reflector::InitialList::List
        })
        .backoff(BackoffConfig::new(BACKOFF, BACKOFF).factor(1.0).jitter(0.0))
}

const BACKOFF: Duration = Duration::from_secs(1);

/// One scenario of TestWatchList, with client-go's fields; `reported` is kcache's: the errors
/// its watch error handler sees (it reports every error it recovers from, including those
/// client-go retries inside its round without returning them), each as a substring.
#[derive(Default)]
struct Scenario {
    disable_use_watch_list: bool,
    /// Cancels after the reflector took this many watch events.
    close_after_watch_events: usize,
    /// Cancels on this watch request.
    close_after_watch_requests: usize,
    /// Cancels on this list request.
    close_after_list_requests: usize,
    /// Stops the watch (and makes a new one for later requests) after this many events.
    stop_after_watch_events: usize,
    watch_options_predicate: Option<Predicate>,
    watch_events: Vec<WatchEvent<Pod>>,
    pod_list: Option<ObjectList<Pod>>,
    expected_request_options: Vec<Opts>,
    expected_watch_requests: usize,
    expected_list_requests: usize,
    expected_store_content: Vec<Pod>,
    expected_error: Option<&'static str>,
    reported: Vec<&'static str>,
}

/// What a scenario's run left behind, for checks beyond client-go's.
struct Outcome {
    lw: FakeLw,
}

impl Outcome {
    /// The time between consecutive requests.
    fn gaps(&self) -> Vec<Duration> {
        self.lw
            .requests()
            .windows(2)
            .map(|p| p[1].at - p[0].at)
            .collect()
    }
}

async fn run_scenario(s: Scenario) -> Outcome {
    let cancel = CancellationToken::new();
    let lw = FakeLw::new(&cancel);
    lw.configure(
        s.watch_options_predicate,
        s.close_after_watch_requests,
        s.pod_list,
        s.close_after_list_requests,
    );
    let store = Arc::new(RecordingStore::<Pod>::new());
    let run = start(
        lw.clone(),
        store.clone(),
        config(!s.disable_use_watch_list),
        &cancel,
        s.expected_error,
    );
    let errors = run.errors.clone();

    // client-go's event goroutine.
    let events = s.watch_events.len();
    let (stop_after, close_after) = (s.stop_after_watch_events, s.close_after_watch_events);
    let (sender_lw, c) = (lw.clone(), cancel.clone());
    let sender = tokio::spawn(async move {
        let mut taken = 0;
        for (i, e) in s.watch_events.into_iter().enumerate() {
            if !sender_lw.send(e).await {
                break;
            }
            taken += 1;
            if i + 1 == stop_after {
                sender_lw.stop_and_recreate_watch();
                continue;
            }
            if i + 1 == close_after {
                c.cancel();
            }
        }
        taken
    });

    run.finished().await;
    let taken = tokio::time::timeout(PATIENCE, sender)
        .await
        .expect("the reflector never took all the watch events")
        .expect("the event sender panicked");
    assert_eq!(taken, events, "watch events taken by the reflector");

    let errors = errors.lock().clone();
    if let Some(expected) = s.expected_error {
        let last = errors
            .last()
            .unwrap_or_else(|| panic!("expected error {expected:?}, got none"));
        assert!(
            last.text.contains(expected),
            "expected error {expected:?}, got {:?}",
            last.text
        );
    }
    assert_eq!(
        errors.len(),
        s.reported.len(),
        "errors reported to the watch error handler: {errors:?}"
    );
    for (got, want) in errors.iter().zip(&s.reported) {
        assert!(got.text.contains(want), "expected {want:?} in {got:?}");
    }

    assert_eq!(
        lw.watch_counter(),
        s.expected_watch_requests,
        "unexpected number of WATCH requests"
    );
    assert_eq!(
        lw.list_counter(),
        s.expected_list_requests,
        "unexpected number of LIST requests"
    );
    verify_request_options(&lw, &s.expected_request_options);
    let mut actual: Vec<Pod> = store.objects().iter().map(|p| (**p).clone()).collect();
    let mut expected = s.expected_store_content;
    actual.sort_by_key(name);
    expected.sort_by_key(name);
    assert_eq!(actual, expected, "unexpected store content");
    Outcome { lw }
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// client-go's `verifyRequestOptions`: the timeout's presence counts, not its value.
fn verify_request_options(lw: &FakeLw, expected: &[Opts]) {
    let actual = lw.requests();
    assert_eq!(
        actual.len(),
        expected.len(),
        "expected exactly {} requests, got {:?}",
        expected.len(),
        actual
    );
    for (actual, expected) in actual.iter().zip(expected) {
        let actual = &actual.opts;
        assert_eq!(
            actual.timeout_seconds.is_some(),
            expected.timeout_seconds.is_some(),
            "timeoutSeconds: actual {actual:?}, expected {expected:?}"
        );
        assert_eq!(
            actual.clone().without_timeout(),
            expected.clone().without_timeout()
        );
    }
}

mod cases;
mod support;
