//! `the_real_fifo_test.go`'s batched pops and atomic replace and resync.

use super::*;

/// Go: `TestRealFIFO_PopMultipleDeltaInBatch` (with `InOrderInformersBatchProcess` on, which
/// kcache always is). Each subtest lists `initial` (also the known objects), applies its
/// updates, then pops batches of at most `batch_size` until the queue is empty.
mod real_fifo_pop_multiple_delta_in_batch {
    use super::*;

    const UNLIMITED: usize = 999_999;

    fn obj(n: u32) -> Arc<TestObj> {
        mk(&format!("foo{n}"), 5)
    }

    async fn check(
        initial: &[Arc<TestObj>],
        updates: &[Arc<TestObj>],
        batch_size: usize,
        expected: Vec<Vec<Seen>>,
    ) {
        let fifo = RealFifo::new(
            key_func(),
            RealFifoConfig::non_atomic(known(initial)).batch_size(batch_size),
        );
        fifo.replace(initial.to_vec(), "123".into()).unwrap();
        for u in updates {
            fifo.update(u.clone()).unwrap();
        }

        let mut batches = Vec::new();
        let mut initial_objs = Vec::new();
        while !fifo.is_empty() {
            let (batch, is_initial) = pop_batch(&fifo).await;
            if is_initial {
                for delta in &batch {
                    match delta {
                        Seen::Obj(_, o) => initial_objs.push(o.clone()),
                        other => panic!("unexpected initial delta {other:?}"),
                    }
                }
            }
            batches.push(batch);
        }
        fifo.close();

        assert_eq!(batches, expected);
        let initial: Vec<TestObj> = initial.iter().map(|o| (**o).clone()).collect();
        assert_eq!(
            initial_objs, initial,
            "the initial list, and only it, is initial"
        );
    }

    fn replaced(o: &Arc<TestObj>) -> Seen {
        d(DeltaType::Replaced, o)
    }

    fn updated(o: &Arc<TestObj>) -> Seen {
        d(DeltaType::Updated, o)
    }

    #[tokio::test(start_paused = true)]
    async fn non_split_pop_unique_items_should_work() {
        check(
            &[obj(1), obj(2), obj(3)],
            &[],
            UNLIMITED,
            vec![vec![
                replaced(&obj(1)),
                replaced(&obj(2)),
                replaced(&obj(3)),
            ]],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn split_due_to_initial_list_initial_2_items_with_2_updates_should_have_2_batches() {
        check(
            &[obj(1), obj(2)],
            &[obj(3), obj(4)],
            2,
            vec![
                vec![replaced(&obj(1)), replaced(&obj(2))],
                vec![updated(&obj(3)), updated(&obj(4))],
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn split_due_to_non_unique_1_update_single_item_for_multiple_items_should_have_separate_batch()
     {
        check(
            &[obj(1)],
            &[obj(1), obj(1)],
            UNLIMITED,
            vec![
                vec![replaced(&obj(1))],
                vec![updated(&obj(1))],
                vec![updated(&obj(1))],
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn split_due_to_non_unique_2_update_3_item_for_with_non_unique_item_at_the_end_should_have_separate_batch()
     {
        check(
            &[obj(1), obj(2)],
            &[obj(2), obj(3)],
            UNLIMITED,
            vec![
                vec![replaced(&obj(1)), replaced(&obj(2))],
                vec![updated(&obj(2)), updated(&obj(3))],
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn split_due_to_non_unique_3_update_3_item_for_with_non_unique_item_in_the_mid_should_have_separate_batch()
     {
        check(
            &[obj(1), obj(2), obj(3)],
            &[obj(2)],
            UNLIMITED,
            vec![
                vec![replaced(&obj(1)), replaced(&obj(2)), replaced(&obj(3))],
                vec![updated(&obj(2))],
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn split_due_to_batch_size_1_batching_initial_list_should_work() {
        check(
            &[obj(1), obj(2), obj(3)],
            &[],
            2,
            vec![
                vec![replaced(&obj(1)), replaced(&obj(2))],
                vec![replaced(&obj(3))],
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn split_due_to_batch_size_2_batching_incoming_non_initial_deltas_should_work() {
        check(
            &[],
            &[obj(1), obj(2), obj(3)],
            2,
            vec![
                vec![updated(&obj(1)), updated(&obj(2))],
                vec![updated(&obj(3))],
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn split_due_to_batch_size_3_pop_4_mixed_initial_and_non_initial_items_with_2_batch_size_should_have_3_batch()
     {
        check(
            &[obj(1), obj(2), obj(3)],
            &[obj(4)],
            2,
            vec![
                vec![replaced(&obj(1)), replaced(&obj(2))],
                vec![replaced(&obj(3))],
                vec![updated(&obj(4))],
            ],
        )
        .await;
    }
}

/// Go: `TestRealFIFO_ReplaceAtomic` (`emitAtomicEvents` and `emitDeltaTypeBookmark` on). Each
/// subtest pops as many times as deltas are queued and expects exactly the listed deltas.
mod real_fifo_replace_atomic {
    use super::*;

    fn obj() -> Arc<TestObj> {
        mk("foo", 2)
    }

    async fn check(ops: impl FnOnce(&RealFifo<TestObj>), expected: Vec<Seen>) {
        let fifo = new_atomic_real_fifo(true);
        ops(&fifo);
        assert_eq!(pop_all_queued(&fifo).await, expected);
        assert_eq!(fifo.len(), 0, "expected no extra deltas");
    }

    #[tokio::test(start_paused = true)]
    async fn base_replace() {
        check(
            |f| f.replace(vec![], "123".into()).unwrap(),
            vec![replaced_all("123", &[])],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn added_object_exists_in_deltas_on_atomic_replace() {
        check(
            |f| {
                f.add(obj()).unwrap();
                f.replace(vec![], "123".into()).unwrap();
            },
            vec![d(DeltaType::Added, &obj()), replaced_all("123", &[])],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn multiple_replaces_run_in_order() {
        check(
            |f| {
                f.add(obj()).unwrap();
                f.replace(vec![obj()], "10".into()).unwrap();
                f.replace(vec![obj()], "20".into()).unwrap();
                f.replace(vec![], "56".into()).unwrap();
            },
            vec![
                d(DeltaType::Added, &obj()),
                replaced_all("10", &[obj()]),
                replaced_all("20", &[obj()]),
                replaced_all("56", &[]),
            ],
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn bookmark_object_should_not_be_included_in_replace() {
        check(
            |f| {
                f.bookmark("123").unwrap();
                f.replace(vec![], "1234".into()).unwrap();
            },
            vec![Seen::Bookmark("123".into()), replaced_all("1234", &[])],
        )
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn real_fifo_replace_atomic_pop() {
    let fifo = new_atomic_real_fifo(false);
    fifo.add(mk("foo", 10)).unwrap();
    fifo.replace(vec![mk("foo", 15)], "20".into()).unwrap();

    let (mut got, popper) = spawn_popper(&fifo);
    assert_eq!(recv(&mut got).await, d(DeltaType::Added, &mk("foo", 10)));
    // Go's check here (`e != a && v.val == 15`) can never fail; its intent is that the second
    // pop is the atomic relist carrying "foo" at 15, which is what is asserted.
    assert_eq!(recv(&mut got).await, replaced_all("20", &[mk("foo", 15)]));
    assert_nothing_more(&mut got).await;

    assert_eq!(fifo.len(), 0, "item did not get removed");
    close_and_join(&fifo, popper).await;
}

/// Go: `TestRealFIFO_ResyncAtomic` (`emitAtomicEvents` on).
mod real_fifo_resync_atomic {
    use super::*;

    async fn check(ops: impl FnOnce(&RealFifo<TestObj>), expected: Vec<Seen>) {
        let fifo = new_atomic_real_fifo(false);
        ops(&fifo);
        // A resync appends to the log, so the order is checked too.
        assert_eq!(pop_all_queued(&fifo).await, expected);
        assert_eq!(fifo.len(), 0, "expected no extra deltas");
    }

    #[tokio::test(start_paused = true)]
    async fn base_resync() {
        check(|f| f.resync().unwrap(), vec![Seen::SyncAll]).await;
    }

    #[tokio::test(start_paused = true)]
    async fn added_object_exists_in_deltas_on_atomic_resync() {
        let obj = mk("foo", 2);
        check(
            |f| {
                f.add(obj.clone()).unwrap();
                f.resync().unwrap();
            },
            vec![d(DeltaType::Added, &obj), Seen::SyncAll],
        )
        .await;
    }
}
