//! Running a [`Manager`]: start, follow the election, shut down in order.

use std::{collections::HashMap, sync::Arc};

use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Error, Manager};

impl Manager {
    /// Runs everything until SIGTERM or SIGINT (Ctrl-C), then shuts down as
    /// [`run_until`](Self::run_until) describes.
    ///
    /// # Errors
    /// As [`run_until`](Self::run_until).
    pub async fn run(self) -> Result<(), Error> {
        let shutdown = CancellationToken::new();
        let signals = tokio::spawn(cancel_on_signal(shutdown.clone()));
        let result = self.run_until(shutdown).await;
        signals.abort();
        result
    }

    /// Runs everything until `shutdown` fires:
    ///
    /// 1. serves `/metrics`, `/healthz` (`/livez`) and `/readyz` (ready once every informer
    ///    has synced and keeps up);
    /// 2. starts every informer, on every replica (warm standby), and waits until every
    ///    cache has synced (each informer of a namespace set) or `shutdown` fires, before
    ///    any controller starts;
    /// 3. with leader election, competes for the lease, and again each time it is lost;
    /// 4. runs the controllers: their workers reconcile while this replica leads (always,
    ///    without leader election); a replica that starts leading queues every cached
    ///    primary object, without a new list.
    ///
    /// Then, on `shutdown`: the controllers stop taking keys and the reconciles in flight
    /// finish, for at most [`Config::graceful_shutdown_timeout`](super::Config) (past it
    /// they are aborted); only then is the lease released (a standby takes over at once),
    /// the informers stopped and the server closed.
    ///
    /// # Errors
    /// [`Error::Controller`] or [`Error::ControllerPanicked`] when a controller stopped on its
    /// own (the manager then shuts down), [`Error::DrainTimeout`] when the reconciles did not
    /// finish in time, [`Error::Serve`] when the server failed.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn run_until(self, shutdown: CancellationToken) -> Result<(), Error> {
        let Manager {
            shared,
            registry,
            elector,
            listener,
            controllers,
            checks,
            ..
        } = self;
        let manager = shared.config.name.clone();
        let serve_error = |source| Error::Serve {
            manager: manager.clone(),
            source,
        };
        let server_stop = CancellationToken::new();
        let server = match listener.into_inner() {
            None => None,
            Some(listener) => {
                listener.set_nonblocking(true).map_err(serve_error)?;
                let listener = tokio::net::TcpListener::from_std(listener).map_err(serve_error)?;
                Some(tokio::spawn(kcache_metrics::serve(
                    listener,
                    Arc::clone(&registry),
                    checks.into_inner(),
                    server_stop.clone(),
                )))
            }
        };
        // The main factory, and one per namespace of the caches of namespace sets.
        let sets = shared.sets.all();
        let informers = shared.factory.start() + sets.iter().map(|f| f.start()).sum::<usize>();
        info!(%manager, identity = %shared.identity, informers, "manager started its informers");
        // As controller-runtime's manager: every cache made so far (every informer of a set)
        // syncs before a controller starts, so that no reconcile reads a cache still listing.
        let synced = futures::future::join(
            shared.factory.wait_for_cache_sync(),
            futures::future::join_all(sets.iter().map(|f| f.wait_for_cache_sync())),
        );
        tokio::select! {
            _ = synced => {}
            () = shutdown.cancelled() => {}
        }

        let election = CancellationToken::new();
        let election_task = elector.as_ref().map(|elector| {
            let (elector, election) = (Arc::clone(elector), election.clone());
            // `run` returns when leadership is lost: compete again, as a warm standby.
            tokio::spawn(async move {
                while !election.is_cancelled() {
                    elector.run(election.clone()).await;
                }
            })
        });

        let stop = shared.stopping.clone();
        let mut tasks = JoinSet::new();
        let mut names = HashMap::new();
        for (name, run) in controllers.into_inner() {
            let leading = elector.as_ref().map(|e| e.watch());
            let handle = tasks.spawn(run(leading, stop.clone()));
            names.insert(handle.id(), name);
        }

        let mut failure = None;
        while failure.is_none() {
            tokio::select! {
                () = shutdown.cancelled() => break,
                Some(ended) = tasks.join_next_with_id() => failure = stopped(ended, &mut names),
            }
        }
        if let Some(e) = &failure {
            warn!(%manager, error = %e, "shutting down");
        }

        info!(%manager, "draining the reconciles in flight");
        stop.cancel();
        let grace = shared.config.graceful_shutdown_timeout;
        let deadline = tokio::time::sleep(grace);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                ended = tasks.join_next_with_id() => match ended {
                    None => break,
                    Some(ended) => {
                        if let Some(e) = stopped(ended, &mut names) {
                            failure.get_or_insert(e);
                        }
                    }
                },
                () = &mut deadline => {
                    let mut controllers: Vec<String> = names.values().cloned().collect();
                    controllers.sort();
                    warn!(%manager, ?controllers, ?grace, "reconciles still running at the shutdown deadline; aborting them");
                    tasks.abort_all();
                    while tasks.join_next().await.is_some() {}
                    failure.get_or_insert(Error::DrainTimeout {
                        manager: manager.clone(),
                        controllers,
                        timeout: grace,
                    });
                    break;
                }
            }
        }
        // No reconcile runs here any more: release the lease.
        election.cancel();
        if let Some(task) = election_task {
            let _ = task.await;
        }
        futures::future::join(
            shared.factory.shutdown(),
            futures::future::join_all(sets.iter().map(|f| f.shutdown())),
        )
        .await;
        server_stop.cancel();
        if let Some(server) = server
            && let Ok(Err(e)) = server.await
        {
            failure.get_or_insert(serve_error(e));
        }
        info!(%manager, "manager stopped");
        failure.map_or(Ok(()), Err)
    }
}

/// What a controller task's end means: `None` for a clean stop.
fn stopped(
    ended: Result<(tokio::task::Id, Result<(), kcache::controller::Error>), JoinError>,
    names: &mut HashMap<tokio::task::Id, String>,
) -> Option<Error> {
    match ended {
        Ok((id, result)) => {
            let controller = names.remove(&id).unwrap_or_default();
            result
                .err()
                .map(|source| Error::Controller { controller, source })
        }
        Err(join) => {
            let controller = names.remove(&join.id()).unwrap_or_default();
            join.is_panic().then(|| Error::ControllerPanicked {
                controller,
                message: panic_message(join),
            })
        }
    }
}

fn panic_message(join: JoinError) -> String {
    let payload = join.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-string panic payload>".to_owned())
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
async fn cancel_on_signal(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = term.recv() => info!("SIGTERM: shutting down"),
                _ = tokio::signal::ctrl_c() => info!("SIGINT: shutting down"),
            },
            Err(e) => {
                warn!(error = %e, "cannot listen for SIGTERM; shutting down on SIGINT only");
                let _ = tokio::signal::ctrl_c().await;
                info!("SIGINT: shutting down");
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        info!("Ctrl-C: shutting down");
    }
    shutdown.cancel();
}
