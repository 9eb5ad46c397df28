//! Unit tests of [`DeltaFifo`].

use std::sync::Arc;

use super::*;
use crate::fifo::test_util::{Obj, key_func, known, obj, render_all};

fn plain() -> DeltaFifo<Obj> {
    DeltaFifo::new(key_func(), DeltaFifoConfig::default())
}

fn with_known(known_objs: &[(&str, u64)], emit_replaced: bool) -> DeltaFifo<Obj> {
    DeltaFifo::new(
        key_func(),
        DeltaFifoConfig {
            known_objects: Some(Arc::new(known(known_objs))),
            emit_replaced,
        },
    )
}

/// The queue as `(key, rendered deltas)` in FIFO order.
fn queued(fifo: &DeltaFifo<Obj>) -> Vec<(String, Vec<String>)> {
    fifo.list_keys()
        .into_iter()
        .map(|key| {
            let deltas = fifo.get_by_key(key.as_str()).unwrap();
            (key.to_string(), render_all(&deltas))
        })
        .collect()
}

fn entry(key: &str, deltas: &[&str]) -> (String, Vec<String>) {
    (
        key.to_owned(),
        deltas.iter().map(|s| s.to_string()).collect(),
    )
}

async fn pop(fifo: &DeltaFifo<Obj>) -> (Vec<String>, bool) {
    fifo.pop_batch(|deltas, initial| (render_all(&deltas), initial))
        .await
        .unwrap()
}

#[tokio::test]
async fn deltas_accumulate_per_key_oldest_first_and_keys_pop_in_fifo_order() {
    let fifo = plain();
    fifo.add(obj("a", 1)).unwrap();
    fifo.add(obj("b", 1)).unwrap();
    fifo.update(obj("a", 2)).unwrap();
    assert_eq!(fifo.len(), 2);
    assert_eq!(pop(&fifo).await.0, ["Added a@1", "Updated a@2"]);
    assert_eq!(pop(&fifo).await.0, ["Added b@1"]);
    assert!(fifo.is_empty());
}

#[tokio::test]
async fn a_re_added_key_keeps_its_place_in_the_queue() {
    let fifo = plain();
    fifo.add(obj("a", 1)).unwrap();
    fifo.add(obj("b", 1)).unwrap();
    fifo.add(obj("c", 1)).unwrap();
    fifo.update(obj("a", 2)).unwrap();
    fifo.update(obj("b", 2)).unwrap();
    assert_eq!(
        queued(&fifo),
        [
            entry("a", &["Added a@1", "Updated a@2"]),
            entry("b", &["Added b@1", "Updated b@2"]),
            entry("c", &["Added c@1"]),
        ]
    );
    // Once popped, the key goes to the back when it comes again.
    pop(&fifo).await;
    fifo.update(obj("a", 3)).unwrap();
    assert_eq!(fifo.list_keys().last().unwrap().as_str(), "a");
}

#[tokio::test]
async fn two_consecutive_deletions_collapse_and_the_real_object_wins_over_a_tombstone() {
    // Real deletion first, then a tombstone from a relist: the real one stays.
    let fifo = with_known(&[], true);
    fifo.add(obj("a", 1)).unwrap();
    fifo.delete(obj("a", 2)).unwrap();
    fifo.replace(vec![], "1".into()).unwrap();
    assert_eq!(queued(&fifo), [entry("a", &["Added a@1", "Deleted a@2"])]);

    // Tombstone first, then a real deletion: the real one replaces it.
    let fifo = with_known(&[("b", 1)], true);
    fifo.replace(vec![], "1".into()).unwrap();
    fifo.delete(obj("b", 5)).unwrap();
    assert_eq!(queued(&fifo), [entry("b", &["Deleted b@5"])]);

    // Two real deletions: the older one stays.
    let fifo = plain();
    fifo.add(obj("c", 1)).unwrap();
    fifo.delete(obj("c", 2)).unwrap();
    fifo.delete(obj("c", 3)).unwrap();
    assert_eq!(queued(&fifo), [entry("c", &["Added c@1", "Deleted c@2"])]);
}

#[tokio::test]
async fn deleting_a_key_neither_queued_nor_known_is_ignored() {
    let fifo = with_known(&[("known", 1)], true);
    fifo.delete(obj("stranger", 1)).unwrap();
    fifo.delete(obj("known", 1)).unwrap();
    assert_eq!(queued(&fifo), [entry("known", &["Deleted known@1"])]);
    let fifo = plain();
    fifo.delete(obj("stranger", 1)).unwrap();
    assert!(fifo.is_empty());
}

#[tokio::test]
async fn replace_emits_replaced_then_tombstones_for_queued_then_known_keys() {
    let fifo = with_known(&[("k2", 1), ("k1", 1), ("listed", 1), ("q", 1)], true);
    fifo.update(obj("q", 2)).unwrap();
    fifo.replace(vec![obj("listed", 2), obj("new", 1)], "9".into())
        .unwrap();
    assert_eq!(
        queued(&fifo),
        [
            entry("q", &["Updated q@2", "Deleted! q@2"]),
            entry("listed", &["Replaced listed@2"]),
            entry("new", &["Replaced new@1"]),
            entry("k1", &["Deleted! k1@1"]),
            entry("k2", &["Deleted! k2@1"]),
        ]
    );
}

#[tokio::test]
async fn replace_tombstone_of_a_queued_tombstone_keeps_its_last_known_state() {
    let fifo = with_known(&[("a", 4)], true);
    fifo.replace(vec![], "1".into()).unwrap();
    fifo.replace(vec![], "2".into()).unwrap();
    assert_eq!(queued(&fifo), [entry("a", &["Deleted! a@4"])]);
}

#[tokio::test]
async fn legacy_replace_emits_sync_instead_of_replaced() {
    let fifo = with_known(&[], false);
    fifo.replace(vec![obj("a", 1)], "1".into()).unwrap();
    assert_eq!(queued(&fifo), [entry("a", &["Sync a@1"])]);
}

#[tokio::test]
async fn resync_queues_sync_only_for_known_keys_with_nothing_queued() {
    let fifo = with_known(&[("b", 1), ("a", 1), ("busy", 1)], true);
    fifo.update(obj("busy", 2)).unwrap();
    fifo.resync().unwrap();
    assert_eq!(
        queued(&fifo),
        [
            entry("busy", &["Updated busy@2"]),
            entry("a", &["Sync a@1"]),
            entry("b", &["Sync b@1"]),
        ]
    );
    // Without known objects, resync has nothing to do.
    let fifo = plain();
    fifo.resync().unwrap();
    assert!(fifo.is_empty());
}

#[tokio::test]
async fn has_synced_after_the_initial_replace_is_popped_and_processed() {
    let fifo = with_known(&[("gone", 1)], true);
    fifo.replace(vec![obj("a", 1)], "1".into()).unwrap();
    fifo.add(obj("b", 1)).unwrap();
    assert!(!fifo.has_synced());
    assert_eq!(pop(&fifo).await, (vec!["Replaced a@1".to_owned()], true));
    assert!(!fifo.has_synced());
    let probe = fifo.clone();
    let (inside, initial) = fifo
        .pop_batch(move |_, initial| (probe.has_synced(), initial))
        .await
        .unwrap();
    assert!(initial && !inside);
    assert!(fifo.has_synced());
    assert_eq!(pop(&fifo).await, (vec!["Added b@1".to_owned()], false));

    let fifo = plain();
    fifo.update(obj("a", 1)).unwrap();
    assert!(fifo.has_synced());
}

#[tokio::test(start_paused = true)]
async fn pop_blocks_while_empty_then_close_wakes_it_with_an_error() {
    let fifo = plain();
    let popper = tokio::spawn({
        let fifo = fifo.clone();
        async move { fifo.pop(|d, _| render_all(&d)).await }
    });
    tokio::task::yield_now().await;
    assert!(!popper.is_finished());
    fifo.add(obj("a", 1)).unwrap();
    assert_eq!(popper.await.unwrap().unwrap(), ["Added a@1"]);

    let popper = tokio::spawn({
        let fifo = fifo.clone();
        async move { fifo.pop(|_, _| ()).await }
    });
    tokio::task::yield_now().await;
    assert!(!popper.is_finished());
    fifo.close();
    assert_eq!(popper.await.unwrap(), Err(Error::Closed));
}

#[tokio::test]
async fn pop_drains_after_close_and_writes_fail() {
    let fifo = with_known(&[("k", 1)], true);
    fifo.add(obj("a", 1)).unwrap();
    fifo.close();
    assert!(matches!(fifo.add(obj("b", 1)), Err(StoreError::Closed)));
    assert!(matches!(fifo.delete(obj("k", 1)), Err(StoreError::Closed)));
    assert!(matches!(
        fifo.replace(vec![], "1".into()),
        Err(StoreError::Closed)
    ));
    assert!(matches!(fifo.resync(), Err(StoreError::Closed)));
    assert!(matches!(fifo.bookmark("2"), Err(StoreError::Closed)));
    assert_eq!(pop(&fifo).await.0, ["Added a@1"]);
    assert_eq!(fifo.pop(|_, _| ()).await, Err(Error::Closed));
}

#[tokio::test]
async fn failing_key_func_returns_an_error_and_changes_nothing() {
    let fifo = with_known(&[("k", 1)], true);
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
        fifo.replace(vec![obj("b", 1), nameless], "1".into()),
        Err(StoreError::Key(_))
    ));
    assert_eq!(queued(&fifo), [entry("a", &["Added a@1"])]);
}

#[tokio::test]
async fn delta_fifo_holds_its_lock_while_processing() {
    let fifo = plain();
    fifo.add(obj("a", 1)).unwrap();
    let probe = fifo.clone();
    let locked = fifo
        .pop(move |_, _| probe.inner.core.state.is_locked())
        .await
        .unwrap();
    assert!(locked);
}
