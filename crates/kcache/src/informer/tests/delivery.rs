//! Where handlers are called ([`Delivery`]): on the pool until shown quick, then on the
//! runtime, on the blocking pool for good once slow, again on the pool after blocking inside the runtime, and by the writer itself
//! for inline handlers — always in order, nothing lost.

use std::thread::ThreadId;

use super::*;

/// Records each added object's name with the thread it was delivered on; `on_call(i)` runs
/// first on the i-th call (from 0).
struct Threads {
    seen: Mutex<Vec<(String, ThreadId)>>,
    on_call: Box<dyn Fn(usize) + Send + Sync>,
}

impl Threads {
    fn new(on_call: impl Fn(usize) + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            seen: Mutex::new(Vec::new()),
            on_call: Box::new(on_call),
        })
    }

    fn names(&self) -> Vec<String> {
        self.seen.lock().iter().map(|(n, _)| n.clone()).collect()
    }
}

impl EventHandler<ConfigMap> for Threads {
    fn on_add(&self, obj: &Arc<ConfigMap>, _initial: bool) {
        let i = self.seen.lock().len();
        (self.on_call)(i);
        let name = obj.metadata.name.clone().unwrap_or_default();
        self.seen.lock().push((name, std::thread::current().id()));
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("c{i:03}")).collect()
}

async fn add_all(src: &FakeSource<ConfigMap>, names: &[String]) {
    for name in names {
        src.upsert(cm(name));
        tokio::task::yield_now().await;
    }
}

/// Calls after the probation on the pool, with room for a slow one (a loaded machine).
const AFTER_PROBATION: usize = QUICK_CALLS_TO_MOVE as usize + 8;

/// Adds each object once the handler has seen the one before: one notification per batch.
async fn add_one_by_one(src: &FakeSource<ConfigMap>, names: &[String], handler: &Threads) {
    for (i, name) in names.iter().enumerate() {
        src.upsert(cm(name));
        eventually(|| handler.seen.lock().len() > i).await;
    }
}

#[tokio::test]
async fn an_adaptive_handler_that_stays_quick_moves_to_the_runtime_s_thread() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let handler = Threads::new(|_| {});
    informer.add_event_handler(Arc::clone(&handler)).unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let want = names(AFTER_PROBATION + 20);
    add_one_by_one(&src, &want, &handler).await;
    assert_eq!(handler.names(), want);
    let runtime_thread = std::thread::current().id();
    let seen = handler.seen.lock().clone();
    assert_ne!(seen[0].1, runtime_thread, "the first calls, on the pool");
    assert!(
        seen[AFTER_PROBATION..]
            .iter()
            .all(|(_, t)| *t == runtime_thread),
        "once shown quick, on the runtime: {:?}",
        seen.iter()
            .map(|(_, t)| *t == runtime_thread)
            .collect::<Vec<_>>()
    );
    run.stop().await;
}

#[tokio::test]
async fn an_adaptive_handler_moves_to_the_blocking_pool_after_a_slow_call_and_loses_nothing() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let runtime_thread = std::thread::current().id();
    // Slow once it has moved to the runtime (its first call there after the probation).
    let slowed = Arc::new(AtomicUsize::new(usize::MAX));
    let s = Arc::clone(&slowed);
    let handler = Threads::new(move |i| {
        if i >= QUICK_CALLS_TO_MOVE as usize
            && std::thread::current().id() == runtime_thread
            && s.compare_exchange(usize::MAX, i, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            std::thread::sleep(SLOW_CALL * 5);
        }
    });
    informer.add_event_handler(Arc::clone(&handler)).unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let want = names(AFTER_PROBATION + 40);
    add_one_by_one(&src, &want, &handler).await;
    assert_eq!(handler.names(), want, "in order, once each");
    let slow_at = slowed.load(Ordering::SeqCst);
    assert!(slow_at < want.len(), "the handler reached the runtime");
    let seen = handler.seen.lock().clone();
    assert!(
        seen[slow_at + 1..]
            .iter()
            .all(|(_, t)| *t != runtime_thread),
        "after a slow call on the runtime, the pool for good"
    );
    run.stop().await;
}

#[tokio::test]
async fn an_adaptive_handler_that_blocks_inside_the_runtime_gets_the_event_again_on_the_pool() {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(1000);
    informer
        .add_event_handler(HandlerFns::new().on_add(move |o: &Arc<ConfigMap>, _| {
            // Panics on a runtime thread; fine on the blocking pool.
            tx.blocking_send(o.metadata.name.clone().unwrap_or_default())
                .unwrap();
        }))
        .unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let want = names(20);
    add_all(&src, &want).await;
    let mut got = Vec::new();
    while got.len() < want.len() {
        let next = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("an event was lost")
            .unwrap();
        got.push(next);
    }
    assert_eq!(got, want, "in order, none lost, none twice");
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_handler_added_during_churn_sees_every_key_added_first_and_ends_equal() {
    let src = FakeSource::new();
    for name in names(100) {
        src.upsert(cm(&name));
    }
    let informer = SharedIndexInformer::new(src.clone(), config());
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let churn = tokio::spawn({
        let src = src.clone();
        async move {
            for round in 0..20 {
                for name in names(100).iter().skip(round % 3).step_by(3) {
                    src.upsert(cm(name));
                }
                tokio::task::yield_now().await;
            }
        }
    });
    let rec = Arc::new(Recorder::default());
    informer
        .add_event_handler_with_config(
            Arc::clone(&rec),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    churn.await.unwrap();
    let want = source_state(&src);
    eventually(|| cache_state(&informer) == want && *rec.state.lock() == want).await;
    let log = rec.log.lock().clone();
    for name in names(100) {
        let first = log
            .iter()
            .find(|l| l.contains(&format!(" ns/{name} ")))
            .unwrap_or_else(|| panic!("no notification for {name}"));
        assert!(first.starts_with("add "), "{name}: {first}");
    }
    run.stop().await;
}

/// A quick handler whose thread the OS hands to other threads in the middle of a call (the call
/// then takes longer than [`SLOW_CALL`] though the handler neither waited nor computed for long)
/// was not slow: it stays on the runtime. The test pins the runtime's thread and three spinning
/// threads to one CPU; every tenth call on the runtime gives the CPU up to them (`sched_yield`,
/// which the OS counts as an involuntary switch, like a preemption) until 3 ms have passed.
/// Linux only: the check reads the thread's account from the OS.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn an_adaptive_handler_the_os_preempts_in_a_call_stays_on_the_runtime() {
    use nix::{
        sched::{CpuSet, sched_getaffinity, sched_setaffinity, sched_yield},
        sys::resource::{UsageWho, getrusage},
        time::{ClockId, clock_gettime},
        unistd::Pid,
    };
    use std::{sync::atomic::AtomicBool, time::Instant};

    let this_thread = Pid::from_raw(0);
    let all = sched_getaffinity(this_thread).unwrap();
    let cpu = (0..CpuSet::count())
        .find(|&c| all.is_set(c).unwrap_or(false))
        .unwrap();
    let mut one = CpuSet::new();
    one.set(cpu).unwrap();
    sched_setaffinity(this_thread, &one).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..3)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                sched_setaffinity(Pid::from_raw(0), &one).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();

    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), config());
    let runtime_thread = std::thread::current().id();
    // Calls on the runtime that took longer than SLOW_CALL while the thread neither waited
    // (no voluntary switch) nor ran for long: other threads had its CPU.
    let preempted = Arc::new(AtomicUsize::new(0));
    let p = Arc::clone(&preempted);
    let handler = Threads::new(move |i| {
        if std::thread::current().id() != runtime_thread || i % 10 != 5 {
            return;
        }
        let waits = || {
            getrusage(UsageWho::RUSAGE_THREAD)
                .unwrap()
                .voluntary_context_switches()
        };
        let cpu = || Duration::from(clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap());
        let (waits_before, cpu_before) = (waits(), cpu());
        let started = Instant::now();
        while started.elapsed() < SLOW_CALL * 3 {
            sched_yield().unwrap();
        }
        if waits() == waits_before && cpu() - cpu_before < SLOW_CALL / 2 {
            p.fetch_add(1, Ordering::SeqCst);
        }
    });
    informer.add_event_handler(Arc::clone(&handler)).unwrap();
    let run = Running::start(&informer);
    informer.wait_for_sync().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut added = Vec::new();
    for name in names(300) {
        src.upsert(cm(&name));
        added.push(name);
        while handler.seen.lock().len() < added.len() {
            assert!(
                Instant::now() < deadline,
                "the handler stopped being called"
            );
            tokio::task::yield_now().await;
        }
        if preempted.load(Ordering::SeqCst) >= 3 {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    sched_setaffinity(this_thread, &all).unwrap();
    assert!(
        preempted.load(Ordering::SeqCst) >= 1,
        "the OS never ran other threads in a call: nothing was shown"
    );
    assert_eq!(handler.names(), added, "in order, once each");
    let seen = handler.seen.lock().clone();
    let off_runtime = seen[AFTER_PROBATION..]
        .iter()
        .filter(|(_, t)| *t != runtime_thread)
        .count();
    assert_eq!(
        off_runtime,
        0,
        "a call the OS interrupted is not a slow one: the handler stays on the runtime ({} such \
         calls)",
        preempted.load(Ordering::SeqCst)
    );
    run.stop().await;
}
