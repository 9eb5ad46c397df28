//! client-go v0.36.5's `delta_fifo_test.go, fifo_test.go`, ported one for one (see `README.md` in
//! this folder).
//!
//! Go's `NewDeltaFIFOWithOptions(DeltaFIFOOptions{..})` is kcache's [`DeltaFifo`]. Go's
//! options default to emitting `Sync` for relisted objects (`EmitDeltaTypeReplaced: false`),
//! while [`DeltaFifoConfig::default`] emits `Replaced` (what informers use in both): every port
//! therefore sets `emit_replaced` to what the Go test uses.
//!
//! kcache has no legacy `FIFO` (Go's `fifo.go`: one latest object per key, in first-added
//! order). Its tests are ported on a [`DeltaFifo`] without known objects, which keeps the same
//! contract for everything they observe: one entry per key in first-added order, a re-added key
//! keeps its place, and the newest delta of a popped entry is the object the FIFO would have
//! stored. They are the `fifo_*` tests at the end.
//!
//! Go table tests run with `t.Run` become one module per Go test with one `#[tokio::test]` per
//! subtest; unnamed table cases stay inside one test.

use std::{sync::Arc, time::Duration};

use kcache::{
    fifo::{Delta, DeltaFifo, DeltaFifoConfig, DeltaObject, DeltaType, Error, Fifo},
    reflector::ReflectorStore,
    store::ObjectKey,
};
use tokio::{sync::mpsc, task::JoinHandle, time::timeout};

#[path = "../support/fifo_objects.rs"]
mod fifo_objects;
use fifo_objects::{Literal, TestObj, Val, key_func, mk, mk_uint};
/// Go's `NewDeltaFIFOWithOptions(DeltaFIFOOptions{KeyFunction, KnownObjects,
/// EmitDeltaTypeReplaced})`; `None` is no `KnownObjects`.
fn new_delta_fifo(known: Option<&[Arc<TestObj>]>, emit_replaced: bool) -> DeltaFifo<TestObj> {
    DeltaFifo::new(key_func(), {
        let config = DeltaFifoConfig::default().emit_replaced(emit_replaced);
        match known {
            Some(objs) => config.known_objects(Arc::new(Literal(objs.to_vec()))),
            None => config,
        }
    })
}

/// Go's `NewDeltaFIFOWithOptions(DeltaFIFOOptions{KeyFunction: testFifoObjectKeyFunc})`
/// (also what the legacy `FIFO` tests run on).
fn plain() -> DeltaFifo<TestObj> {
    new_delta_fifo(None, false)
}

/// With `KnownObjects`, emitting `Sync` on relists (Go's default).
fn with_known(known: &[Arc<TestObj>]) -> DeltaFifo<TestObj> {
    new_delta_fifo(Some(known), false)
}

// ---------------------------------------------------------------------------------------------
// Deltas in a comparable form.

/// A delta as the tests compare it (Go compares `Delta{Type, Object}` with `reflect.DeepEqual`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// `Delta{kind, obj}`.
    Obj(DeltaType, TestObj),
    /// `Delta{Deleted, DeletedFinalStateUnknown{Key, Obj}}`.
    Tombstone(String, TestObj),
}

fn d(kind: DeltaType, obj: &Arc<TestObj>) -> Seen {
    Seen::Obj(kind, (**obj).clone())
}

fn tombstone(key: &str, obj: &Arc<TestObj>) -> Seen {
    Seen::Tombstone(key.to_owned(), (**obj).clone())
}

fn seen(delta: &Delta<TestObj>) -> Seen {
    match &delta.object {
        DeltaObject::Object { key, obj } => {
            assert_eq!(key.as_str(), obj.name, "a delta's key is its object's key");
            Seen::Obj(delta.kind, (**obj).clone())
        }
        DeltaObject::DeletedFinalStateUnknown { key, obj } => {
            assert_eq!(delta.kind, DeltaType::Deleted, "a tombstone is a deletion");
            Seen::Tombstone(key.to_string(), (**obj).clone())
        }
        other => panic!("a DeltaFifo never queues {other:?}"),
    }
}

fn seen_all(deltas: &[Delta<TestObj>]) -> Vec<Seen> {
    deltas.iter().map(seen).collect()
}

/// The newest delta's object, as Go's `testPop(f).val` reads it (`Newest().Object` must be a
/// plain object, not a tombstone).
fn newest_obj(deltas: &[Seen]) -> TestObj {
    match deltas.last() {
        Some(Seen::Obj(_, obj)) => obj.clone(),
        other => panic!("expected the newest delta to carry a plain object, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Inspecting and popping, always bounded.

/// Generous bound on any wait; under paused time a stuck wait fails at once.
const WAIT: Duration = Duration::from_secs(30);

/// Go's `Pop(f)` / `pop2`: all deltas of the oldest key, with `isInInitialList`.
async fn pop(fifo: &DeltaFifo<TestObj>) -> (Vec<Seen>, bool) {
    timeout(
        WAIT,
        fifo.pop(|deltas, initial| (seen_all(&deltas), initial)),
    )
    .await
    .expect("pop did not return in time")
    .expect("pop found the queue closed")
}

/// Go's test-only `list()`: the newest object of every queued key, in queue order.
fn list(fifo: &DeltaFifo<TestObj>) -> Vec<TestObj> {
    fifo.list_keys()
        .iter()
        .map(|key| {
            let deltas = fifo
                .get_by_key(key.as_str())
                .expect("a queued key has deltas");
            newest_obj(&seen_all(&deltas))
        })
        .collect()
}

/// Go's test-only `listKeys()`.
fn list_keys(fifo: &DeltaFifo<TestObj>) -> Vec<String> {
    fifo.list_keys().iter().map(ToString::to_string).collect()
}

/// Go's `f.items[key]`: the deltas queued for `key` (empty when none).
fn items(fifo: &DeltaFifo<TestObj>, key: &str) -> Vec<Seen> {
    fifo.get_by_key(key)
        .map(|deltas| seen_all(&deltas))
        .unwrap_or_default()
}

/// A task popping until the queue is closed and drained, sending each popped entry's deltas
/// (Go: the `got` channel of the background `Pop` loops).
fn spawn_popper(fifo: &DeltaFifo<TestObj>) -> (mpsc::UnboundedReceiver<Vec<Seen>>, JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let fifo = fifo.clone();
    let task = tokio::spawn(async move {
        while let Ok(popped) = fifo.pop(|deltas, _| seen_all(&deltas)).await {
            if tx.send(popped).is_err() {
                return;
            }
        }
    });
    (rx, task)
}

async fn recv(rx: &mut mpsc::UnboundedReceiver<Vec<Seen>>) -> Vec<Seen> {
    timeout(WAIT, rx.recv())
        .await
        .expect("nothing popped in time")
        .expect("the popper stopped")
}

/// Go's `select { case <-got: t.Errorf(..); case <-time.After(50ms): }`. Under paused time the
/// clock only advances once every task is idle, so the popper has certainly blocked on the
/// empty queue when this returns.
async fn assert_nothing_more(rx: &mut mpsc::UnboundedReceiver<Vec<Seen>>) {
    if let Ok(unexpected) = timeout(Duration::from_millis(50), rx.recv()).await {
        panic!("got an unexpected further pop: {unexpected:?}");
    }
}

async fn close_and_join(fifo: &DeltaFifo<TestObj>, task: JoinHandle<()>) {
    fifo.close();
    timeout(WAIT, task)
        .await
        .expect("the popper did not stop after close")
        .expect("the popper panicked");
}

fn val(v: i64) -> Val {
    Val::Int(v)
}

/// Go's `TestDeltaFIFO_basic` and `TestFIFO_basic`: two producers on their own threads (real
/// concurrency, hence real time for the bound), distinct keys, each producer's objects popped
/// in the order it added them.
async fn two_producers_pop_in_order(fifo: DeltaFifo<TestObj>) {
    const AMOUNT: u32 = 500;
    let ints = std::thread::spawn({
        let fifo = fifo.clone();
        move || {
            for i in 0..AMOUNT {
                let name = format!("a{}", char::from_u32(i).unwrap());
                fifo.add(mk(&name, i64::from(i) + 1)).unwrap();
            }
        }
    });
    let uints = std::thread::spawn({
        let fifo = fifo.clone();
        move || {
            for u in 0..AMOUNT {
                let name = format!("b{}", char::from_u32(u).unwrap());
                fifo.add(mk_uint(&name, u64::from(u) + 1)).unwrap();
            }
        }
    });

    let mut last_int = 0;
    let mut last_uint = 0;
    for _ in 0..AMOUNT * 2 {
        match newest_obj(&pop(&fifo).await.0).val {
            Val::Int(v) => {
                assert!(
                    v > last_int,
                    "got {v} (int) out of order, last was {last_int}"
                );
                last_int = v;
            }
            Val::Uint(v) => {
                assert!(
                    v > last_uint,
                    "got {v} (uint) out of order, last was {last_uint}"
                );
                last_uint = v;
            }
            other => panic!("unexpected value {other:?}"),
        }
    }
    ints.join().unwrap();
    uints.join().unwrap();
}

/// Go's `TestDeltaFIFO_PopShouldUnblockWhenClosed` and `TestFIFO_PopShouldUnblockWhenClosed`:
/// ten pops blocked on the empty queue all return once it is closed.
async fn blocked_pops_unblock_on_close(fifo: DeltaFifo<TestObj>) {
    const JOBS: usize = 10;
    let poppers: Vec<_> = (0..JOBS)
        .map(|_| {
            let fifo = fifo.clone();
            tokio::spawn(async move { fifo.pop(|_, _| ()).await })
        })
        .collect();

    tokio::task::yield_now().await;
    fifo.close();

    for popper in poppers {
        let result = timeout(WAIT, popper)
            .await
            .expect("timed out waiting for pop to return after close")
            .unwrap();
        assert_eq!(result, Err(Error::Closed));
    }
}

/// One step of a `HasSynced` table case.
enum Action {
    Add(Arc<TestObj>),
    Replace(Vec<Arc<TestObj>>),
    Pop,
}

/// Go's `TestDeltaFIFO_HasSynced` and `TestFIFO_HasSynced`: each case on a fresh queue.
async fn check_has_synced(cases: Vec<(Vec<Action>, bool)>) {
    for (i, (actions, expected)) in cases.into_iter().enumerate() {
        let fifo = plain();
        for action in actions {
            match action {
                Action::Add(obj) => fifo.add(obj).unwrap(),
                Action::Replace(list) => fifo.replace(list, "0".into()).unwrap(),
                Action::Pop => {
                    pop(&fifo).await;
                }
            }
        }
        assert_eq!(fifo.has_synced(), expected, "case {i}");
    }
}

/// Go's `TestDeltaFIFO_detectLineJumpers` and `TestFIFO_detectLineJumpers`.
async fn a_requeued_key_does_not_jump_the_line(fifo: DeltaFifo<TestObj>) {
    fifo.add(mk("foo", 10)).unwrap();
    fifo.add(mk("bar", 1)).unwrap();
    fifo.add(mk("foo", 11)).unwrap();
    fifo.add(mk("foo", 13)).unwrap();
    fifo.add(mk("zab", 30)).unwrap();

    assert_eq!(newest_obj(&pop(&fifo).await.0).val, val(13));

    fifo.add(mk("foo", 14)).unwrap(); // "foo" does not jump back in line

    for expect in [1, 30, 14] {
        assert_eq!(newest_obj(&pop(&fifo).await.0).val, val(expect));
    }
}

mod deltas;
mod fifo;
