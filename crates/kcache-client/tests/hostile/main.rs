//! kcache's informer against a hostile API server: for each named misbehaviour (see
//! `cases.rs`), the informer must stay alive, keep its request rate bounded, report the fault
//! in one clean sentence (no credential, no raw control character, at most ~1 KB), and converge
//! to the server's state — in its cache and in the state its handler events rebuild — once the
//! server heals.
//!
//! Run with `--nocapture` for the summary table (request rates, peak memory of the huge-body
//! cases).

mod cases;
mod server;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use cases::Case;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache::{
    informer::{self, HandlerFns, SharedIndexInformer},
    reflector::Config,
};
use kcache_client::{Client, HttpListerWatcher};
use serde_json::json;
use server::{KICK_MESSAGE, SECRET, Scope, Server};
use tokio_util::sync::CancellationToken;

#[global_allocator]
static ALLOC: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// How long each fault lasts before the server heals.
const FAULT_WINDOW: Duration = Duration::from_secs(8);
/// How long the informer may take to converge once the server healed, in wall-clock time: the
/// backoff reached in the window (≤ 6.4 s base, ≤ 12.8 s with jitter) plus a list and a watch
/// (each under the 3 s [`DEADLINE`]) is at most about 19 s on an idle machine; 35 s leaves the
/// margin a loaded 2-core CI machine needs (CPU-starved, each step can take several times longer).
/// Convergence is what the test asserts, not its speed: the request rate during the fault is
/// the tight bound.
const CONVERGE_WITHIN: Duration = Duration::from_secs(35);
/// The longest error message accepted.
const MAX_MESSAGE: usize = 1024;
/// The reflector's deadlines in these tests: short, so that stalls show within the window.
const DEADLINE: Duration = Duration::from_secs(3);

type State = BTreeMap<String, (String, BTreeMap<String, String>)>;

fn entry(cm: &ConfigMap) -> (String, (String, BTreeMap<String, String>)) {
    (
        cm.metadata.name.clone().unwrap_or_default(),
        (
            cm.metadata.resource_version.clone().unwrap_or_default(),
            cm.data.clone().unwrap_or_default(),
        ),
    )
}

#[derive(Default)]
struct Outcome {
    name: String,
    requests: u64,
    rate: f64,
    faulty: u64,
    errors: usize,
    first_error: String,
    converged_after: Option<Duration>,
    peak_mb: Option<f32>,
    failures: Vec<String>,
}

async fn run_case(case: Case) -> Outcome {
    let mut out = Outcome {
        name: case.name.clone(),
        ..Outcome::default()
    };
    let server = Server::start().await;
    for i in 0..5 {
        server.put(&format!("cm-{i}"), json!({"v": format!("{i}")}));
    }
    let client = Client::from_url(&server.url).unwrap();
    let lw = HttpListerWatcher::<ConfigMap>::namespaced(client, "ns");
    let mut config = Config::default()
        .initial_list(if case.watch_list {
            kcache::reflector::InitialList::Stream
        } else {
            kcache::reflector::InitialList::List
        })
        .list_timeout(DEADLINE)
        .watch_open_timeout(DEADLINE)
        .watch_idle_timeout(DEADLINE);
    config.page_size = case.page_size;
    if let Some(n) = case.max_list_pages {
        config.max_list_pages = n;
    }
    if let Some(max) = case.backoff_max {
        config.backoff.max = max;
    }
    let errors: Arc<Mutex<Vec<(Instant, String, String)>>> = Arc::default();
    let informer = {
        let errors = Arc::clone(&errors);
        SharedIndexInformer::<ConfigMap>::builder(lw)
            .config(informer::Config::default().reflector(config))
            .watch_error_handler(move |e| {
                errors
                    .lock()
                    .unwrap()
                    .push((Instant::now(), e.to_string(), format!("{e:?}")));
            })
            .build()
    };
    let seen: Arc<Mutex<State>> = Arc::default();
    let (s1, s2, s3) = (Arc::clone(&seen), Arc::clone(&seen), Arc::clone(&seen));
    informer
        .add_event_handler(
            HandlerFns::<ConfigMap>::new()
                .on_add(move |o, _| {
                    s1.lock().unwrap().extend([entry(o)]);
                })
                .on_update(move |_, o| {
                    s2.lock().unwrap().extend([entry(o)]);
                })
                .on_delete(move |d| {
                    s3.lock().unwrap().remove(&entry(d.object()).0);
                }),
        )
        .unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    let cache = |informer: &SharedIndexInformer<ConfigMap>| -> State {
        informer.indexer().list().iter().map(|o| entry(o)).collect()
    };
    if tokio::time::timeout(Duration::from_secs(20), informer.wait_for_sync())
        .await
        .is_err()
    {
        out.failures
            .push("never synced with a healthy server".into());
        cancel.cancel();
        return out;
    }
    // Let the first watch live past the 1 s "short watch" mark.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The fault.
    let baseline = ALLOC.current_usage();
    if case.huge {
        ALLOC.reset_peak_usage();
    }
    let before = server.requests();
    let fault_start = Instant::now();
    server.misbehave(case.what.clone(), case.scope, case.lasts);
    match case.scope {
        Scope::Watch => server.kick_close(),
        Scope::List | Scope::Continue | Scope::Streaming | Scope::Any => server.kick_expire(),
    }
    let mut step = 0;
    while fault_start.elapsed() < FAULT_WINDOW {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if task.is_finished() {
            out.failures.push(format!(
                "the informer's task ended during the fault, after {:?}",
                fault_start.elapsed()
            ));
            break;
        }
        let due = fault_start.elapsed().as_secs();
        match (step, due) {
            (0, 1..) => server.put("during-0", json!({"k": "a"})),
            (1, 3..) => server.put("cm-1", json!({"v": "changed"})),
            (2, 5..) => server.delete("cm-2"),
            _ => continue,
        }
        step += 1;
    }
    let window = fault_start.elapsed();
    out.requests = server.requests() - before;
    out.rate = out.requests as f64 / window.as_secs_f64();
    out.faulty = server.faulty_responses();
    if case.huge {
        out.peak_mb = Some(ALLOC.peak_usage().saturating_sub(baseline) as f32 / 1048576.0);
    }
    server.heal();
    if out.faulty == 0 {
        out.failures
            .push("the fault never hit: no request matched its scope".into());
    }
    if let Some(max) = case.max_requests {
        if out.requests > max {
            out.failures
                .push(format!("{} requests in {window:?} > {max}", out.requests));
        }
    } else if out.rate > case.max_rate {
        out.failures.push(format!(
            "{} requests in {window:?}: {:.1}/s > {}/s",
            out.requests, out.rate, case.max_rate
        ));
    }

    // Healed: one more write, then the cache and the handler's state must equal the model.
    server.put("after-heal", json!({"k": "z"}));
    let healed = Instant::now();
    loop {
        let want = server.objects();
        if cache(&informer) == want && *seen.lock().unwrap() == want {
            out.converged_after = Some(healed.elapsed());
            break;
        }
        if healed.elapsed() > CONVERGE_WITHIN {
            out.failures.push(format!(
                "not converged {CONVERGE_WITHIN:?} after healing:\n  model   {want:?}\n  cache   {:?}\n  handler {:?}",
                cache(&informer),
                seen.lock().unwrap()
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if task.is_finished() {
        out.failures.push("the informer's task ended".into());
    }
    cancel.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;

    // The errors it reported.
    let errors = errors.lock().unwrap();
    out.errors = errors.len();
    let own: Vec<&(Instant, String, String)> = errors
        .iter()
        .filter(|(at, msg, _)| *at >= fault_start && !msg.contains(KICK_MESSAGE))
        .collect();
    out.first_error = own
        .first()
        .map(|(_, m, _)| m.chars().take(110).collect())
        .unwrap_or_default();
    if let Some(words) = case.says
        && !own.iter().any(|(_, m, _)| m.contains(words))
    {
        out.failures.push(format!(
            "no reported error says {words:?}: {:?}",
            trunc(&out.first_error)
        ));
    }
    if case.expect_error && own.is_empty() {
        out.failures
            .push("no error reported through the watch error handler".into());
    }
    for (_, msg, debug) in errors.iter() {
        if msg.contains(SECRET) || debug.contains(SECRET) {
            out.failures
                .push(format!("the secret leaked: {:?}", trunc(msg)));
        }
        if msg.chars().any(char::is_control) {
            out.failures
                .push(format!("raw control characters: {:?}", trunc(msg)));
        }
        if msg.len() > MAX_MESSAGE {
            out.failures
                .push(format!("a {}-byte message: {:?}", msg.len(), trunc(msg)));
        }
        if !msg.contains("configmaps") {
            out.failures.push(format!(
                "the message does not name the resource: {:?}",
                trunc(msg)
            ));
        }
    }
    out.failures.dedup();
    out
}

fn trunc(s: &str) -> String {
    s.chars().take(300).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_survives_a_hostile_server_and_converges_once_it_heals() {
    let all = cases::all();
    assert!(all.len() >= 60, "{} cases", all.len());
    let mut names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "case names must be unique");
    let filter = std::env::var("HOSTILE_CASE").ok();
    let (huge, rest): (Vec<Case>, Vec<Case>) = all
        .into_iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f)))
        .partition(|c| c.huge);
    let started = Instant::now();
    let mut outcomes = Vec::new();
    // The huge-body cases one at a time, so that each one's peak memory is its own.
    for case in huge {
        outcomes.push(guarded(case).await);
    }
    let handles: Vec<_> = rest.into_iter().map(|c| tokio::spawn(guarded(c))).collect();
    for h in handles {
        outcomes.push(h.await.expect("a case panicked"));
    }
    eprintln!(
        "\n{:<46} {:>5} {:>6} {:>6} {:>5} {:>8} {:>8}  first error",
        "case", "reqs", "req/s", "faulty", "errs", "converge", "peak MB"
    );
    for o in &outcomes {
        eprintln!(
            "{:<46} {:>5} {:>6.2} {:>6} {:>5} {:>8} {:>8}  {}",
            o.name,
            o.requests,
            o.rate,
            o.faulty,
            o.errors,
            o.converged_after
                .map_or("-".into(), |d| format!("{:.1}s", d.as_secs_f64())),
            o.peak_mb.map_or("-".into(), |m| format!("{m:.0}")),
            o.first_error
        );
    }
    eprintln!("{} cases in {:?}", outcomes.len(), started.elapsed());
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.failures.is_empty())
        .map(|o| format!("{}:\n  {}", o.name, o.failures.join("\n  ")))
        .collect();
    assert!(
        failed.is_empty(),
        "{} cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// A case, with a guard against a hung informer.
async fn guarded(case: Case) -> Outcome {
    let name = case.name.clone();
    match tokio::time::timeout(Duration::from_secs(60), run_case(case)).await {
        Ok(o) => o,
        Err(_) => Outcome {
            name,
            failures: vec!["the case hung for 60 s".into()],
            ..Outcome::default()
        },
    }
}
