//! `reflector_watchlist_test.go`'s cases: the streaming-list scenarios and the
//! resourceVersion each request carries.

use super::*;

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
