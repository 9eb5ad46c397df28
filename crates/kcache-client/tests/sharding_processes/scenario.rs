//! The scenario: objects created and churned, a replica killed and one stopped, and the checks that every object is owned by exactly one live shard.

use super::*;

/// Every ConfigMap of the namespace: key → (shard, annotation, labelled).
pub(super) async fn server_objects(
    s: &TestServer,
    layout: Layout,
) -> Result<BTreeMap<String, (u32, Option<String>, bool)>> {
    let list = s.request("GET", &s.configmaps(), None).await?;
    let mut out = BTreeMap::new();
    for item in list["items"].as_array().context("no items")? {
        let meta = &item["metadata"];
        let name = meta["name"].as_str().unwrap_or_default();
        let uid = meta["uid"].as_str().unwrap_or_default();
        let shard = layout.shard_of_hash(fnv1a64(uid.as_bytes()));
        let by = meta["annotations"]["kcache.dev/reconciled-by"]
            .as_str()
            .map(str::to_owned);
        let labelled = meta["labels"]["kcache.dev/demo"] == "true";
        out.insert(format!("{}/{name}", s.ns), (shard, by, labelled));
    }
    Ok(out)
}

/// Whether every labelled ConfigMap is annotated by the holder of its shard.
pub(super) async fn converged(
    s: &TestServer,
    layout: Layout,
    fleet: &Fleet,
) -> Result<Option<usize>> {
    let Some(owners) = fleet.owners() else {
        return Ok(None);
    };
    let objects = server_objects(s, layout).await?;
    let wrong = objects
        .values()
        .filter(|(shard, by, labelled)| {
            *labelled && by.as_deref() != owners.get(shard).map(String::as_str)
        })
        .count();
    Ok((wrong == 0).then_some(objects.len()))
}

pub(super) async fn create_many(s: &TestServer, prefix: &str, n: usize) -> Result<()> {
    use futures::StreamExt as _;
    let labels = json!({"kcache.dev/demo": "true"});
    let results: Vec<Result<Value>> = futures::stream::iter(0..n)
        .map(|i| {
            let labels = labels.clone();
            async move {
                s.create_cm(
                    &format!("{prefix}-{i}"),
                    labels,
                    json!({"i": i.to_string()}),
                )
                .await
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for r in results {
        r?;
    }
    Ok(())
}

/// Creates, updates and deletes ConfigMaps until `stop` (about 10 changes a second).
pub(super) async fn churn(s: &TestServer, stop: CancellationToken) -> Result<usize> {
    let labels = json!({"kcache.dev/demo": "true"});
    let mut i = 0usize;
    while !stop.is_cancelled() {
        s.create_cm(&format!("churn-{i}"), labels.clone(), json!({"v": "0"}))
            .await?;
        if i >= 1 {
            // Read-modify-write races with the replicas' annotation patches: retry on 409.
            let name = format!("churn-{}", i - 1);
            let mut tries = 0;
            while let Err(e) = s.update_cm(&name, json!({"v": "1"})).await {
                tries += 1;
                ensure!(
                    tries < 10 && e.to_string().contains("409"),
                    "updating {name}: {e}"
                );
            }
        }
        if i >= 5 && i.is_multiple_of(3) {
            s.delete_cm(&format!("churn-{}", i - 5)).await?;
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(i)
}

/// List bytes of one shard's list versus the whole list, from this process.
pub(super) async fn bytes_of_one_shard(
    s: &TestServer,
    layout: Layout,
) -> Result<(u64, u64, usize, usize)> {
    let whole = HttpListerWatcher::<ConfigMap>::namespaced(s.client.clone(), &s.ns);
    let all = whole.list(&ListParams::default()).await?.items.len();
    let selection = Selection::new(Some(layout.selector(&BTreeSet::from([0]))));
    let one = HttpListerWatcher::<ConfigMap>::namespaced(s.client.clone(), &s.ns)
        .shards(selection.clone());
    let part = one.list(&ListParams::default()).await?.items.len();
    ensure!(
        selection.lists_applied() + selection.lists_ignored() == 1,
        "the sharded list was not checked for shardInfo"
    );
    Ok((
        one.wire_stats().list_bytes(),
        whole.wire_stats().list_bytes(),
        part,
        all,
    ))
}

/// One scenario at a time: each runs four processes against one server, and the takeover
/// bound is about behaviour, not about three scenarios fighting over two cores.
pub(super) static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub(super) async fn scenario(
    s: &TestServer,
    kubeconfig: &Path,
    gate_on: Option<bool>,
    dir: PathBuf,
) -> Result<()> {
    let _serial = SERIAL.lock().await;
    let bin = common::example_binary("sharded_controller")?;
    let mut fleet = Fleet {
        bin,
        kubeconfig: kubeconfig.to_owned(),
        ns: s.ns.clone(),
        list_watch: gate_on.is_some(),
        dir,
        children: BTreeMap::new(),
        seen: Arc::default(),
    };
    let out = tokio::time::timeout(SCENARIO_BOUND, run(s, gate_on, &mut fleet)).await;
    let result =
        out.unwrap_or_else(|_| Err(anyhow::anyhow!("scenario exceeded {SCENARIO_BOUND:?}")));
    if result.is_err() {
        eprintln!("{}: sizes {:?}", s.name, fleet.sizes());
        fleet.dump_stderr();
    }
    result
}

pub(super) async fn run(s: &TestServer, gate_on: Option<bool>, fleet: &mut Fleet) -> Result<()> {
    let layout = Layout::new(SHARDS, Field::Uid);
    let started = Instant::now();
    create_many(s, "cm", OBJECTS).await?;
    eprintln!(
        "{}: {OBJECTS} ConfigMaps created in {:?}",
        s.name,
        started.elapsed()
    );

    // The server applies the selector (gate on) or not, and the bytes follow.
    let (part_bytes, all_bytes, part, all) = bytes_of_one_shard(s, layout).await?;
    eprintln!(
        "{}: one shard's list: {part} of {all} objects, {part_bytes} of {all_bytes} bytes",
        s.name
    );
    ensure!(
        part > 0 && part < all / 4,
        "one of 12 shards held {part} of {all}"
    );
    match gate_on {
        Some(true) => ensure!(
            part_bytes * 4 < all_bytes,
            "gate on: one shard's list took {part_bytes} of {all_bytes} bytes"
        ),
        _ => ensure!(
            part_bytes * 10 >= all_bytes * 9,
            "gate off: the server cannot have filtered ({part_bytes} < {all_bytes} bytes)"
        ),
    }

    let stop_churn = CancellationToken::new();
    let churner = {
        let stop = stop_churn.clone();
        async move { churn(s, stop).await }
    };
    tokio::pin!(churner);
    let phases = async {
        for id in ["shard-a", "shard-b", "shard-c"] {
            fleet.spawn(id)?;
        }
        let t0 = Instant::now();
        common::eventually_every(
            POLL,
            "3 replicas at 4/4/4 and every ConfigMap annotated by its shard's holder",
            Duration::from_secs(90),
            async || {
                if fleet.sizes() != [4, 4, 4] {
                    return Ok(None);
                }
                converged(s, layout, fleet).await
            },
        )
        .await?;
        let objects = fleet.seen.lock().unwrap().objects.clone();
        eprintln!(
            "{}: 3 replicas converged in {:?}; objects per replica {objects:?}",
            s.name,
            t0.elapsed()
        );
        let counts: Vec<usize> = objects.values().copied().collect();
        let total: usize = counts.iter().sum();
        for c in &counts {
            ensure!(
                *c * 3 > total / 2 && *c * 3 < total * 2,
                "uneven caches: {counts:?}"
            );
        }

        // A 4th replica joins: 3/3/3/3.
        let join = Instant::now();
        fleet.spawn("shard-d")?;
        common::eventually_every(
            POLL,
            "4 replicas at 3/3/3/3, converged",
            Duration::from_secs(60),
            async || {
                if fleet.sizes() != [3, 3, 3, 3] {
                    return Ok(None);
                }
                converged(s, layout, fleet).await
            },
        )
        .await?;
        eprintln!(
            "{}: rebalanced to 3/3/3/3 and converged {:?} after the join",
            s.name,
            join.elapsed()
        );

        // SIGKILL one: its shards are taken over within the stated bound.
        let victim = "shard-b";
        let lost = fleet.seen.lock().unwrap().current(victim);
        let killed_ms = unix_ms();
        {
            let c = fleet.children.get_mut(victim).context("victim")?;
            c.kill()?;
            c.wait()?;
        }
        fleet.children.remove(victim);
        create_many(s, "after-kill", 20).await?;
        let bound = Duration::from_secs_f64(LEASE_S + 2.0 * RETRY_S + 1.0);
        let took = common::eventually_every(
            POLL,
            "the killed replica's shards taken over",
            bound + Duration::from_secs(10),
            async || {
                let seen = fleet.seen.lock().unwrap();
                let mut latest = 0;
                for shard in &lost {
                    let taken = seen.shards.iter().find(|(id, ms, set)| {
                        id != victim && *ms >= killed_ms && set.contains(shard)
                    });
                    match taken {
                        Some((_, ms, _)) => latest = latest.max(*ms),
                        None => return Ok(None),
                    }
                }
                Ok(Some(latest - killed_ms))
            },
        )
        .await?;
        eprintln!(
            "{}: shards {lost:?} of the SIGKILLed {victim} taken over after {took} ms (lease {LEASE_S} s, retry {RETRY_S} s)",
            s.name
        );
        ensure!(
            took <= bound.as_millis(),
            "takeover took {took} ms > {bound:?}"
        );
        common::eventually_every(
            POLL,
            "3 replicas at 4/4/4 again, converged (after-kill ConfigMaps included)",
            Duration::from_secs(60),
            async || {
                if fleet.sizes() != [4, 4, 4] {
                    return Ok(None);
                }
                converged(s, layout, fleet).await
            },
        )
        .await?;
        anyhow::Ok(())
    };
    let (phases_result, churned) = tokio::select! {
        r = phases => {
            stop_churn.cancel();
            (r, churner.await)
        }
        r = &mut churner => (Err(anyhow::anyhow!("churn stopped early: {r:?}")), Ok(0)),
    };
    let churned = churned?;
    phases_result?;
    eprintln!("{}: {churned} churn rounds", s.name);
    common::eventually_every(
        POLL,
        "converged after the churn",
        Duration::from_secs(30),
        async || converged(s, layout, fleet).await,
    )
    .await?;
    // Quiet for a moment so that every watch has delivered the last changes.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // SIGTERM all: each reports its cache, which must equal the server's objects of its shards.
    let objects = server_objects(s, layout).await?;
    for id in fleet.live() {
        fleet.signal(&id, "-TERM")?;
    }
    for id in fleet.live() {
        let child = fleet.children.get_mut(&id).context("child")?;
        let status = common::eventually_every(
            POLL,
            "a SIGTERMed replica to exit",
            Duration::from_secs(20),
            async || Ok(child.try_wait()?),
        )
        .await?;
        ensure!(status.success(), "{id} exited with {status}");
    }
    let seen = fleet.seen.lock().unwrap();
    for id in fleet.live() {
        let f = seen
            .finals
            .get(&id)
            .with_context(|| format!("{id} printed no FINAL"))?;
        let mine: Vec<&String> = objects
            .iter()
            .filter(|(_, (shard, _, _))| f.shards.contains(shard))
            .map(|(k, _)| k)
            .collect();
        let digest = mine.iter().fold(0u64, |d, k| d ^ fnv1a64(k.as_bytes()));
        ensure!(
            f.count == mine.len() && f.digest == format!("{digest:016x}"),
            "{id}: cache of {} objects (digest {}) but the server has {} in shards {:?} (digest {digest:016x})",
            f.count,
            f.digest,
            mine.len(),
            f.shards
        );
        match gate_on {
            Some(true) => ensure!(f.applied > 0 && f.ignored == 0, "{id}: {f:?}"),
            Some(false) => ensure!(f.ignored > 0 && f.applied == 0, "{id}: {f:?}"),
            None => {}
        }
        eprintln!("{}: {id} final {f:?}", s.name);
    }

    // No key was reconciled by two replicas at once.
    let mut checked = 0;
    for (key, runs) in &seen.reconciles {
        let mut runs = runs.clone();
        runs.sort_by_key(|r| r.1);
        for w in runs.windows(2) {
            if w[0].0 != w[1].0 {
                ensure!(
                    w[1].1 >= w[0].2,
                    "{key} reconciled by two replicas at once: {:?} and {:?}; SHARDS lines: {:?}",
                    w[0],
                    w[1],
                    seen.shards
                );
                checked += 1;
            }
        }
    }
    eprintln!(
        "{}: {checked} handovers of a key between replicas, none overlapping",
        s.name
    );
    ensure!(
        checked > 0,
        "no key ever moved between replicas: the handover was not exercised"
    );
    Ok(())
}

pub(super) fn temp_dir(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kcache-shard-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
