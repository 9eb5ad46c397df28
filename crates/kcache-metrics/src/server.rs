//! `/metrics`, `/healthz` and `/readyz` on axum.

use std::sync::Arc;

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::get,
};
use prometheus_client::{encoding::text::encode, registry::Registry};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{Checks, checks::Outcome};

#[derive(Clone)]
struct AppState {
    registry: Arc<Registry>,
    checks: Checks,
}

/// The routes, for embedding in an application's own axum server.
pub fn router(registry: Arc<Registry>, checks: Checks) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AppState { registry, checks })
}

/// Serves [`router`] on `listener` until `cancel` fires.
///
/// # Errors
/// The listener's I/O errors.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    checks: Checks,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(registry, checks))
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut body = String::new();
    match encode(&mut body, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("encoding the metrics failed: {e}\n"),
        ),
    }
}

/// kube-apiserver's style: `[+]name ok` / `[-]name failed: why`, then the verdict.
fn report(outcomes: &[Outcome], what: &str) -> (StatusCode, String) {
    let mut body = String::new();
    for o in outcomes {
        match &o.error {
            None => body.push_str(&format!("[+]{} ok\n", o.name)),
            Some(e) => body.push_str(&format!("[-]{} failed: {e}\n", o.name)),
        }
    }
    if outcomes.iter().all(|o| o.error.is_none()) {
        body.push_str(&format!("{what} check passed\n"));
        (StatusCode::OK, body)
    } else {
        body.push_str(&format!("{what} check failed\n"));
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    report(&state.checks.liveness(), "healthz")
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    report(&state.checks.readiness(), "readyz")
}
