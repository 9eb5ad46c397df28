//! Shard assignment on fake Leases, in paused time.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::*;

struct Replica {
    manager: Arc<ShardManager<FakeLeases>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

fn config(identity: &str) -> Config {
    Config::new("test", identity)
        .shards(12)
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_secs(1))
}

fn start(leases: &FakeLeases, identity: &str) -> Replica {
    let manager = Arc::new(ShardManager::new(config(identity), leases.clone()).unwrap());
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (m, c) = (Arc::clone(&manager), cancel.clone());
        async move { m.run(c).await }
    });
    Replica {
        manager,
        cancel,
        task,
    }
}

fn sets(replicas: &[&Replica]) -> Vec<BTreeSet<u32>> {
    replicas.iter().map(|r| r.manager.gate().active()).collect()
}

/// No shard open on two replicas; returns how many are open in all.
fn assert_disjoint(replicas: &[&Replica]) -> usize {
    let mut seen = BTreeSet::new();
    for set in sets(replicas) {
        for s in set {
            assert!(
                seen.insert(s),
                "shard {s} open on two replicas: {:?}",
                sets(replicas)
            );
        }
    }
    seen.len()
}

/// Advances time one second at a time for `secs`, checking disjointness at every step.
async fn run_for(secs: u64, replicas: &[&Replica]) {
    for _ in 0..secs * 4 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_disjoint(replicas);
    }
}

fn sizes(replicas: &[&Replica]) -> Vec<usize> {
    sets(replicas).iter().map(BTreeSet::len).collect()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn replicas_split_the_shards_evenly_and_rebalance_when_one_joins() {
    let leases = FakeLeases::new();
    let (a, b, c) = (
        start(&leases, "a"),
        start(&leases, "b"),
        start(&leases, "c"),
    );
    run_for(30, &[&a, &b, &c]).await;
    assert_eq!(sizes(&[&a, &b, &c]), vec![4, 4, 4]);
    let d = start(&leases, "d");
    run_for(30, &[&a, &b, &c, &d]).await;
    assert_eq!(sizes(&[&a, &b, &c, &d]), vec![3, 3, 3, 3]);
    assert_eq!(assert_disjoint(&[&a, &b, &c, &d]), 12);
    // The selection of each replica follows its open shards.
    for r in [&a, &b, &c, &d] {
        let want = r.manager.layout().selector(&r.manager.gate().active());
        assert_eq!(
            r.manager.selection().current().selector.as_deref(),
            Some(&want)
        );
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_shards_of_a_dead_replica_are_taken_over_after_their_leases_expire() {
    let leases = FakeLeases::new();
    let (a, b, c) = (
        start(&leases, "a"),
        start(&leases, "b"),
        start(&leases, "c"),
    );
    run_for(30, &[&a, &b, &c]).await;
    // A crash: the task stops, nothing is released.
    c.task.abort();
    let orphaned = c.manager.gate().active();
    assert_eq!(orphaned.len(), 4);
    let killed = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_disjoint(&[&a, &b]);
        if sizes(&[&a, &b]) == vec![6, 6] {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no takeover: {:?}",
            sets(&[&a, &b])
        );
    }
    // Lease duration 4 s, retry period 1 s (+20 % jitter): the takeover waits for the
    // expiry seen on the survivors' clocks.
    assert!(
        killed.elapsed() >= Duration::from_secs(3),
        "took over before the Leases could expire: {:?}",
        killed.elapsed()
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_replica_that_leaves_hands_its_shards_over_at_once() {
    let leases = FakeLeases::new();
    let (a, b) = (start(&leases, "a"), start(&leases, "b"));
    run_for(20, &[&a, &b]).await;
    assert_eq!(sizes(&[&a, &b]), vec![6, 6]);
    b.cancel.cancel();
    b.task.await.unwrap();
    assert!(b.manager.gate().active().is_empty());
    for s in 0..12 {
        let holder = leases
            .record(&format!("test-shard-{s}"))
            .unwrap()
            .holder_identity;
        assert!(
            holder == "a" || holder.is_empty(),
            "shard {s} still held by {holder}"
        );
    }
    let left = tokio::time::Instant::now();
    while sizes(&[&a]) != vec![12] {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Released Leases are free at once: no wait for the 4 s expiry.
    assert!(
        left.elapsed() < Duration::from_secs(4),
        "{:?}",
        left.elapsed()
    );
    assert!(
        b.manager
            .selection()
            .current()
            .selector
            .unwrap()
            .is_nothing()
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_replica_cut_off_from_the_api_server_stops_within_the_renew_deadline() {
    let leases = FakeLeases::new();
    let a = start(&leases, "a");
    run_for(10, &[&a]).await;
    assert_eq!(sizes(&[&a]), vec![12]);
    leases.set_failing(true);
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    assert!(
        a.manager.gate().active().is_empty(),
        "still reconciling without renewed Leases"
    );
    leases.set_failing(false);
    run_for(10, &[&a]).await;
    assert_eq!(sizes(&[&a]), vec![12]);
}

/// The renew deadline is kept to the millisecond, counted from the last write of the Lease,
/// even when every request hangs most of a round before it fails (a loaded API server): the
/// shard closes before another replica may count its Lease expired, whatever the phase of
/// the rounds.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_shard_closes_at_its_renew_deadline_even_when_requests_hang() {
    let leases = FakeLeases::new();
    let a = start(&leases, "a");
    run_for(10, &[&a]).await;
    assert_eq!(sizes(&[&a]), vec![12]);
    leases.set_latency(Duration::from_millis(1_400));
    leases.set_failing(true);
    let deadline = config("a").renew_deadline;
    let step = Duration::from_millis(10);
    let mut closed = BTreeSet::new();
    for _ in 0..1_000 {
        tokio::time::sleep(step).await;
        let open = a.manager.gate().active();
        for s in 0..12u32 {
            if !open.contains(&s) && closed.insert(s) {
                let written = leases.written_at(&format!("test-shard-{s}")).unwrap();
                let late = written.elapsed();
                assert!(
                    late <= deadline + step,
                    "shard {s} closed {late:?} after its Lease was last renewed (renew deadline {deadline:?})"
                );
            }
        }
        if closed.len() == 12 {
            return;
        }
    }
    panic!("shards {closed:?} closed; the others are still open");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_shard_is_released_only_after_its_reconciles_in_flight_finish() {
    let leases = FakeLeases::new();
    let a = start(&leases, "a");
    run_for(10, &[&a]).await;
    let guards: Vec<GateGuard> = (0..12)
        .map(|s| a.manager.gate().enter(s).unwrap())
        .collect();
    let b = start(&leases, "b");
    run_for(20, &[&a, &b]).await;
    // `a` closed half its shards for `b`, but reconciles of every shard are still in
    // flight: no Lease was released, so `b` opened none.
    assert_eq!(sizes(&[&a, &b]), vec![6, 0]);
    for s in 0..12 {
        assert_eq!(
            leases
                .record(&format!("test-shard-{s}"))
                .unwrap()
                .holder_identity,
            "a"
        );
    }
    drop(guards);
    run_for(20, &[&a, &b]).await;
    assert_eq!(sizes(&[&a, &b]), vec![6, 6]);
}

#[test]
fn invalid_configurations_are_refused_with_the_reason() {
    let base = config("a");
    for (bad, words) in [
        (base.clone().shards(0), "shards"),
        (
            base.clone().renew_deadline(Duration::from_secs(5)),
            "renew_deadline",
        ),
        (
            base.clone().retry_period(Duration::from_secs(3)),
            "retry_period",
        ),
        (Config::new("g", "Replica_0"), "lower-case"),
    ] {
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains(words), "{err}");
    }
}

mod filter {
    //! [`ShardFilter`] over an in-memory source that ignores the selector (as a server with
    //! the gate off): the informer holds exactly the selected objects, and follows the
    //! selection when it changes.

    use std::collections::BTreeSet;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_core::{ObjectList, Resource as _};
    use tokio_util::sync::CancellationToken;

    use crate::{
        ListerWatcher, SharedIndexInformer, informer,
        lister_watcher::{Error, ListParams, WatchParams, WatchStream},
        sharding::{Field, Layout, Selection, ShardFilter},
        testing::{FakeSource, config_map},
    };

    /// A source that ignores `shardSelector`, filtered on the client.
    #[derive(Clone)]
    struct Filtered {
        inner: FakeSource<ConfigMap>,
        filter: ShardFilter,
    }

    impl ListerWatcher<ConfigMap> for Filtered {
        async fn list(&self, params: &ListParams) -> Result<ObjectList<ConfigMap>, Error> {
            let sent = self.filter.for_list(params.continue_token.is_some());
            let mut list = self.inner.list(params).await?;
            self.filter.accept_list(&sent, &mut list);
            Ok(list)
        }

        async fn watch(
            &self,
            params: &WatchParams,
            rv: &str,
        ) -> Result<WatchStream<ConfigMap>, Error> {
            let (sent, stale) = self.filter.for_watch(params.send_initial_events);
            let stream = self.inner.watch(params, rv).await?;
            Ok(self.filter.watch(sent, stale, stream))
        }
    }

    fn cm(i: usize) -> ConfigMap {
        let mut cm = config_map(&format!("cm-{i}"));
        // UUID-like: random leading bits (FNV-1a mixes a string's last bytes into its high
        // bits poorly, so `uid-0`, `uid-1`, … would all land in one shard).
        let x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        cm.metadata.uid = Some(format!("{x:016x}-{i}"));
        cm
    }

    /// Waits up to 400 polls of 10 ms for `ok`.
    async fn eventually(what: &str, ok: impl FnMut() -> bool) {
        let what = format!("timed out waiting for {what}");
        crate::test_support::eventually_tries(&what, 400, ok).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_informer_holds_exactly_the_selected_shards_and_follows_changes() {
        follows_the_selection(true).await;
        follows_the_selection(false).await;
    }

    async fn follows_the_selection(streaming: bool) {
        let layout = Layout::new(3, Field::Uid);
        let source = FakeSource::<ConfigMap>::new();
        for i in 0..60 {
            source.upsert(cm(i));
        }
        let selection = Selection::new(Some(layout.selector(&BTreeSet::from([0]))));
        let lw = Filtered {
            inner: source.clone(),
            filter: ShardFilter::new(selection.clone()),
        };
        let mut config = informer::Config::default();
        config.reflector = config.reflector.initial_list(if streaming {
            crate::reflector::InitialList::Stream
        } else {
            crate::reflector::InitialList::List
        });
        let informer = SharedIndexInformer::new(lw, config);
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (i, c) = (informer.clone(), cancel.clone());
            async move { i.run(c).await }
        });
        informer.wait_for_sync().await;
        let in_shards = |shards: &[u32]| {
            let mut want: Vec<String> = source
                .objects()
                .iter()
                .filter(|o| shards.contains(&layout.shard_of(o.meta())))
                .map(|o| o.metadata.name.clone().unwrap())
                .collect();
            want.sort();
            want
        };
        let held = || {
            let mut names: Vec<String> = informer
                .indexer()
                .list()
                .iter()
                .map(|o| o.metadata.name.clone().unwrap())
                .collect();
            names.sort();
            names
        };
        assert_eq!(held(), in_shards(&[0]));
        assert!(!held().is_empty() && held().len() < 60);
        assert_eq!(
            selection.lists_applied(),
            0,
            "the fake never echoes shardInfo"
        );
        assert_eq!(selection.lists_ignored(), u64::from(!streaming));

        // Watch events of other shards are dropped; of this shard, kept.
        for i in 60..90 {
            source.upsert(cm(i));
        }
        eventually("the new objects of shard 0", || held() == in_shards(&[0])).await;

        // A new selection: the watch ends, the reflector relists with it.
        selection.set(Some(layout.selector(&BTreeSet::from([1, 2]))));
        eventually("shards 1 and 2 only", || held() == in_shards(&[1, 2])).await;
        selection.set(Some(layout.selector(&BTreeSet::new())));
        eventually("nothing", || held().is_empty()).await;
        assert!(selection.objects_dropped() > 0);
        cancel.cancel();
        task.await.unwrap();
    }
}
