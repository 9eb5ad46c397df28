//! kcache's LeaderElector over HTTP (HttpLeaseLock on LeaseClient): two candidates on one
//! Lease, against the embedded server and, when requested, the upstream kube-apiserver.
//!
//! Durations: lease 2 s, renew deadline 1.5 s, retry period 0.5 s (acquire attempts every
//! 0.5–1.1 s with jitter). Every wait is bounded by `HANG_GUARD`.

mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use common::TestServer;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use kcache::leaderelection::{Config, LeaderElector};
use kcache_client::{HttpLeaseLock, LeaseClient};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A guard against a hung election; not a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(30);
const LEASE: Duration = Duration::from_secs(2);
const LEASE_NAME: &str = "leader-election-it";

struct Candidate {
    id: &'static str,
    elector: Arc<LeaderElector<HttpLeaseLock>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

fn start(s: &TestServer, id: &'static str) -> Result<Candidate> {
    let mut config = Config::new(id);
    config.lease_duration = LEASE;
    config.renew_deadline = Duration::from_millis(1500);
    config.retry_period = Duration::from_millis(500);
    config.release_on_cancel = true;
    let lock = HttpLeaseLock::new(LeaseClient::new(s.client.clone(), &s.ns, LEASE_NAME));
    let elector = Arc::new(LeaderElector::new(config, lock)?);
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (elector, cancel) = (elector.clone(), cancel.clone());
        async move { elector.run(cancel).await }
    });
    Ok(Candidate {
        id,
        elector,
        cancel,
        task,
    })
}

impl Candidate {
    async fn stop(self) -> Result<()> {
        self.cancel.cancel();
        tokio::time::timeout(HANG_GUARD, self.task)
            .await
            .with_context(|| format!("{}: run did not return after cancel", self.id))??;
        Ok(())
    }
}

async fn spec(s: &TestServer) -> Result<LeaseSpec> {
    let lease = LeaseClient::new(s.client.clone(), &s.ns, LEASE_NAME)
        .get()
        .await?
        .context("the Lease does not exist")?;
    lease.spec.context("the Lease has no spec")
}

async fn holder(s: &TestServer) -> Result<String> {
    Ok(spec(s).await?.holder_identity.unwrap_or_default())
}

/// Polls until exactly one of `cs` leads; returns its index.
async fn one_leader(s: &TestServer, cs: &[&Candidate]) -> Result<usize> {
    let begin = Instant::now();
    loop {
        let leading: Vec<usize> = (0..cs.len())
            .filter(|&i| cs[i].elector.is_leader())
            .collect();
        match leading[..] {
            [i] => return Ok(i),
            [] if begin.elapsed() < HANG_GUARD => {}
            [] => bail!("{}: nobody leads after {HANG_GUARD:?}", s.name),
            _ => bail!("{}: several candidates lead: {leading:?}", s.name),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn two_electors_one_leader_and_a_prompt_hand_over_on_release() -> Result<()> {
    for s in TestServer::all().await? {
        let a = start(&s, "candidate-a")?;
        let b = start(&s, "candidate-b")?;

        let first = one_leader(&s, &[&a, &b]).await?;
        // Several lease durations: the same one leads throughout, the other stands by.
        let until = Instant::now() + 2 * LEASE;
        while Instant::now() < until {
            ensure!(
                one_leader(&s, &[&a, &b]).await? == first,
                "{}: leadership moved while the leader was healthy",
                s.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (leader, standby) = if first == 0 { (a, b) } else { (b, a) };
        ensure!(
            holder(&s).await? == leader.id,
            "{}: the Lease names {:?}, not the leader {}",
            s.name,
            holder(&s).await?,
            leader.id
        );
        ensure!(standby.elector.leader().as_deref() == Some(leader.id));

        // Cancel the leader: it releases, and the standby takes over on its next attempt,
        // sooner than the 2 s it would have to wait for an unreleased lease.
        let cancelled = Instant::now();
        let leader_id = leader.id;
        leader.stop().await?;
        let after_release = holder(&s).await?;
        ensure!(
            after_release.is_empty() || after_release == standby.id,
            "{}: {leader_id} did not release the Lease (holder {after_release:?})",
            s.name
        );
        one_leader(&s, &[&standby]).await?;
        let took = cancelled.elapsed();
        ensure!(
            took < LEASE,
            "{}: the standby took {took:?} to take over a released lease",
            s.name
        );
        let taken = spec(&s).await?;
        ensure!(
            taken.holder_identity.as_deref() == Some(standby.id)
                && taken.lease_transitions == Some(1)
                && taken.lease_duration_seconds == Some(2),
            "{}: after the hand-over the Lease is {taken:?}",
            s.name
        );

        let standby_id = standby.id;
        standby.stop().await?;
        ensure!(
            holder(&s).await?.is_empty(),
            "{}: {standby_id} did not release the Lease",
            s.name
        );
    }
    Ok(())
}
