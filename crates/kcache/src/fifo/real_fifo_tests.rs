//! Unit tests of [`RealFifo`].

use std::sync::Arc;

use super::*;
use crate::fifo::test_util::{Obj, key_func, known, obj, render_all};

type Batch = (Vec<String>, bool);

fn atomic() -> RealFifo<Obj> {
    RealFifo::atomic(key_func())
}

fn non_atomic(known_objs: &[(&str, u64)]) -> RealFifo<Obj> {
    RealFifo::non_atomic(key_func(), Arc::new(known(known_objs)))
}

fn queued(fifo: &RealFifo<Obj>) -> Vec<String> {
    render_all(&fifo.inner.core.state.lock().items.iter().cloned().collect())
}

async fn pop_batch(fifo: &RealFifo<Obj>) -> Batch {
    fifo.pop_batch(|deltas, initial| (render_all(&deltas), initial))
        .await
        .unwrap()
}

async fn drain(fifo: &RealFifo<Obj>) -> Vec<Batch> {
    let mut batches = Vec::new();
    while !fifo.is_empty() {
        batches.push(pop_batch(fifo).await);
    }
    batches
}

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn every_add_update_delete_is_appended_in_order_and_nothing_is_merged() {
    let fifo = atomic();
    fifo.add(obj("a", 1)).unwrap();
    fifo.update(obj("a", 2)).unwrap();
    fifo.update(obj("a", 3)).unwrap();
    fifo.delete(obj("a", 3)).unwrap();
    fifo.delete(obj("a", 3)).unwrap();
    fifo.add(obj("b", 1)).unwrap();
    assert_eq!(fifo.len(), 6);
    assert_eq!(
        queued(&fifo),
        [
            "Added a@1",
            "Updated a@2",
            "Updated a@3",
            "Deleted a@3",
            "Deleted a@3",
            "Added b@1"
        ]
    );
}

#[tokio::test]
async fn non_atomic_replace_tombstones_queued_keys_first_then_known_keys_then_replaced() {
    let fifo = non_atomic(&[("k2", 1), ("k1", 1), ("listed", 1), ("q", 1)]);
    fifo.add(obj("q", 2)).unwrap();
    fifo.update(obj("z", 5)).unwrap();
    fifo.update(obj("q", 3)).unwrap();
    fifo.replace(vec![obj("listed", 2), obj("new", 1)], "9".into())
        .unwrap();
    assert_eq!(
        queued(&fifo),
        [
            "Added q@2",
            "Updated z@5",
            "Updated q@3",
            // queued keys, in order of first appearance, with their last queued state
            "Deleted! q@3",
            "Deleted! z@5",
            // known keys that are neither listed nor queued, sorted
            "Deleted! k1@1",
            "Deleted! k2@1",
            // then every listed object, in list order
            "Replaced listed@2",
            "Replaced new@1",
        ]
    );
}

#[tokio::test]
async fn non_atomic_replace_adds_no_tombstone_for_a_key_whose_last_queued_delta_is_a_deletion() {
    let fifo = non_atomic(&[("a", 1)]);
    fifo.update(obj("a", 2)).unwrap();
    fifo.delete(obj("a", 2)).unwrap();
    fifo.replace(vec![], "9".into()).unwrap();
    // "a" is queued (so not tombstoned as a known key) and already deleted.
    assert_eq!(queued(&fifo), ["Updated a@2", "Deleted a@2"]);
}

#[tokio::test]
async fn atomic_replace_appends_one_replaced_all_with_the_objects_and_resource_version() {
    let fifo = atomic();
    fifo.add(obj("x", 1)).unwrap();
    fifo.replace(vec![obj("a", 1), obj("b", 2)], "77".into())
        .unwrap();
    assert_eq!(queued(&fifo), ["Added x@1", "ReplacedAll[a@1 b@2]@77"]);
}

#[tokio::test]
async fn atomic_resync_appends_one_sync_all() {
    let fifo = atomic();
    fifo.resync().unwrap();
    assert_eq!(queued(&fifo), ["SyncAll"]);
}

#[tokio::test]
async fn non_atomic_resync_syncs_only_known_keys_with_nothing_queued() {
    let fifo = non_atomic(&[("b", 1), ("a", 1), ("busy", 1)]);
    fifo.update(obj("busy", 2)).unwrap();
    fifo.resync().unwrap();
    assert_eq!(queued(&fifo), ["Updated busy@2", "Sync a@1", "Sync b@1"]);
}

#[tokio::test]
async fn bookmark_appends_a_bookmark_delta_only_when_atomic_with_bookmarks() {
    let fifo = atomic();
    fifo.bookmark("5").unwrap();
    assert_eq!(queued(&fifo), ["Bookmark@5"]);

    let quiet = RealFifo::new(
        key_func(),
        RealFifoConfig {
            mode: RealFifoMode::Atomic {
                unlock_while_processing: true,
                emit_bookmarks: false,
            },
            batch_size: 10,
        },
    );
    quiet.bookmark("5").unwrap();
    assert!(quiet.is_empty());
    let legacy = non_atomic(&[]);
    legacy.bookmark("5").unwrap();
    assert!(legacy.is_empty());
}

#[tokio::test]
async fn pop_batch_takes_consecutive_distinct_keys_up_to_the_batch_size() {
    let fifo = RealFifo::new(key_func(), RealFifoConfig::default().batch_size(3));
    fifo.add(obj("a", 1)).unwrap();
    fifo.add(obj("b", 1)).unwrap();
    fifo.delete(obj("c", 1)).unwrap();
    fifo.add(obj("d", 1)).unwrap();
    let batches = drain(&fifo).await;
    assert_eq!(
        batches,
        [
            (strings(&["Added a@1", "Added b@1", "Deleted c@1"]), false),
            (strings(&["Added d@1"]), false)
        ]
    );
}

#[tokio::test]
async fn pop_batch_closes_a_batch_before_a_repeated_key() {
    let fifo = atomic();
    fifo.add(obj("a", 1)).unwrap();
    fifo.add(obj("b", 1)).unwrap();
    fifo.update(obj("a", 2)).unwrap();
    fifo.add(obj("c", 1)).unwrap();
    let batches = drain(&fifo).await;
    assert_eq!(
        batches,
        [
            (strings(&["Added a@1", "Added b@1"]), false),
            (strings(&["Updated a@2", "Added c@1"]), false)
        ]
    );
}

#[tokio::test]
async fn pop_batch_never_crosses_the_initial_list_boundary() {
    let fifo = non_atomic(&[]);
    fifo.replace(vec![obj("a", 1), obj("b", 1)], "1".into())
        .unwrap();
    fifo.add(obj("c", 1)).unwrap();
    let batches = drain(&fifo).await;
    assert_eq!(
        batches,
        [
            (strings(&["Replaced a@1", "Replaced b@1"]), true),
            (strings(&["Added c@1"]), false)
        ]
    );
}

#[tokio::test]
async fn non_batchable_deltas_are_popped_alone() {
    let fifo = atomic();
    fifo.add(obj("a", 1)).unwrap();
    fifo.bookmark("2").unwrap();
    fifo.add(obj("b", 1)).unwrap();
    fifo.resync().unwrap();
    fifo.replace(vec![obj("c", 1)], "3".into()).unwrap();
    fifo.add(obj("d", 1)).unwrap();
    let batches: Vec<Vec<String>> = drain(&fifo).await.into_iter().map(|b| b.0).collect();
    assert_eq!(
        batches,
        [
            strings(&["Added a@1"]),
            strings(&["Bookmark@2"]),
            strings(&["Added b@1"]),
            strings(&["SyncAll"]),
            strings(&["ReplacedAll[c@1]@3"]),
            strings(&["Added d@1"]),
        ]
    );
}

#[tokio::test]
async fn pop_takes_exactly_one_delta() {
    let fifo = atomic();
    fifo.add(obj("a", 1)).unwrap();
    fifo.add(obj("b", 1)).unwrap();
    let first = fifo.pop(|d, _| render_all(&d)).await.unwrap();
    assert_eq!(first, ["Added a@1"]);
    assert_eq!(fifo.len(), 1);
}

#[tokio::test]
async fn has_synced_turns_true_only_after_the_initial_list_is_popped_and_processed() {
    let fifo = atomic();
    assert!(!fifo.has_synced());
    fifo.replace(vec![obj("a", 1)], "1".into()).unwrap();
    fifo.add(obj("b", 1)).unwrap();
    assert!(!fifo.has_synced());
    let probe = fifo.clone();
    let (seen_inside, initial) = fifo
        .pop_batch(move |_, initial| (probe.has_synced(), initial))
        .await
        .unwrap();
    assert!(initial);
    assert!(
        !seen_inside,
        "not synced while the initial list is still being processed"
    );
    assert!(fifo.has_synced());
    let (_, initial) = pop_batch(&fifo).await;
    assert!(!initial);
}

#[tokio::test]
async fn has_synced_counts_every_delta_of_a_non_atomic_initial_replace() {
    let fifo = RealFifo::new(
        key_func(),
        RealFifoConfig::non_atomic(Arc::new(known(&[("gone", 1)]))).batch_size(2),
    );
    fifo.replace(vec![obj("a", 1), obj("b", 1)], "1".into())
        .unwrap();
    // "Deleted! gone", "Replaced a", "Replaced b": two batches of initial deltas.
    assert!(pop_batch(&fifo).await.1);
    assert!(!fifo.has_synced());
    assert_eq!(pop_batch(&fifo).await, (strings(&["Replaced b@1"]), true));
    assert!(fifo.has_synced());
}

#[tokio::test]
async fn has_synced_at_once_when_a_write_or_an_empty_list_comes_first() {
    let fifo = atomic();
    fifo.add(obj("a", 1)).unwrap();
    assert!(fifo.has_synced());
    let fifo = non_atomic(&[]);
    fifo.replace(vec![], "1".into()).unwrap();
    assert!(fifo.has_synced());
}

#[tokio::test(start_paused = true)]
async fn pop_blocks_while_empty_and_wakes_on_add() {
    let fifo = atomic();
    let popper = tokio::spawn({
        let fifo = fifo.clone();
        async move { fifo.pop_batch(|d, _| render_all(&d)).await }
    });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!popper.is_finished());
    fifo.add(obj("a", 1)).unwrap();
    assert_eq!(popper.await.unwrap().unwrap(), ["Added a@1"]);
}

#[tokio::test(start_paused = true)]
async fn close_wakes_a_blocked_pop_with_an_error() {
    let fifo = atomic();
    let popper = tokio::spawn({
        let fifo = fifo.clone();
        async move { fifo.pop_batch(|_, _| ()).await }
    });
    tokio::task::yield_now().await;
    assert!(!popper.is_finished());
    fifo.close();
    assert_eq!(popper.await.unwrap(), Err(Error::Closed));
}

#[tokio::test]
async fn pop_drains_what_was_queued_before_close_then_errors() {
    let fifo = atomic();
    fifo.add(obj("a", 1)).unwrap();
    fifo.add(obj("a", 2)).unwrap();
    fifo.close();
    assert!(fifo.is_closed());
    assert_eq!(pop_batch(&fifo).await.0, ["Added a@1"]);
    assert_eq!(pop_batch(&fifo).await.0, ["Added a@2"]);
    assert_eq!(fifo.pop_batch(|_, _| ()).await, Err(Error::Closed));
    assert_eq!(fifo.pop(|_, _| ()).await, Err(Error::Closed));
}

#[tokio::test]
async fn writes_after_close_return_closed_and_change_nothing() {
    for fifo in [atomic(), non_atomic(&[("k", 1)])] {
        fifo.close();
        assert!(matches!(fifo.add(obj("a", 1)), Err(StoreError::Closed)));
        assert!(matches!(fifo.update(obj("a", 1)), Err(StoreError::Closed)));
        assert!(matches!(fifo.delete(obj("a", 1)), Err(StoreError::Closed)));
        assert!(matches!(
            fifo.replace(vec![obj("a", 1)], "1".into()),
            Err(StoreError::Closed)
        ));
        assert!(matches!(fifo.resync(), Err(StoreError::Closed)));
        assert!(matches!(fifo.bookmark("1"), Err(StoreError::Closed)));
        assert!(fifo.is_empty());
    }
}

#[tokio::test]
async fn failing_key_func_returns_an_error_and_changes_nothing() {
    for fifo in [atomic(), non_atomic(&[("k", 1)])] {
        fifo.add(obj("a", 1)).unwrap();
        let nameless = obj("", 1);
        assert!(matches!(
            fifo.add(nameless.clone()),
            Err(StoreError::Key(_))
        ));
        assert!(matches!(
            fifo.delete(nameless.clone()),
            Err(StoreError::Key(_))
        ));
        assert!(matches!(
            fifo.replace(vec![obj("b", 1), nameless], "2".into()),
            Err(StoreError::Key(_))
        ));
        assert_eq!(queued(&fifo), ["Added a@1"]);
    }
}

#[tokio::test]
async fn lock_is_released_while_processing_unless_backpressure_applies() {
    let fifo = RealFifo::new(key_func(), RealFifoConfig::default().batch_size(2));
    fifo.add(obj("a", 1)).unwrap();
    // One left after the pop: below 2 × batch size, so producers may append meanwhile.
    fifo.add(obj("b", 1)).unwrap();
    fifo.add(obj("b", 2)).unwrap();
    let probe = fifo.clone();
    let locked = fifo
        .pop_batch(move |_, _| {
            probe.add(obj("during", 1)).unwrap();
            probe.inner.core.state.is_locked()
        })
        .await
        .unwrap();
    assert!(!locked);
    assert_eq!(queued(&fifo), ["Added b@2", "Added during@1"]);

    // With 4 = 2 × batch size still queued after the pop, the lock is held as backpressure.
    for v in 0..6 {
        fifo.add(obj("x", v)).unwrap();
    }
    let probe = fifo.clone();
    let locked = fifo
        .pop_batch(move |_, _| probe.inner.core.state.is_locked())
        .await
        .unwrap();
    assert!(locked);
}

#[tokio::test]
async fn non_atomic_queue_holds_its_lock_while_processing() {
    let fifo = non_atomic(&[]);
    fifo.add(obj("a", 1)).unwrap();
    let probe = fifo.clone();
    let locked = fifo
        .pop_batch(move |_, _| probe.inner.core.state.is_locked())
        .await
        .unwrap();
    assert!(locked);
}

#[test]
fn real_fifo_and_its_pop_future_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    fn assert_send<T: Send>(_: &T) {}
    let fifo = atomic();
    assert_send_sync(&fifo);
    let fut = fifo.pop_batch(|_, _| ());
    assert_send(&fut);
}
