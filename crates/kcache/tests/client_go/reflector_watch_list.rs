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

/// TestWatchListResourceVersion: during a streaming list, the resourceVersion is taken only
/// from events past the synthetic ADDED ones, i.e. from the initial-events-end bookmark on.
/// client-go watches the callback of `handleListWatch`; kcache shows it as the last synced
/// resourceVersion, set when the streamed list replaces the store.
mod watch_list_resource_version {
    use super::*;

    async fn run_case(watch_events: Vec<WatchEvent<Pod>>, expected_resource_version: &str) {
        let cancel = CancellationToken::new();
        let lw = FakeLw::new(&cancel);
        let run = start(
            lw.clone(),
            Arc::new(RecordingStore::new()),
            config(true),
            &cancel,
            None,
        );
        let handle = run.handle.clone();
        for e in watch_events {
            assert!(lw.send(e).await, "the reflector did not take a watch event");
        }
        cancel.cancel();
        run.finished().await;
        assert_eq!(
            handle.last_sync_resource_version(),
            expected_resource_version
        );
    }

    #[tokio::test(start_paused = true)]
    async fn empty_resource_version() {
        run_case(vec![], "").await;
    }

    #[tokio::test(start_paused = true)]
    async fn empty_resource_version_without_bookmark_event() {
        run_case(vec![added(make_pod("p1", "1"))], "").await;
    }

    #[tokio::test(start_paused = true)]
    async fn non_empty_resource_version_with_bookmark_event_and_initial_events_annotation() {
        run_case(
            vec![added(make_pod("p1", "1")), bookmark("2", Some("true"))],
            "2",
        )
        .await;
    }
}

/// TestWatchList.
mod watch_list {
    use super::*;

    /// The options of a streaming list request.
    fn streaming() -> Opts {
        Opts {
            send_initial_events: Some(true),
            allow_watch_bookmarks: true,
            resource_version_match: "NotOlderThan".into(),
            timeout_seconds: Some(1),
            ..Opts::default()
        }
    }

    /// The options of the first LIST.
    fn first_list() -> Opts {
        Opts {
            resource_version: "0".into(),
            limit: 500,
            ..Opts::default()
        }
    }

    /// The options of a watch from `rv`.
    fn watch_from(rv: &str) -> Opts {
        Opts {
            allow_watch_bookmarks: true,
            resource_version: rv.into(),
            timeout_seconds: Some(1),
            ..Opts::default()
        }
    }

    fn list_of(rv: &str, items: Vec<Pod>) -> ObjectList<Pod> {
        page(rv, items)
    }

    #[tokio::test(start_paused = true)]
    async fn the_reflector_wont_be_synced_if_the_bookmark_event_hasnt_been_received() {
        run_scenario(Scenario {
            watch_events: vec![added(make_pod("p1", "1"))],
            close_after_watch_events: 1,
            expected_watch_requests: 1,
            expected_request_options: vec![streaming()],
            ..Scenario::default()
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_reflector_uses_the_old_list_watch_semantics_if_use_watch_list_is_turned_off() {
        run_scenario(Scenario {
            disable_use_watch_list: true,
            close_after_watch_requests: 1,
            pod_list: Some(list_of("1", vec![make_pod("p1", "1")])),
            expected_watch_requests: 1,
            expected_list_requests: 1,
            expected_request_options: vec![first_list(), watch_from("1")],
            expected_store_content: vec![make_pod("p1", "1")],
            ..Scenario::default()
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn returning_any_other_error_than_invalid_forces_fallback() {
        run_scenario(Scenario {
            watch_options_predicate: Some(Box::new(|opts: &Opts| {
                if opts.send_initial_events == Some(true) {
                    return Err(plain_error("dummy error"));
                }
                Ok(())
            })),
            pod_list: Some(list_of("1", vec![make_pod("p1", "1")])),
            close_after_watch_events: 1,
            watch_events: vec![added(make_pod("p2", "2"))],
            expected_watch_requests: 2,
            expected_list_requests: 1,
            expected_store_content: vec![make_pod("p1", "1"), make_pod("p2", "2")],
            expected_request_options: vec![streaming(), first_list(), watch_from("1")],
            // kcache reports the refused streaming list to its error handler; client-go logs it.
            reported: vec!["dummy error"],
            ..Scenario::default()
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_reflector_can_fall_back_to_old_list_watch_semantics_when_a_server_doesnt_support_streaming()
     {
        run_scenario(Scenario {
            watch_options_predicate: Some(Box::new(|opts: &Opts| {
                if opts.send_initial_events == Some(true) {
                    return Err(api_error(invalid("streaming is not allowed")));
                }
                Ok(())
            })),
            pod_list: Some(list_of("1", vec![make_pod("p1", "1")])),
            close_after_watch_events: 1,
            watch_events: vec![added(make_pod("p2", "2"))],
            expected_watch_requests: 2,
            expected_list_requests: 1,
            expected_store_content: vec![make_pod("p1", "1"), make_pod("p2", "2")],
            expected_request_options: vec![streaming(), first_list(), watch_from("1")],
            reported: vec!["streaming is not allowed"],
            ..Scenario::default()
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn prove_that_the_reflector_is_synced_after_receiving_a_bookmark_event() {
        run_scenario(Scenario {
            close_after_watch_events: 3,
            watch_events: vec![
                added(make_pod("p1", "1")),
                added(make_pod("p2", "2")),
                bookmark("2", Some("true")),
            ],
            expected_watch_requests: 1,
            expected_request_options: vec![streaming()],
            expected_store_content: vec![make_pod("p1", "1"), make_pod("p2", "2")],
            ..Scenario::default()
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn check_if_updates_and_deletes_events_are_propagated_during_streaming() {
        let p1_modified = || {
            let mut p1 = make_pod("p1", "3");
            p1.spec = Some(PodSpec {
                active_deadline_seconds: Some(12),
                ..PodSpec::default()
            });
            p1
        };
        run_scenario(Scenario {
            close_after_watch_events: 6,
            watch_events: vec![
                added(make_pod("p1", "1")),
                added(make_pod("p2", "2")),
                WatchEvent::Modified(p1_modified()),
                added(make_pod("p3", "4")),
                WatchEvent::Deleted(make_pod("p3", "5")),
                bookmark("5", Some("true")),
            ],
            expected_watch_requests: 1,
            expected_request_options: vec![streaming()],
            expected_store_content: vec![make_pod("p2", "2"), p1_modified()],
            ..Scenario::default()
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn checks_if_the_reflector_retries_429() {
        let mut counter = 1;
        run_scenario(Scenario {
            watch_options_predicate: Some(Box::new(move |_: &Opts| {
                if counter < 3 {
                    counter += 1;
                    return Err(api_error(too_many_requests("busy, check again later")));
                }
                Ok(())
            })),
            close_after_watch_events: 2,
            watch_events: vec![added(make_pod("p1", "1")), bookmark("2", Some("true"))],
            expected_watch_requests: 3,
            expected_request_options: vec![streaming(), streaming(), streaming()],
            expected_store_content: vec![make_pod("p1", "1")],
            // Retried inside client-go's round; reported by kcache.
            reported: vec!["busy, check again later", "busy, check again later"],
            ..Scenario::default()
        })
        .await;
    }

    /// A stream closed before its end bookmark: client-go streams again at once; kcache falls
    /// back to a plain LIST for the round and streams again on the next one (recovery table,
    /// "streaming list | anything else: … closed before the end bookmark … | plain LIST at
    /// once for this round; stream again on the next round"). The fake lister-watcher has no
    /// list response here, as in client-go's scenario, so that LIST fails, and after one
    /// backoff the next round makes the new watch-list request client-go expects.
    #[tokio::test(start_paused = true)]
    async fn check_if_stopping_a_watcher_before_sync_results_in_creating_a_new_watch_list_request()
    {
        let outcome = run_scenario(Scenario {
            stop_after_watch_events: 1,
            close_after_watch_events: 3,
            watch_events: vec![
                added(make_pod("p1", "1")),
                // The second request.
                added(make_pod("p1", "1")),
                bookmark("1", Some("true")),
            ],
            expected_watch_requests: 2,
            // client-go: 0.
            expected_list_requests: 1,
            // client-go: [streaming(), streaming()].
            expected_request_options: vec![streaming(), first_list(), streaming()],
            expected_store_content: vec![make_pod("p1", "1")],
            reported: vec!["initial-events-end bookmark", "not implemented"],
            ..Scenario::default()
        })
        .await;
        assert_eq!(
            outcome.gaps(),
            [Duration::ZERO, BACKOFF],
            "the LIST at once, then one backoff before streaming again"
        );
    }

    /// kcache backs off before re-watching a watch that closed within a second after
    /// delivering events, where client-go re-watches at once (recovery table, "watch | closed
    /// in < 1 s after some events"): the second request comes one backoff after the first.
    #[tokio::test(start_paused = true)]
    async fn stopping_a_watcher_after_synchronization_results_in_creating_a_new_watch_request() {
        let outcome = run_scenario(Scenario {
            stop_after_watch_events: 4,
            close_after_watch_events: 5,
            watch_events: vec![
                added(make_pod("p1", "1")),
                added(make_pod("p2", "2")),
                bookmark("2", Some("true")),
                added(make_pod("p3", "3")),
                // The second request.
                added(make_pod("p4", "4")),
            ],
            expected_watch_requests: 2,
            expected_request_options: vec![streaming(), watch_from("3")],
            expected_store_content: vec![
                make_pod("p1", "1"),
                make_pod("p2", "2"),
                make_pod("p3", "3"),
                make_pod("p4", "4"),
            ],
            reported: vec!["closed after 1 events in under a second"],
            ..Scenario::default()
        })
        .await;
        assert_eq!(outcome.gaps(), [BACKOFF], "one backoff before re-watching");
    }

    /// The watch closes within a second after an event (kcache reports it and backs off
    /// before re-watching, see above); the re-watch is refused with 410 Expired, which ends
    /// client-go's round with that error.
    #[tokio::test(start_paused = true)]
    async fn expiring_an_established_watcher_results_in_returning_an_error_from_the_reflector() {
        let mut counter = 0;
        run_scenario(Scenario {
            watch_options_predicate: Some(Box::new(move |_: &Opts| {
                counter += 1;
                if counter == 2 {
                    return Err(api_error(expired("rv already expired")));
                }
                Ok(())
            })),
            stop_after_watch_events: 3,
            watch_events: vec![
                added(make_pod("p1", "1")),
                bookmark("2", Some("true")),
                added(make_pod("p3", "3")),
            ],
            expected_watch_requests: 2,
            expected_request_options: vec![streaming(), watch_from("3")],
            expected_store_content: vec![make_pod("p1", "1"), make_pod("p3", "3")],
            expected_error: Some("rv already expired"),
            reported: vec![
                "closed after 1 events in under a second",
                "rv already expired",
            ],
            ..Scenario::default()
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn prove_that_the_reflector_is_checking_the_value_of_the_initial_events_end_annotation() {
        run_scenario(Scenario {
            close_after_watch_events: 3,
            watch_events: vec![
                added(make_pod("p1", "1")),
                added(make_pod("p2", "2")),
                bookmark("2", Some("false")),
            ],
            expected_watch_requests: 1,
            expected_request_options: vec![streaming()],
            ..Scenario::default()
        })
        .await;
    }
}

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

/// client-go's `fakeListWatcher` and the pieces around it.
mod support {
    use std::{collections::BTreeMap, sync::Arc, time::Duration};

    use futures::StreamExt;
    use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::ListMeta};
    use kcache::{
        ListerWatcher,
        lister_watcher::{
            INITIAL_EVENTS_END_ANNOTATION, ListParams, ObjectList, Status, VersionMatch,
            WatchEvent, WatchParams, WatchStream,
        },
        reflector::{Config, Error, Reflector, ReflectorHandle, ReflectorStore},
    };
    use kube_core::{
        ObjectMeta, TypeMeta,
        watch::{Bookmark, BookmarkMeta},
    };
    use parking_lot::Mutex;
    use tokio::{
        sync::{mpsc, oneshot},
        task::JoinHandle,
        time::Instant,
    };
    use tokio_stream::wrappers::ReceiverStream;
    use tokio_util::sync::CancellationToken;

    pub(crate) use kcache::lister_watcher::Error as LwError;

    /// How long (in paused, virtual time) any wait may take before the test fails.
    pub(crate) const PATIENCE: Duration = Duration::from_secs(3600);

    /// What a request asked for, in the terms of client-go's `metav1.ListOptions`.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub(crate) struct Opts {
        pub(crate) resource_version: String,
        pub(crate) resource_version_match: String,
        pub(crate) limit: u32,
        pub(crate) continue_token: String,
        pub(crate) allow_watch_bookmarks: bool,
        pub(crate) send_initial_events: Option<bool>,
        pub(crate) timeout_seconds: Option<u32>,
    }

    impl Opts {
        fn of_list(p: &ListParams) -> Self {
            Self {
                resource_version: p.resource_version.clone().unwrap_or_default(),
                resource_version_match: match p.version_match {
                    Some(VersionMatch::Exact) => "Exact".into(),
                    Some(VersionMatch::NotOlderThan) => "NotOlderThan".into(),
                    None => String::new(),
                },
                limit: p.limit.unwrap_or(0),
                continue_token: p.continue_token.clone().unwrap_or_default(),
                // kcache lists never carry a timeout (`ListParams::timeout` is a no-op).
                ..Self::default()
            }
        }

        fn of_watch(p: &WatchParams, resource_version: &str) -> Self {
            Self {
                resource_version: resource_version.into(),
                // kube-core sends resourceVersionMatch=NotOlderThan with sendInitialEvents.
                resource_version_match: if p.send_initial_events {
                    "NotOlderThan".into()
                } else {
                    String::new()
                },
                allow_watch_bookmarks: p.bookmarks,
                send_initial_events: p.send_initial_events.then_some(true),
                timeout_seconds: p.timeout,
                ..Self::default()
            }
        }

        pub(crate) fn without_timeout(self) -> Self {
            Self {
                timeout_seconds: None,
                ..self
            }
        }
    }

    /// One request to the lister-watcher.
    #[derive(Debug, Clone)]
    pub(crate) struct Request {
        pub(crate) opts: Opts,
        pub(crate) at: Instant,
    }

    /// Decides whether a watch request fails (client-go's `watchOptionsPredicate`).
    pub(crate) type Predicate = Box<dyn FnMut(&Opts) -> Result<(), LwError> + Send>;

    type Event = (WatchEvent<Pod>, oneshot::Sender<()>);

    /// The current fake watch: the producer, and the stream until a request takes it.
    struct Watcher {
        tx: mpsc::Sender<Event>,
        stream: Option<WatchStream<Pod>>,
    }

    impl Watcher {
        fn new() -> Self {
            let (tx, rx) = mpsc::channel(1);
            let stream = ReceiverStream::new(rx).map(|(event, taken): Event| {
                let _ = taken.send(());
                Ok(event)
            });
            Self {
                tx,
                stream: Some(stream.boxed()),
            }
        }
    }

    struct State {
        watcher: Watcher,
        list_counter: usize,
        watch_counter: usize,
        close_after_watch_requests: usize,
        close_after_list_requests: usize,
        requests: Vec<Request>,
        custom_list_response: Option<ObjectList<Pod>>,
        watch_options_predicate: Option<Predicate>,
    }

    /// client-go's `fakeListWatcher`. Its one `FakeWatcher` is handed out by every watch
    /// request; a Rust stream has one reader, so a second request for the same watch fails
    /// (none of the scenarios makes one when the reflector behaves as client-go's).
    #[derive(Clone)]
    pub(crate) struct FakeLw {
        state: Arc<Mutex<State>>,
        stop: CancellationToken,
    }

    impl FakeLw {
        pub(crate) fn new(cancel: &CancellationToken) -> Self {
            Self {
                state: Arc::new(Mutex::new(State {
                    watcher: Watcher::new(),
                    list_counter: 0,
                    watch_counter: 0,
                    close_after_watch_requests: 0,
                    close_after_list_requests: 0,
                    requests: Vec::new(),
                    custom_list_response: None,
                    watch_options_predicate: None,
                })),
                stop: cancel.clone(),
            }
        }

        pub(crate) fn configure(
            &self,
            watch_options_predicate: Option<Predicate>,
            close_after_watch_requests: usize,
            custom_list_response: Option<ObjectList<Pod>>,
            close_after_list_requests: usize,
        ) {
            let mut st = self.state.lock();
            st.watch_options_predicate = watch_options_predicate;
            st.close_after_watch_requests = close_after_watch_requests;
            st.custom_list_response = custom_list_response;
            st.close_after_list_requests = close_after_list_requests;
        }

        pub(crate) fn requests(&self) -> Vec<Request> {
            self.state.lock().requests.clone()
        }

        pub(crate) fn list_counter(&self) -> usize {
            self.state.lock().list_counter
        }

        pub(crate) fn watch_counter(&self) -> usize {
            self.state.lock().watch_counter
        }

        /// Sends `event` on the current watch and waits until the reflector took it (client-go's
        /// `FakeWatcher` is unbuffered); `false` if the watch was stopped first.
        pub(crate) async fn send(&self, event: WatchEvent<Pod>) -> bool {
            let tx = self.state.lock().watcher.tx.clone();
            let (ack, taken) = oneshot::channel();
            tx.send((event, ack)).await.is_ok() && taken.await.is_ok()
        }

        /// Closes the current watch; later requests get a new one.
        pub(crate) fn stop_and_recreate_watch(&self) {
            self.state.lock().watcher = Watcher::new();
        }
    }

    impl ListerWatcher<Pod> for FakeLw {
        async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, LwError> {
            let opts = Opts::of_list(params);
            let mut st = self.state.lock();
            st.list_counter += 1;
            st.requests.push(Request {
                opts,
                at: Instant::now(),
            });
            if st.list_counter == st.close_after_list_requests {
                self.stop.cancel();
            }
            st.custom_list_response
                .clone()
                .ok_or_else(|| plain_error("not implemented"))
        }

        async fn watch(
            &self,
            params: &WatchParams,
            resource_version: &str,
        ) -> Result<WatchStream<Pod>, LwError> {
            let opts = Opts::of_watch(params, resource_version);
            let mut st = self.state.lock();
            st.watch_counter += 1;
            st.requests.push(Request {
                opts: opts.clone(),
                at: Instant::now(),
            });
            if st.watch_counter == st.close_after_watch_requests {
                self.stop.cancel();
            }
            if let Some(predicate) = st.watch_options_predicate.as_mut() {
                predicate(&opts)?;
            }
            st.watcher
                .stream
                .take()
                .ok_or_else(|| plain_error("the fake watch was already handed out"))
        }

        fn describe(&self) -> String {
            "pods".into()
        }
    }

    /// client-go's `makePod`.
    pub(crate) fn make_pod(name: &str, rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                uid: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    pub(crate) fn page(rv: &str, items: Vec<Pod>) -> ObjectList<Pod> {
        ObjectList {
            types: TypeMeta {
                api_version: "v1".into(),
                kind: "PodList".into(),
            },
            metadata: ListMeta {
                resource_version: Some(rv.into()),
                ..ListMeta::default()
            },
            items,
        }
    }

    pub(crate) fn added(p: Pod) -> WatchEvent<Pod> {
        WatchEvent::Added(p)
    }

    /// A BOOKMARK at `rv`, with the `k8s.io/initial-events-end` annotation set to the value
    /// given, if any.
    pub(crate) fn bookmark(rv: &str, initial_events_end: Option<&str>) -> WatchEvent<Pod> {
        let annotations: BTreeMap<String, String> = initial_events_end
            .map(|v| (INITIAL_EVENTS_END_ANNOTATION.to_owned(), v.to_owned()))
            .into_iter()
            .collect();
        WatchEvent::Bookmark(Bookmark {
            types: TypeMeta {
                api_version: "v1".into(),
                kind: "Pod".into(),
            },
            metadata: BookmarkMeta {
                resource_version: rv.into(),
                annotations,
            },
        })
    }

    fn status(code: u16, reason: &str, message: &str, details: serde_json::Value) -> Status {
        serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code, "details": details,
        }))
        .expect("a Status literal always deserializes")
    }

    /// `apierrors.NewInvalid(schema.GroupKind{}, name, nil)`.
    pub(crate) fn invalid(name: &str) -> Status {
        status(
            422,
            "Invalid",
            &format!(" {name:?} is invalid"),
            serde_json::json!({"name": name}),
        )
    }

    /// `apierrors.NewTooManyRequests(message, 1)`.
    pub(crate) fn too_many_requests(message: &str) -> Status {
        status(
            429,
            "TooManyRequests",
            &format!("Too many requests: {message}"),
            serde_json::json!({"retryAfterSeconds": 1}),
        )
    }

    /// `apierrors.NewResourceExpired(message)`.
    pub(crate) fn expired(message: &str) -> Status {
        status(410, "Expired", message, serde_json::Value::Null)
    }

    pub(crate) fn api_error(status: Status) -> LwError {
        LwError::api(status, None)
    }

    /// An error that is neither a server `Status` nor a transport failure (client-go's
    /// `fmt.Errorf`).
    pub(crate) fn plain_error(message: &str) -> LwError {
        LwError::protocol(message)
    }

    /// An error the reflector reported to its watch error handler.
    #[derive(Debug, Clone)]
    pub(crate) struct Reported {
        pub(crate) text: String,
    }

    /// A running reflector.
    pub(crate) struct Running {
        pub(crate) handle: ReflectorHandle,
        pub(crate) errors: Arc<Mutex<Vec<Reported>>>,
        task: JoinHandle<()>,
    }

    impl Running {
        /// Waits until the reflector stopped (it is cancelled by the scenario).
        pub(crate) async fn finished(self) {
            tokio::time::timeout(PATIENCE, self.task)
                .await
                .expect("the reflector did not stop")
                .expect("the reflector task panicked");
        }
    }

    /// Runs a reflector over `lw` into `store`; errors are recorded, and the first one whose
    /// text contains `stop_on` cancels the run (where client-go's round returns it).
    pub(crate) fn start(
        lw: FakeLw,
        store: Arc<dyn ReflectorStore<Pod>>,
        config: Config,
        cancel: &CancellationToken,
        stop_on: Option<&'static str>,
    ) -> Running {
        let errors: Arc<Mutex<Vec<Reported>>> = Arc::default();
        let (errs, c) = (errors.clone(), cancel.clone());
        let reflector =
            Reflector::new(lw, store, config).with_error_handler(Arc::new(move |e: &Error| {
                let text = e.to_string();
                let stop = stop_on.is_some_and(|s| text.contains(s));
                errs.lock().push(Reported { text });
                if stop {
                    c.cancel();
                }
            }));
        let handle = reflector.handle();
        Running {
            handle,
            errors,
            task: tokio::spawn(reflector.run(cancel.clone())),
        }
    }
}
