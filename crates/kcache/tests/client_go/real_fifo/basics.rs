//! `the_real_fifo_test.go`'s queueing tests: adds, updates, replaces, resyncs, deletions, key
//! functions and has-synced.

use super::*;

// ---------------------------------------------------------------------------------------------
// The tests.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_fifo_basic() {
    // Two producers on their own threads (real concurrency, hence real time for the bound).
    let fifo = new_real_fifo(&[]);
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
            for u in 0..u64::from(AMOUNT) {
                let name = format!("b{}", char::from_u32(u as u32).unwrap());
                fifo.add(mk_uint(&name, u + 1)).unwrap();
            }
        }
    });

    let mut last_int = 0;
    let mut last_uint = 0;
    for _ in 0..AMOUNT * 2 {
        match single_obj(pop(&fifo).await.0).val {
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

#[tokio::test(start_paused = true)]
async fn real_fifo_replace_with_delete_delta_in() {
    // A Replaced for a listed key is queued even when the key's last queued delta is a
    // deletion (kubernetes/kubernetes#83810).
    let old_obj = mk("foo", 1);
    let new_obj = mk("foo", 2);
    let fifo = new_real_fifo(std::slice::from_ref(&old_obj));

    fifo.delete(old_obj.clone()).unwrap();
    fifo.replace(vec![new_obj.clone()], String::new()).unwrap();

    assert_eq!(fifo.len(), 2);
    assert_eq!(
        pop_all_queued(&fifo).await,
        [
            d(DeltaType::Deleted, &old_obj),
            d(DeltaType::Replaced, &new_obj)
        ]
    );
}

/// Go: `TestRealFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue` (the "W" is Go's). Each
/// subtest runs its operations on a queue with an empty known-objects store, pops as many times
/// as deltas are queued and expects exactly the listed deltas, with nothing left over.
mod real_fifo_w_replace_makes_deletions_for_objects_only_in_queue {
    use super::*;

    fn obj() -> Arc<TestObj> {
        mk("foo", 2)
    }

    fn obj_v2() -> Arc<TestObj> {
        mk("foo", 3)
    }

    async fn check(ops: impl FnOnce(&RealFifo<TestObj>), expected: Vec<Seen>) {
        let fifo = new_real_fifo(&[]);
        ops(&fifo);
        assert_eq!(pop_all_queued(&fifo).await, expected);
        assert_eq!(fifo.len(), 0, "expected no extra deltas");
    }

    #[tokio::test(start_paused = true)]
    async fn added_object_should_be_deleted_on_replace() {
        check(
            |f| {
                f.add(obj()).unwrap();
                f.replace(vec![], "0".into()).unwrap();
            },
            vec![d(DeltaType::Added, &obj()), tombstone("foo", &obj())],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn deleted_object_should_have_only_a_single_delete() {
        check(
            |f| {
                f.add(obj()).unwrap();
                f.delete(obj()).unwrap();
                f.replace(vec![], "0".into()).unwrap();
            },
            vec![d(DeltaType::Added, &obj()), d(DeltaType::Deleted, &obj())],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn synced_objects_should_have_a_single_delete() {
        check(
            |f| {
                f.add(obj()).unwrap();
                f.replace(vec![obj()], "0".into()).unwrap();
                f.replace(vec![obj()], "0".into()).unwrap();
                f.replace(vec![], "0".into()).unwrap();
            },
            vec![
                d(DeltaType::Added, &obj()),
                d(DeltaType::Replaced, &obj()),
                d(DeltaType::Replaced, &obj()),
                tombstone("foo", &obj()),
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn added_objects_should_have_a_single_delete_on_multiple_replaces() {
        check(
            |f| {
                f.add(obj()).unwrap();
                f.replace(vec![], "0".into()).unwrap();
                f.replace(vec![], "1".into()).unwrap();
            },
            vec![d(DeltaType::Added, &obj()), tombstone("foo", &obj())],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn added_and_deleted_and_added_object_should_be_deleted() {
        check(
            |f| {
                f.add(obj()).unwrap();
                f.delete(obj()).unwrap();
                f.add(obj_v2()).unwrap();
                f.replace(vec![], "0".into()).unwrap();
            },
            vec![
                d(DeltaType::Added, &obj()),
                d(DeltaType::Deleted, &obj()),
                d(DeltaType::Added, &obj_v2()),
                tombstone("foo", &obj_v2()),
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn bookmark_object_should_not_be_added_without_atomic() {
        check(
            |f| {
                f.bookmark("123").unwrap();
                f.replace(vec![], "0".into()).unwrap();
                f.replace(vec![], "1".into()).unwrap();
            },
            vec![],
        )
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn real_fifo_add_update() {
    let fifo = new_real_fifo(&[]);
    fifo.add(mk("foo", 10)).unwrap();
    fifo.update(mk("foo", 12)).unwrap();
    fifo.delete(mk("foo", 15)).unwrap();

    // Every delta stays queued (nothing is merged); the pops below hand them out in order,
    // with their types.
    assert_eq!(fifo.len(), 3);

    let (mut got, popper) = spawn_popper(&fifo);
    assert_eq!(recv(&mut got).await, d(DeltaType::Added, &mk("foo", 10)));
    assert_eq!(recv(&mut got).await, d(DeltaType::Updated, &mk("foo", 12)));
    assert_eq!(recv(&mut got).await, d(DeltaType::Deleted, &mk("foo", 15)));
    assert_nothing_more(&mut got).await;

    assert_eq!(fifo.len(), 0);
    close_and_join(&fifo, popper).await;
}

/// Go's transform counts how often each object went through the FIFO's transformer. kcache's
/// FIFOs take objects as they are: the transform runs in the reflector, before the write
/// (`Reflector::with_transform`). So the port transforms before every write, as the reflector
/// does, and expects the queue to hold the very objects written — tombstones included, each
/// transformed exactly once — in Go's order.
#[tokio::test(start_paused = true)]
async fn real_fifo_transformer() {
    fn mk_x(name: &str, rv: i64) -> TestObj {
        TestObj {
            name: name.to_owned(),
            val: Val::Xfrm { rv, xfrm: 0 },
        }
    }
    fn transform(mut obj: TestObj) -> Arc<TestObj> {
        if let Val::Xfrm { xfrm, .. } = &mut obj.val {
            *xfrm += 1;
        }
        Arc::new(obj)
    }

    let fifo = new_real_fifo(&[]);
    fifo.add(transform(mk_x("foo", 10))).unwrap();
    fifo.add(transform(mk_x("bar", 11))).unwrap();
    fifo.update(transform(mk_x("foo", 12))).unwrap();
    fifo.delete(transform(mk_x("foo", 15))).unwrap();
    fifo.replace(vec![], String::new()).unwrap();
    fifo.add(transform(mk_x("bar", 16))).unwrap();
    fifo.replace(vec![], String::new()).unwrap();

    // Nothing is compressed: "bar" is deleted twice, once per relist it was missing from.
    let expected = [
        d(DeltaType::Added, &transform(mk_x("foo", 10))),
        d(DeltaType::Added, &transform(mk_x("bar", 11))),
        d(DeltaType::Updated, &transform(mk_x("foo", 12))),
        d(DeltaType::Deleted, &transform(mk_x("foo", 15))),
        tombstone("bar", &transform(mk_x("bar", 11))),
        d(DeltaType::Added, &transform(mk_x("bar", 16))),
        tombstone("bar", &transform(mk_x("bar", 16))),
    ];
    assert_eq!(fifo.len(), expected.len());
    for (i, e) in expected.iter().enumerate() {
        let (popped, _) = pop(&fifo).await;
        assert_eq!(popped, std::slice::from_ref(e), "pop {i}");
    }
}

#[tokio::test(start_paused = true)]
async fn real_fifo_enqueueing_no_lister() {
    let fifo = new_real_fifo(&[]);
    fifo.add(mk("foo", 10)).unwrap();
    fifo.update(mk("bar", 15)).unwrap();
    fifo.add(mk("qux", 17)).unwrap();
    fifo.delete(mk("qux", 18)).unwrap();
    // A RealFifo queues every deletion, known or not.
    fifo.delete(mk("baz", 20)).unwrap();

    for expect in [10, 15, 17, 18, 20] {
        assert_eq!(single_obj(pop(&fifo).await.0).val, val(expect));
    }
    assert_eq!(fifo.len(), 0, "queue unexpectedly not empty");
}

#[tokio::test(start_paused = true)]
async fn real_fifo_enqueueing_with_lister() {
    let fifo = new_real_fifo(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    fifo.add(mk("foo", 10)).unwrap();
    fifo.update(mk("bar", 15)).unwrap();
    // Queued: "baz" is known.
    fifo.delete(mk("baz", 20)).unwrap();

    for expect in [10, 15, 20] {
        assert_eq!(single_obj(pop(&fifo).await.0).val, val(expect));
    }
    assert_eq!(fifo.len(), 0, "queue unexpectedly not empty");
}

#[tokio::test(start_paused = true)]
async fn real_fifo_add_replace() {
    let fifo = new_real_fifo(&[]);
    fifo.add(mk("foo", 10)).unwrap();
    fifo.replace(vec![mk("foo", 15)], "0".into()).unwrap();

    // Every event comes out, the add as well as the relisted object.
    let (mut got, popper) = spawn_popper(&fifo);
    assert_eq!(single_obj(vec![recv(&mut got).await]).val, val(10));
    assert_eq!(single_obj(vec![recv(&mut got).await]).val, val(15));
    assert_nothing_more(&mut got).await;

    assert_eq!(fifo.len(), 0, "item did not get removed");
    close_and_join(&fifo, popper).await;
}

#[tokio::test(start_paused = true)]
async fn real_fifo_resync_non_existing() {
    let fifo = new_real_fifo(&[mk("foo", 5)]);
    fifo.delete(mk("foo", 10)).unwrap();
    fifo.resync().unwrap();

    // "foo" has a delta queued, so the resync adds none for it.
    assert_eq!(fifo.len(), 1, "unexpected deltas length");
    let (popped, _) = pop(&fifo).await;
    assert!(
        matches!(popped.as_slice(), [Seen::Obj(DeltaType::Deleted, _)]),
        "unexpected delta: {popped:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn real_fifo_resync() {
    let fifo = new_real_fifo(&[mk("foo", 5)]);
    fifo.resync().unwrap();

    assert_eq!(fifo.len(), 1, "unexpected deltas length");
    let (popped, _) = pop(&fifo).await;
    assert!(
        matches!(popped.as_slice(), [Seen::Obj(DeltaType::Sync, _)]),
        "unexpected delta: {popped:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn real_fifo_delete_existing_non_propagated() {
    let fifo = new_real_fifo(&[]);
    fifo.add(mk("foo", 5)).unwrap();
    fifo.delete(mk("foo", 6)).unwrap();

    assert_eq!(fifo.len(), 2, "unexpected deltas length");
    let all = pop_all_queued(&fifo).await;
    assert!(
        matches!(all.last(), Some(Seen::Obj(DeltaType::Deleted, _))),
        "unexpected delta: {all:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn real_fifo_replace_makes_deletions() {
    let known_objs = || [mk("foo", 5), mk("bar", 6), mk("baz", 7)];

    async fn expect_pops(fifo: &RealFifo<TestObj>, expected: &[Seen]) {
        for (i, e) in expected.iter().enumerate() {
            assert_eq!(pop(fifo).await.0, std::slice::from_ref(e), "pop {i}");
        }
    }

    // A deletion is already queued.
    let fifo = new_real_fifo(&known_objs());
    fifo.delete(mk("baz", 10)).unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        &[
            d(DeltaType::Deleted, &mk("baz", 10)),
            // The tombstones for known keys come before the listed objects; "bar" had no
            // deletion and was not listed, so it gets one with its known state.
            tombstone("bar", &mk("bar", 6)),
            d(DeltaType::Replaced, &mk("foo", 5)),
        ],
    )
    .await;

    // An add instead of a deletion.
    let fifo = new_real_fifo(&known_objs());
    fifo.add(mk("baz", 10)).unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        &[
            d(DeltaType::Added, &mk("baz", 10)),
            tombstone("baz", &mk("baz", 10)),
            tombstone("bar", &mk("bar", 6)),
            d(DeltaType::Replaced, &mk("foo", 5)),
        ],
    )
    .await;

    // Deleted and re-created in the queue, then deleted by the relist.
    let fifo = new_real_fifo(&known_objs());
    fifo.delete(mk("bar", 6)).unwrap();
    fifo.add(mk("bar", 100)).unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        &[
            d(DeltaType::Deleted, &mk("bar", 6)),
            d(DeltaType::Added, &mk("bar", 100)),
            // The queue's object is newer than the known one: the tombstone carries it.
            tombstone("bar", &mk("bar", 100)),
            tombstone("baz", &mk("baz", 7)),
            d(DeltaType::Replaced, &mk("foo", 5)),
        ],
    )
    .await;

    // Relisted first, so that the later tombstone uses the relisted version.
    let fifo = new_real_fifo(&known_objs());
    fifo.replace(vec![mk("bar", 100), mk("foo", 5)], "0".into())
        .unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        &[
            tombstone("baz", &mk("baz", 7)),
            d(DeltaType::Replaced, &mk("bar", 100)),
            d(DeltaType::Replaced, &mk("foo", 5)),
            tombstone("bar", &mk("bar", 100)),
            d(DeltaType::Replaced, &mk("foo", 5)),
        ],
    )
    .await;

    // An empty known-objects store.
    let fifo = new_real_fifo(&[]);
    fifo.add(mk("baz", 10)).unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        &[
            d(DeltaType::Added, &mk("baz", 10)),
            tombstone("baz", &mk("baz", 10)),
            d(DeltaType::Replaced, &mk("foo", 5)),
        ],
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn real_fifo_replace_makes_deletions_replaced() {
    let fifo = new_real_fifo(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    fifo.delete(mk("baz", 10)).unwrap();
    fifo.replace(vec![mk("foo", 6)], "0".into()).unwrap();

    let expected = [
        d(DeltaType::Deleted, &mk("baz", 10)),
        tombstone("bar", &mk("bar", 6)),
        d(DeltaType::Replaced, &mk("foo", 6)),
    ];
    for (i, e) in expected.iter().enumerate() {
        assert_eq!(pop(&fifo).await.0, std::slice::from_ref(e), "pop {i}");
    }
}

#[tokio::test(start_paused = true)]
async fn real_fifo_update_resync_race() {
    let fifo = new_real_fifo(&[mk("foo", 5)]);
    fifo.update(mk("foo", 6)).unwrap();
    // "foo" has an update queued: resyncing its older known state would go back in time.
    fifo.resync().unwrap();

    assert_eq!(pop(&fifo).await.0, [d(DeltaType::Updated, &mk("foo", 6))]);
}

#[tokio::test(start_paused = true)]
async fn real_fifo_has_synced_correct_on_deletion() {
    let fifo = new_real_fifo(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();

    let expected = [
        tombstone("bar", &mk("bar", 6)),
        tombstone("baz", &mk("baz", 7)),
        d(DeltaType::Replaced, &mk("foo", 5)),
    ];
    for (i, e) in expected.iter().enumerate() {
        assert!(
            !fifo.has_synced(),
            "expected has_synced to be false before pop {i}"
        );
        let (popped, initial) = pop(&fifo).await;
        assert_eq!(popped, std::slice::from_ref(e), "pop {i}");
        assert!(initial, "expected pop {i} to be an initial list item");
    }
    assert!(fifo.has_synced(), "expected has_synced to be true");
}

#[tokio::test(start_paused = true)]
async fn real_fifo_detect_line_jumpers() {
    let fifo = new_real_fifo(&[]);
    fifo.add(mk("foo", 10)).unwrap();
    fifo.add(mk("bar", 1)).unwrap();
    fifo.add(mk("foo", 11)).unwrap();
    fifo.add(mk("foo", 13)).unwrap();
    fifo.add(mk("zab", 30)).unwrap();

    // Every event comes out, in order.
    assert_eq!(single_obj(pop(&fifo).await.0).val, val(10));

    fifo.add(mk("foo", 14)).unwrap(); // "foo" does not jump back in line

    for expect in [1, 11, 13, 30, 14] {
        assert_eq!(single_obj(pop(&fifo).await.0).val, val(expect));
    }
}

/// Go's `keyOf` finds the key of an object, a tombstone, or a `Deltas` (its newest delta). In
/// kcache a delta carries its key, computed once when it was queued: [`Delta::key`] is the
/// counterpart, and a tombstone's key is the recorded one, never recomputed from its object
/// (Go's tombstones in this table have a nil object; here the object's name is empty, which
/// would not give the recorded key).
#[test]
fn real_fifo_key_of() {
    let nameless = mk("", 0);
    let a = Delta::keyed(DeltaType::Added, ObjectKey::new(None, "A"), mk("A", 0));
    let b = Delta::tombstone(ObjectKey::new(None, "B"), nameless.clone());
    let c: Vec<Delta<TestObj>> = vec![Delta::keyed(
        DeltaType::Updated,
        ObjectKey::new(None, "C"),
        mk("C", 0),
    )];
    let dd: Vec<Delta<TestObj>> = vec![Delta::tombstone(ObjectKey::new(None, "D"), nameless)];

    let newest = |deltas: &[Delta<TestObj>]| deltas.last().and_then(Delta::key).cloned();
    assert_eq!(a.key().map(ObjectKey::as_str), Some("A"));
    assert_eq!(b.key().map(ObjectKey::as_str), Some("B"));
    assert_eq!(newest(&c).as_ref().map(ObjectKey::as_str), Some("C"));
    assert_eq!(newest(&dd).as_ref().map(ObjectKey::as_str), Some("D"));
}

#[tokio::test(start_paused = true)]
async fn real_fifo_has_synced() {
    enum Action {
        Add(Arc<TestObj>),
        Replace(Vec<Arc<TestObj>>),
        Pop,
    }
    use Action::{Add, Pop, Replace};

    let cases: Vec<(Vec<Action>, bool)> = vec![
        (vec![], false),
        (vec![Add(mk("a", 1))], true),
        (vec![Replace(vec![])], true),
        (vec![Replace(vec![mk("a", 1), mk("b", 2)])], false),
        (vec![Replace(vec![mk("a", 1), mk("b", 2)]), Pop], false),
        (vec![Replace(vec![mk("a", 1), mk("b", 2)]), Pop, Pop], true),
        // A list with a duplicate key cannot come from a sane API server. Every delta is
        // delivered, so "a" is queued twice and takes two pops.
        (vec![Replace(vec![mk("a", 1), mk("a", 2)]), Pop, Pop], true),
    ];

    for (i, (actions, expected)) in cases.into_iter().enumerate() {
        let fifo = new_real_fifo(&[]);
        for action in actions {
            match action {
                Add(obj) => fifo.add(obj).unwrap(),
                Replace(list) => fifo.replace(list, "0".into()).unwrap(),
                Pop => {
                    pop(&fifo).await;
                }
            }
        }
        assert_eq!(fifo.has_synced(), expected, "case {i}");
    }
}

#[tokio::test(start_paused = true)]
async fn real_fifo_pop_should_unblock_when_closed() {
    let fifo = new_real_fifo(&[mk("foo", 5)]);

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
