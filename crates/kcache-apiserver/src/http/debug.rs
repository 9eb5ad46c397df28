//! `/debug/kcache/` fault-injection endpoints (served only when enabled).
//!
//! | request | effect |
//! |---|---|
//! | `POST /debug/kcache/drop-watches` | end every open watch now |
//! | `POST /debug/kcache/compact` | drop all history (older RVs → 410) |
//! | `POST /debug/kcache/fail?count=N&status=500\|429\|410\|503&retryAfter=S` | fail the next N requests |
//! | `POST /debug/kcache/latency?ms=N` | delay every request |
//! | `POST /debug/kcache/stall?on=true\|false` | hold back watch events |
//! | `POST /debug/kcache/truncate?count=N` | cut the next N watch events mid-object |

use std::collections::HashMap;
use std::time::Duration;

use axum::response::Response;
use http::Method;
use serde_json::json;

use super::{AppState, error_response, json_response};
use crate::fault::{FaultHandle, InjectedFailure};
use crate::status::ApiError;

fn num(q: &HashMap<String, String>, key: &str, default: u64) -> Result<u64, ApiError> {
    q.get(key).map_or(Ok(default), |v| {
        v.parse()
            .map_err(|_| ApiError::bad_request(format!("invalid {key}: {v:?}")))
    })
}

pub(crate) fn handle(
    state: &std::sync::Arc<AppState>,
    method: &Method,
    action: &str,
    q: &HashMap<String, String>,
) -> Response {
    let faults = FaultHandle {
        state: state.faults.clone(),
        store: state.store.clone(),
    };
    if action.is_empty() && method == Method::GET {
        return json_response(
            200,
            &json!({"resourceVersion": state.store.current_rv().to_string(),
                    "droppedWatches": faults.dropped_watches()}),
        );
    }
    if method != Method::POST {
        return error_response(&ApiError::method_not_allowed());
    }
    let result: Result<(), ApiError> = (|| {
        match action {
            "drop-watches" => faults.drop_watches(),
            "compact" => faults.compact(),
            "fail" => {
                let count = num(q, "count", 1)?;
                let code = num(q, "status", 500)?;
                let retry = num(q, "retryAfter", 1)?;
                let failure = u16::try_from(code)
                    .ok()
                    .and_then(|c| InjectedFailure::from_code(c, retry))
                    .ok_or_else(|| ApiError::bad_request("status must be 500, 429, 410 or 503"))?;
                faults.fail_next(count, failure);
            }
            "latency" => faults.set_latency(Duration::from_millis(num(q, "ms", 0)?)),
            "stall" => faults.stall_watches(q.get("on").is_none_or(|v| v == "true" || v == "1")),
            "truncate" => {
                let n = num(q, "count", 1)?;
                faults.truncate_next_watch_events(usize::try_from(n).unwrap_or(usize::MAX));
            }
            _ => {
                return Err(ApiError::new(
                    404,
                    "NotFound",
                    format!("unknown fault action {action:?}"),
                ));
            }
        }
        Ok(())
    })();
    match result {
        Ok(()) => json_response(200, &json!({"ok": true, "action": action})),
        Err(e) => error_response(&e),
    }
}
