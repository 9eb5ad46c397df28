//! The elector on the in-memory lock, in paused time: one test per applicable client-go
//! leader election test, plus the Rust-side API (state watch, `run_leading`).

mod acquire;
mod config;
mod health;
mod release;
mod renew;

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Config, FakeLock, LeaderElector, LeaseRecord};

/// This candidate's identity (client-go's tests use "baz").
const ME: &str = "baz";
/// How long a test may wait, in paused (virtual) time, before it is considered hung.
const HUNG: Duration = Duration::from_secs(600);

/// A running candidate and what its callbacks saw.
struct Candidate {
    elector: Arc<LeaderElector<FakeLock>>,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
    events: Arc<Mutex<Vec<String>>>,
    leading: Arc<Mutex<Option<CancellationToken>>>,
}

/// client-go's core defaults: lease 15 s, renew deadline 10 s, retry 2 s.
fn config(id: &str, release_on_cancel: bool) -> Config {
    let mut c = Config::new(id);
    c.release_on_cancel = release_on_cancel;
    c
}

fn start(lock: &FakeLock, config: Config) -> Candidate {
    let events = Arc::new(Mutex::new(Vec::new()));
    let leading = Arc::new(Mutex::new(None));
    let (e1, e2, e3, l1) = (
        events.clone(),
        events.clone(),
        events.clone(),
        leading.clone(),
    );
    let elector = Arc::new(
        LeaderElector::new(config, lock.clone())
            .expect("valid config")
            .on_started_leading(move |token| {
                e1.lock().push("started".to_owned());
                *l1.lock() = Some(token);
            })
            .on_stopped_leading(move || e2.lock().push("stopped".to_owned()))
            .on_new_leader(move |id| e3.lock().push(format!("new leader {id}"))),
    );
    let cancel = CancellationToken::new();
    let handle = tokio::spawn({
        let (elector, cancel) = (elector.clone(), cancel.clone());
        async move { elector.run(cancel).await }
    });
    Candidate {
        elector,
        cancel,
        handle,
        events,
        leading,
    }
}

impl Candidate {
    fn events(&self) -> Vec<String> {
        self.events.lock().clone()
    }

    async fn wait_leading(&self) {
        let mut rx = self.elector.watch();
        tokio::time::timeout(HUNG, rx.wait_for(|s| s.is_leading()))
            .await
            .expect("never became leader")
            .expect("elector dropped");
    }

    /// Waits for `run` to return by itself (leadership lost).
    async fn wait_ended(&mut self) {
        tokio::time::timeout(HUNG, &mut self.handle)
            .await
            .expect("run never ended")
            .expect("run panicked");
    }

    /// Cancels the run and waits for it to return.
    async fn stop(mut self) -> Self {
        self.cancel.cancel();
        self.wait_ended().await;
        self
    }

    fn leading_token(&self) -> CancellationToken {
        self.leading.lock().clone().expect("never started leading")
    }
}

/// A record held by `holder` for `secs` seconds.
fn held_by(holder: &str, secs: i32) -> LeaseRecord {
    LeaseRecord {
        holder_identity: holder.to_owned(),
        lease_duration_seconds: secs,
        ..LeaseRecord::default()
    }
}

/// Another candidate that keeps `lock` held by `holder` (renewing every second) until the
/// returned token is cancelled.
fn spawn_holder(lock: &FakeLock, holder: &str, secs: i32) -> CancellationToken {
    let stop = CancellationToken::new();
    let (lock, mut record, token) = (lock.clone(), held_by(holder, secs), stop.clone());
    lock.set_record(record.clone());
    tokio::spawn(async move {
        for i in 1u64.. {
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            record.renew_time = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(i));
            lock.set_record(record.clone());
        }
    });
    stop
}

/// Waits (in paused time) until `cond` holds.
async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let poll = async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(HUNG, poll)
        .await
        .unwrap_or_else(|_| panic!("never happened: {what}"));
}

fn holder(lock: &FakeLock) -> String {
    lock.record().expect("lease exists").holder_identity
}
