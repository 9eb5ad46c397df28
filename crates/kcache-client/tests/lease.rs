//! The Lease client's optimistic concurrency, against the embedded and the upstream server.

mod common;

use anyhow::{Result, ensure};
use common::TestServer;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use kcache_client::{LeaseClient, lease::micro_now};

fn spec(holder: &str, transitions: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(holder.to_owned()),
        lease_duration_seconds: Some(15),
        acquire_time: Some(micro_now()),
        renew_time: Some(micro_now()),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

#[tokio::test]
async fn lease_get_create_update_with_optimistic_concurrency() -> Result<()> {
    for s in TestServer::all().await? {
        let a = LeaseClient::new(s.client.clone(), &s.ns, "leader");
        let b = LeaseClient::new(s.client.clone(), &s.ns, "leader");
        ensure!(
            a.get().await?.is_none(),
            "{}: lease exists before creation",
            s.name
        );

        let created = a.create(spec("a", 0)).await?;
        let rv1 = created.metadata.resource_version.clone();
        ensure!(rv1.is_some(), "{}", s.name);
        // MicroTime went over the wire with six digits and came back equal.
        ensure!(created.spec.as_ref().unwrap().renew_time.is_some());

        let dup = b.create(spec("b", 0)).await.unwrap_err();
        ensure!(dup.is_already_exists(), "{}: {dup}", s.name);

        // a renews with the RV it read.
        let mut renew = a.get().await?.expect("exists");
        renew.spec.as_mut().unwrap().renew_time = Some(micro_now());
        let renewed = a.update(&renew).await?;
        ensure!(
            renewed.metadata.resource_version != rv1,
            "{}: RV unchanged",
            s.name
        );

        // b tries to take over with the stale copy: 409 Conflict.
        let mut stale = created.clone();
        stale.spec = Some(spec("b", 1));
        let conflict = b.update(&stale).await.unwrap_err();
        ensure!(conflict.is_conflict(), "{}: {conflict}", s.name);

        // b reads the current lease and takes over.
        let mut current = b.get().await?.expect("exists");
        current.spec = Some(spec("b", 1));
        let taken = b.update(&current).await?;
        ensure!(
            taken.spec.unwrap().holder_identity.as_deref() == Some("b"),
            "{}",
            s.name
        );
    }
    Ok(())
}
