//! `delta_fifo_test.go`'s `TestDeltaFIFO_*` tests: adds, updates, replaces, resyncs, deletions, key
//! functions and has-synced.

use super::*;

// ---------------------------------------------------------------------------------------------
// delta_fifo_test.go

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_fifo_basic() {
    two_producers_pop_in_order(plain()).await;
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_replace_with_delete_delta_in() {
    // A Sync for a listed key is queued even when the key's last queued delta is a deletion
    // (kubernetes/kubernetes#83810).
    let old_obj = mk("foo", 1);
    let new_obj = mk("foo", 2);
    let fifo = with_known(std::slice::from_ref(&old_obj));

    fifo.delete(old_obj.clone()).unwrap();
    fifo.replace(vec![new_obj.clone()], String::new()).unwrap();

    assert_eq!(
        pop(&fifo).await.0,
        [
            d(DeltaType::Deleted, &old_obj),
            d(DeltaType::Sync, &new_obj)
        ]
    );
}

/// Go: `TestDeltaFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue` (the "W" is Go's). Each
/// subtest runs its operations on a queue with an empty known-objects store and on one without
/// known objects; one pop must hand out exactly the listed deltas and leave nothing queued.
mod delta_fifo_w_replace_makes_deletions_for_objects_only_in_queue {
    use super::*;

    fn obj() -> Arc<TestObj> {
        mk("foo", 2)
    }

    fn obj_v2() -> Arc<TestObj> {
        mk("foo", 3)
    }

    async fn check(emit_replaced: bool, ops: impl Fn(&DeltaFifo<TestObj>), expected: Vec<Seen>) {
        for known in [Some(&[][..]), None] {
            let fifo = new_delta_fifo(known, emit_replaced);
            ops(&fifo);
            assert_eq!(
                pop(&fifo).await.0,
                expected,
                "with known objects: {}",
                known.is_some()
            );
            assert_eq!(
                fifo.len(),
                0,
                "expected no extra deltas, with known objects: {}",
                known.is_some()
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn added_object_should_be_deleted_on_replace() {
        check(
            false,
            |f| {
                f.add(obj()).unwrap();
                f.replace(vec![], "0".into()).unwrap();
            },
            vec![d(DeltaType::Added, &obj()), tombstone("foo", &obj())],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn replaced_object_should_have_only_a_single_delete() {
        check(
            true,
            |f| {
                f.add(obj()).unwrap();
                f.replace(vec![obj()], "0".into()).unwrap();
                f.replace(vec![], "0".into()).unwrap();
            },
            vec![
                d(DeltaType::Added, &obj()),
                d(DeltaType::Replaced, &obj()),
                tombstone("foo", &obj()),
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn deleted_object_should_have_only_a_single_delete() {
        check(
            false,
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
            false,
            |f| {
                f.add(obj()).unwrap();
                f.replace(vec![obj()], "0".into()).unwrap();
                f.replace(vec![obj()], "0".into()).unwrap();
                f.replace(vec![], "0".into()).unwrap();
            },
            vec![
                d(DeltaType::Added, &obj()),
                d(DeltaType::Sync, &obj()),
                d(DeltaType::Sync, &obj()),
                tombstone("foo", &obj()),
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn added_objects_should_have_a_single_delete_on_multiple_replaces() {
        check(
            false,
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
            false,
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
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_add_update() {
    let fifo = plain();
    fifo.add(mk("foo", 10)).unwrap();
    fifo.update(mk("foo", 12)).unwrap();
    fifo.delete(mk("foo", 15)).unwrap();

    assert_eq!(list(&fifo), [(*mk("foo", 15)).clone()]);
    assert_eq!(list_keys(&fifo), ["foo"]);

    let (mut got, popper) = spawn_popper(&fifo);
    assert_eq!(newest_obj(&recv(&mut got).await).val, val(15));
    assert_nothing_more(&mut got).await;

    assert!(fifo.get_by_key("foo").is_none(), "item did not get removed");
    close_and_join(&fifo, popper).await;
}

/// Go's transform counts how often each object went through the FIFO's transformer. kcache's
/// FIFOs take objects as they are: the transform runs in the reflector, before the write
/// (`Reflector::with_transform`). So the port transforms before every write, as the reflector
/// does, and expects the queue to keep the very objects written — the tombstone too, each
/// transformed exactly once.
#[tokio::test(start_paused = true)]
async fn delta_fifo_transformer() {
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

    let fifo = plain();
    fifo.add(transform(mk_x("foo", 10))).unwrap();
    fifo.add(transform(mk_x("bar", 11))).unwrap();
    fifo.update(transform(mk_x("foo", 12))).unwrap();
    fifo.delete(transform(mk_x("foo", 15))).unwrap();
    fifo.replace(vec![], String::new()).unwrap();
    fifo.add(transform(mk_x("bar", 16))).unwrap();
    fifo.replace(vec![], String::new()).unwrap();

    assert_eq!(list_keys(&fifo), ["foo", "bar"]);

    // "foo": its regular deletion, the last message, transformed once.
    let foo_deltas = pop(&fifo).await.0;
    assert_eq!(
        foo_deltas.last(),
        Some(&d(DeltaType::Deleted, &transform(mk_x("foo", 15)))),
        "expected the regular deletion of foo: {foo_deltas:?}"
    );
    // "bar": a tombstone with its last message, transformed once.
    let bar_deltas = pop(&fifo).await.0;
    assert_eq!(
        bar_deltas.last(),
        Some(&tombstone("bar", &transform(mk_x("bar", 16)))),
        "expected the tombstone deletion of bar: {bar_deltas:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_enqueueing_no_lister() {
    let fifo = plain();
    fifo.add(mk("foo", 10)).unwrap();
    fifo.update(mk("bar", 15)).unwrap();
    fifo.add(mk("qux", 17)).unwrap();
    fifo.delete(mk("qux", 18)).unwrap();
    // Queues nothing: "baz" is neither queued nor known.
    fifo.delete(mk("baz", 20)).unwrap();

    for expect in [10, 15, 18] {
        assert_eq!(newest_obj(&pop(&fifo).await.0).val, val(expect));
    }
    assert_eq!(fifo.len(), 0, "queue unexpectedly not empty");
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_enqueueing_with_lister() {
    let fifo = with_known(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    fifo.add(mk("foo", 10)).unwrap();
    fifo.update(mk("bar", 15)).unwrap();
    // Queued: "baz" is known.
    fifo.delete(mk("baz", 20)).unwrap();

    for expect in [10, 15, 20] {
        assert_eq!(newest_obj(&pop(&fifo).await.0).val, val(expect));
    }
    assert_eq!(fifo.len(), 0, "queue unexpectedly not empty");
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_add_replace() {
    let fifo = plain();
    fifo.add(mk("foo", 10)).unwrap();
    fifo.replace(vec![mk("foo", 15)], "0".into()).unwrap();

    let (mut got, popper) = spawn_popper(&fifo);
    assert_eq!(newest_obj(&recv(&mut got).await).val, val(15));
    assert_nothing_more(&mut got).await;

    assert!(fifo.get_by_key("foo").is_none(), "item did not get removed");
    close_and_join(&fifo, popper).await;
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_resync_non_existing() {
    let fifo = with_known(&[mk("foo", 5)]);
    fifo.delete(mk("foo", 10)).unwrap();
    fifo.resync().unwrap();

    // "foo" has a delta queued, so the resync adds none for it.
    let deltas = items(&fifo, "foo");
    assert_eq!(deltas.len(), 1, "unexpected deltas: {deltas:?}");
    assert!(
        matches!(deltas[0], Seen::Obj(DeltaType::Deleted, _)),
        "unexpected delta: {:?}",
        deltas[0]
    );
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_resync() {
    let fifo = with_known(&[mk("foo", 5)]);
    fifo.resync().unwrap();

    let deltas = items(&fifo, "foo");
    assert_eq!(deltas.len(), 1, "unexpected deltas: {deltas:?}");
    assert!(
        matches!(deltas[0], Seen::Obj(DeltaType::Sync, _)),
        "unexpected delta: {:?}",
        deltas[0]
    );
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_delete_existing_non_propagated() {
    let fifo = with_known(&[]);
    fifo.add(mk("foo", 5)).unwrap();
    fifo.delete(mk("foo", 6)).unwrap();

    let deltas = items(&fifo, "foo");
    assert_eq!(deltas.len(), 2, "unexpected deltas: {deltas:?}");
    assert!(
        matches!(deltas.last(), Some(Seen::Obj(DeltaType::Deleted, _))),
        "unexpected delta: {deltas:?}"
    );
}

async fn expect_pops(fifo: &DeltaFifo<TestObj>, expected: Vec<Vec<Seen>>) {
    for (i, e) in expected.into_iter().enumerate() {
        assert_eq!(pop(fifo).await.0, e, "pop {i}");
    }
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_replace_makes_deletions() {
    let known_objs = || [mk("foo", 5), mk("bar", 6), mk("baz", 7)];

    // A deletion is already queued.
    let fifo = with_known(&known_objs());
    fifo.delete(mk("baz", 10)).unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        vec![
            vec![d(DeltaType::Deleted, &mk("baz", 10))],
            vec![d(DeltaType::Sync, &mk("foo", 5))],
            // "bar" had no deletion and was not listed: a tombstone with its known state.
            vec![tombstone("bar", &mk("bar", 6))],
        ],
    )
    .await;

    // An add instead of a deletion.
    let fifo = with_known(&known_objs());
    fifo.add(mk("baz", 10)).unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        vec![
            vec![
                d(DeltaType::Added, &mk("baz", 10)),
                tombstone("baz", &mk("baz", 10)),
            ],
            vec![d(DeltaType::Sync, &mk("foo", 5))],
            vec![tombstone("bar", &mk("bar", 6))],
        ],
    )
    .await;

    // Deleted and re-created in the queue, then deleted by the relist.
    let fifo = with_known(&known_objs());
    fifo.delete(mk("bar", 6)).unwrap();
    fifo.add(mk("bar", 100)).unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        vec![
            vec![
                d(DeltaType::Deleted, &mk("bar", 6)),
                d(DeltaType::Added, &mk("bar", 100)),
                // The queue's object is newer than the known one: the tombstone carries it.
                tombstone("bar", &mk("bar", 100)),
            ],
            vec![d(DeltaType::Sync, &mk("foo", 5))],
            vec![tombstone("baz", &mk("baz", 7))],
        ],
    )
    .await;

    // Relisted first, so that the later tombstone uses the relisted version.
    let fifo = with_known(&known_objs());
    fifo.replace(vec![mk("bar", 100), mk("foo", 5)], "0".into())
        .unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        vec![
            vec![
                d(DeltaType::Sync, &mk("bar", 100)),
                tombstone("bar", &mk("bar", 100)),
            ],
            vec![
                d(DeltaType::Sync, &mk("foo", 5)),
                d(DeltaType::Sync, &mk("foo", 5)),
            ],
            vec![tombstone("baz", &mk("baz", 7))],
        ],
    )
    .await;

    // Without known objects.
    let fifo = plain();
    fifo.add(mk("baz", 10)).unwrap();
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();
    expect_pops(
        &fifo,
        vec![
            vec![
                d(DeltaType::Added, &mk("baz", 10)),
                tombstone("baz", &mk("baz", 10)),
            ],
            vec![d(DeltaType::Sync, &mk("foo", 5))],
        ],
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_replace_makes_deletions_replaced() {
    let fifo = new_delta_fifo(Some(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]), true);
    fifo.delete(mk("baz", 10)).unwrap();
    fifo.replace(vec![mk("foo", 6)], "0".into()).unwrap();

    expect_pops(
        &fifo,
        vec![
            vec![d(DeltaType::Deleted, &mk("baz", 10))],
            vec![d(DeltaType::Replaced, &mk("foo", 6))],
            vec![tombstone("bar", &mk("bar", 6))],
        ],
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_replace_delta_type() {
    let fifo = new_delta_fifo(Some(&[mk("foo", 5)]), true);
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();

    expect_pops(&fifo, vec![vec![d(DeltaType::Replaced, &mk("foo", 5))]]).await;
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_update_resync_race() {
    let fifo = with_known(&[mk("foo", 5)]);
    fifo.update(mk("foo", 6)).unwrap();
    // "foo" has an update queued: resyncing its older known state would go back in time.
    fifo.resync().unwrap();

    expect_pops(&fifo, vec![vec![d(DeltaType::Updated, &mk("foo", 6))]]).await;
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_has_synced_correct_on_deletion() {
    let fifo = with_known(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    fifo.replace(vec![mk("foo", 5)], "0".into()).unwrap();

    let expected = [
        vec![d(DeltaType::Sync, &mk("foo", 5))],
        vec![tombstone("bar", &mk("bar", 6))],
        vec![tombstone("baz", &mk("baz", 7))],
    ];
    for (i, e) in expected.into_iter().enumerate() {
        assert!(
            !fifo.has_synced(),
            "expected has_synced to be false before pop {i}"
        );
        let (popped, initial) = pop(&fifo).await;
        assert_eq!(popped, e, "pop {i}");
        assert!(initial, "expected pop {i} to be an initial list item");
    }
    assert!(fifo.has_synced(), "expected has_synced to be true");
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_detect_line_jumpers() {
    a_requeued_key_does_not_jump_the_line(plain()).await;
}

/// Go's `KeyOf` finds the key of an object, a tombstone, or a `Deltas` (its newest delta). In
/// kcache a delta carries its key, computed once when it was queued: [`Delta::key`] is the
/// counterpart, and a tombstone's key is the recorded one, never recomputed from its object
/// (Go's tombstones in this table have a nil object; here the object's name is empty, which
/// would not give the recorded key).
#[test]
fn delta_fifo_key_of() {
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
async fn delta_fifo_has_synced() {
    use Action::{Add, Pop, Replace};
    check_has_synced(vec![
        (vec![], false),
        (vec![Add(mk("a", 1))], true),
        (vec![Replace(vec![])], true),
        (vec![Replace(vec![mk("a", 1), mk("b", 2)])], false),
        (vec![Replace(vec![mk("a", 1), mk("b", 2)]), Pop], false),
        (vec![Replace(vec![mk("a", 1), mk("b", 2)]), Pop, Pop], true),
        // A list with a duplicate key cannot come from a sane API server; the key is queued
        // once, so one pop completes the initial list.
        (vec![Replace(vec![mk("a", 1), mk("a", 2)]), Pop], true),
    ])
    .await;
}

#[tokio::test(start_paused = true)]
async fn delta_fifo_pop_should_unblock_when_closed() {
    blocked_pops_unblock_on_close(with_known(&[mk("foo", 5)])).await;
}
