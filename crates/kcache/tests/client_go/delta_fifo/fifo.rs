//! `delta_fifo_test.go`'s `TestFIFO_*` tests, which client-go runs on a `DeltaFIFO` used as a plain
//! FIFO.

use super::*;

// ---------------------------------------------------------------------------------------------
// fifo_test.go, on a DeltaFifo without known objects (see the module documentation).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_basic() {
    two_producers_pop_in_order(plain()).await;
}

#[tokio::test(start_paused = true)]
async fn fifo_add_update() {
    let fifo = plain();
    fifo.add(mk("foo", 10)).unwrap();
    fifo.update(mk("foo", 15)).unwrap();

    assert_eq!(list(&fifo), [(*mk("foo", 15)).clone()]);
    assert_eq!(list_keys(&fifo), ["foo"]);

    let (mut got, popper) = spawn_popper(&fifo);
    assert_eq!(newest_obj(&recv(&mut got).await).val, val(15));
    assert_nothing_more(&mut got).await;

    assert!(fifo.get_by_key("foo").is_none(), "item did not get removed");
    close_and_join(&fifo, popper).await;
}

#[tokio::test(start_paused = true)]
async fn fifo_add_replace() {
    let fifo = plain();
    fifo.add(mk("foo", 10)).unwrap();
    fifo.replace(vec![mk("foo", 15)], "15".into()).unwrap();

    let (mut got, popper) = spawn_popper(&fifo);
    assert_eq!(newest_obj(&recv(&mut got).await).val, val(15));
    assert_nothing_more(&mut got).await;

    assert!(fifo.get_by_key("foo").is_none(), "item did not get removed");
    close_and_join(&fifo, popper).await;
}

#[tokio::test(start_paused = true)]
async fn fifo_detect_line_jumpers() {
    a_requeued_key_does_not_jump_the_line(plain()).await;
}

#[tokio::test(start_paused = true)]
async fn fifo_has_synced() {
    use Action::{Add, Pop, Replace};
    check_has_synced(vec![
        (vec![], false),
        (vec![Add(mk("a", 1))], true),
        (vec![Replace(vec![])], true),
        (vec![Replace(vec![mk("a", 1), mk("b", 2)])], false),
        (vec![Replace(vec![mk("a", 1), mk("b", 2)]), Pop], false),
        (vec![Replace(vec![mk("a", 1), mk("b", 2)]), Pop, Pop], true),
    ])
    .await;
}

#[tokio::test(start_paused = true)]
async fn fifo_pop_should_unblock_when_closed() {
    blocked_pops_unblock_on_close(plain()).await;
}
