//! The HTTP front: authentication, body limits, fault gates, routing of Kubernetes REST
//! paths, and rendering of responses.

mod admit;
mod authn;
mod crud;
mod debug;
mod delete;
mod discovery;
mod list;
pub(crate) mod negotiate;
mod openapi;
pub(crate) mod params;
pub(crate) mod table;
mod watch;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use futures::FutureExt;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::object::protobuf;
use crate::resource::Registry;
use crate::status::ApiError;

pub(crate) use crate::registry::{AppState, Target, delete_object, get_object};
pub(crate) use crud::token_identity;

/// Serves until `shutdown` is cancelled.
pub(crate) async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: CancellationToken,
    tls: Option<crate::tls::Material>,
) {
    let maint_state = state.clone();
    let maint_stop = shutdown.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tokio::select! {
                () = maint_stop.cancelled() => break,
                _ = tick.tick() => {
                    maint_state.store.maintain();
                    let _ = crate::ServerHandle { state: maint_state.clone() }.aggregate_cluster_roles();
                    crate::registry::finalize_namespaces(&maint_state);
                }
            }
        }
    });
    let app = axum::Router::new().fallback(entry).with_state(state);
    let stop = shutdown.clone();
    let stopped = async move { stop.cancelled().await };
    let result = match tls {
        Some(material) => match crate::tls::TlsListener::new(listener, &material, shutdown) {
            Ok(l) => {
                let app = app.into_make_service_with_connect_info::<crate::tls::Peer>();
                axum::serve(l, app).with_graceful_shutdown(stopped).await
            }
            Err(e) => Err(e),
        },
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
        }
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, "kcache-apiserver stopped with an error");
    }
}

async fn entry(State(state): State<Arc<AppState>>, mut req: Request) -> Response {
    // The verified client certificate of the connection, if any, for the authenticator.
    let certificate = req
        .extensions()
        .get::<axum::extract::ConnectInfo<crate::tls::Peer>>()
        .and_then(|peer| peer.0.certificate.clone());
    if let Some(certificate) = certificate {
        req.extensions_mut().insert(certificate);
    }
    let resp = match AssertUnwindSafe(handle(state, req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(_) => error_response(&ApiError::internal(
            "the server panicked handling this request",
        )),
    };
    tracing::debug!(
        status = resp.status().as_u16(),
        content_type = ?resp.headers().get(CONTENT_TYPE),
        "response"
    );
    resp
}

/// A JSON response with a trailing newline.
pub(crate) fn json_response(code: u16, body: &Value) -> Response {
    let mut bytes = serde_json::to_vec(body).unwrap_or_default();
    bytes.push(b'\n');
    bytes_response(code, "application/json", Bytes::from(bytes))
}

pub(crate) fn bytes_response(code: u16, content_type: &'static str, body: Bytes) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// The Status response for an error.
pub(crate) fn error_response(e: &ApiError) -> Response {
    with_retry_after(json_response(e.code, &e.to_status()), e)
}

/// The Status response for an error, in protobuf (kube-apiserver encodes errors with the
/// serializer negotiated for the request).
pub(crate) fn protobuf_error_response(e: &ApiError) -> Response {
    let body = protobuf::encode::status(e);
    with_retry_after(bytes_response(e.code, protobuf::CONTENT_TYPE, body), e)
}

fn with_retry_after(mut resp: Response, e: &ApiError) -> Response {
    if let Some(secs) = e.retry_after {
        resp.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

fn text_not_found() -> Response {
    bytes_response(
        404,
        "text/plain; charset=utf-8",
        Bytes::from_static(b"404 page not found\n"),
    )
}

#[derive(Debug)]
pub(crate) enum Route {
    Version,
    Api,
    Apis,
    Group(String),
    GroupVersion(String, String),
    Resource(Target),
    Debug(String),
    OpenApi(String),
    Health,
    UnknownResource,
    NotFound,
}

/// Maps a URL path onto a route.
pub(crate) fn route(registry: &Registry, path: &str) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz"] => Route::Health,
        ["debug", "kcache", rest @ ..] => Route::Debug(rest.join("/")),
        ["openapi", rest @ ..] => Route::OpenApi(rest.join("/")),
        ["api"] => Route::Api,
        ["apis"] => Route::Apis,
        ["api", version, rest @ ..] => {
            if !registry.has_group_version("", version) {
                // kube-apiserver: a Status 404 under /api/<unknown version>/..., text for the
                // version itself.
                return if rest.is_empty() {
                    Route::NotFound
                } else {
                    Route::UnknownResource
                };
            }
            if rest.is_empty() {
                return Route::GroupVersion(String::new(), (*version).to_owned());
            }
            resource_route(registry, "", version, rest)
        }
        ["apis", group] => {
            if registry.all().iter().any(|r| r.group == *group) {
                Route::Group((*group).to_owned())
            } else {
                Route::NotFound
            }
        }
        ["apis", group, version, rest @ ..] => {
            if !registry.has_group_version(group, version) {
                return Route::NotFound;
            }
            if rest.is_empty() {
                return Route::GroupVersion((*group).to_owned(), (*version).to_owned());
            }
            resource_route(registry, group, version, rest)
        }
        _ => Route::NotFound,
    }
}

fn resource_route(registry: &Registry, group: &str, version: &str, rest: &[&str]) -> Route {
    match crate::registry::resolve(registry, group, version, rest) {
        Some(t) => Route::Resource(t),
        None => Route::UnknownResource,
    }
}

/// Reads the body, answering 413 past the limit.
async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let limited = http_body_util::Limited::new(body, limit);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::too_large_body(limit))
        }
        Err(e) => Err(ApiError::bad_request(format!(
            "error reading the request body: {e}"
        ))),
    }
}

/// Who the request acts as (authentication, then impersonation), and whether it may do what
/// it asks (RBAC): the user, or the 401 / 400 / 403 answer.
fn authorized(
    state: &AppState,
    req: &Request,
    attrs: &crate::auth::attrs::Attributes,
) -> Result<crate::auth::UserInfo, ApiError> {
    let cert = req.extensions().get::<crate::tls::ClientCertificate>();
    let user = authn::authenticate(state, req.headers(), cert)?;
    let user = crate::auth::impersonate::impersonate(&state.authz(), user, req.headers(), attrs)?;
    let decision = crate::auth::rbac::authorize(&state.authz(), &user, attrs);
    state.auth.recorder.record(&user, attrs, decision.is_ok());
    decision.map_err(|reason| crate::auth::attrs::forbidden(&user, attrs, &reason))?;
    Ok(user)
}

/// The escalation and bind checks of a write of a role or binding: the object as it would be
/// stored (the JSON body of a POST or PUT, else the answer of the same request as a dry run)
/// checked against what `user` holds.
async fn check_escalation(
    state: &Arc<AppState>,
    parts: &http::request::Parts,
    target: &Target,
    query: &HashMap<String, String>,
    body: &Bytes,
    user: &crate::auth::UserInfo,
    attrs: &crate::auth::attrs::Attributes,
) -> Result<(), ApiError> {
    let direct = matches!(parts.method, Method::POST | Method::PUT)
        && parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|c| c.starts_with("application/json"));
    let object = match serde_json::from_slice::<Value>(body)
        .ok()
        .filter(|_| direct)
    {
        Some(o) => o,
        None => {
            let mut r = http::Request::new(());
            *r.method_mut() = parts.method.clone();
            *r.uri_mut() = parts.uri.clone();
            *r.headers_mut() = parts.headers.clone();
            r.headers_mut().insert(
                http::header::ACCEPT,
                HeaderValue::from_static("application/json"),
            );
            let dry_parts = r.into_parts().0;
            let mut dry_query = query.clone();
            dry_query.insert("dryRun".into(), "All".into());
            let resp =
                dispatch(state, &dry_parts, target.clone(), &dry_query, body.clone()).await?;
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        }
    };
    crate::auth::escalation::check(&state.authz(), user, attrs, &object)
}

/// The verb of a request (kube-apiserver's names, as discovery lists them).
fn request_verb(target: &Target, method: &Method, query: &HashMap<String, String>) -> &'static str {
    let watch = target.watch_path || query.get("watch").is_some_and(|v| v == "1" || v == "true");
    match (target.name.is_some(), method.as_str()) {
        (_, "GET") if watch => "watch",
        (false, "GET") => "list",
        (true, "GET") => "get",
        (_, "POST") => "create",
        (_, "PUT") => "update",
        (_, "PATCH") => "patch",
        (true, "DELETE") => "delete",
        (false, "DELETE") => "deletecollection",
        _ => "",
    }
}

/// 405 for a verb the resource (or subresource) does not serve; 404 for a named object of a
/// resource that has none (a review kind), as kube-apiserver answers.
pub(super) fn check_verb(
    target: &Target,
    method: &Method,
    query: &HashMap<String, String>,
) -> Result<(), ApiError> {
    let verb = request_verb(target, method, query);
    let allowed = match &target.sub {
        Some(sub) => discovery::subresource_verbs(&target.info, sub)
            .iter()
            .any(|v| v == verb),
        None => target.info.allows(verb),
    };
    if allowed {
        return Ok(());
    }
    if target.sub.is_none() && target.name.is_some() && !target.info.allows("get") {
        return Err(ApiError::unknown_resource());
    }
    Err(ApiError::method_not_allowed())
}

async fn handle(state: Arc<AppState>, mut req: Request) -> Response {
    let path = req.uri().path().to_owned();
    let attrs =
        crate::auth::attrs::request_attributes(req.method().as_str(), &path, req.uri().query());
    let user = match authorized(&state, &req, &attrs) {
        Ok(u) => u,
        Err(e) => {
            let protobuf = negotiate::output(req.headers(), true)
                == Ok(negotiate::Output::Protobuf)
                && e.code == 403
                && attrs.resource_request;
            return if protobuf {
                protobuf_error_response(&e)
            } else {
                error_response(&e)
            };
        }
    };
    req.extensions_mut().insert(user.clone());
    tracing::debug!(
        method = %req.method(),
        uri = %req.uri(),
        content_type = ?req.headers().get(CONTENT_TYPE),
        accept = ?req.headers().get(http::header::ACCEPT),
        "request"
    );
    let query: HashMap<String, String> =
        axum::extract::Query::<HashMap<String, String>>::try_from_uri(req.uri())
            .map(|q| q.0)
            .unwrap_or_default();
    let route = route(&state.registry, &path);
    // Errors are Status objects in the representation negotiated for the resource.
    let protobuf_errors = matches!(&route, Route::Resource(t)
        if negotiate::output(req.headers(), protobuf::supports(&t.info)) == Ok(negotiate::Output::Protobuf));
    if let Route::Debug(action) = &route {
        if !state.config.enable_faults_http {
            return text_not_found();
        }
        return debug::handle(&state, req.method(), action, &query);
    }
    let latency = state.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let is_watch = matches!(&route, Route::Resource(t) if t.watch_path)
        || query.get("watch").is_some_and(|v| v == "1" || v == "true");
    if let Some(failure) = state.faults.take_failure() {
        let err = failure.to_error();
        if is_watch && err.code == 410 {
            return watch::error_stream(&err, protobuf_errors);
        }
        if protobuf_errors {
            return protobuf_error_response(&err);
        }
        return error_response(&err);
    }
    let (parts, body) = req.into_parts();
    let result = match route {
        Route::Version => Ok(discovery::version()),
        Route::Health => Ok(bytes_response(
            200,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"ok"),
        )),
        Route::Api | Route::Apis | Route::Group(_) | Route::GroupVersion(..) => {
            if parts.method != Method::GET {
                Err(ApiError::method_not_allowed())
            } else {
                discovery::handle(&state, &route, &parts.headers)
            }
        }
        Route::Resource(target) => {
            let body = match parts.method {
                Method::POST | Method::PUT | Method::PATCH | Method::DELETE => {
                    match read_body(body, state.config.body_limit).await {
                        Ok(b) => b,
                        Err(e) => return error_response(&e),
                    }
                }
                _ => Bytes::new(),
            };
            if crate::auth::escalation::applies(&state.authz(), &user, &attrs)
                && let Err(e) =
                    check_escalation(&state, &parts, &target, &query, &body, &user, &attrs).await
            {
                return error_response(&e);
            }
            let aggregate = target.info.group == crate::auth::rbac::GROUP
                && target.info.plural == "clusterroles"
                && parts.method != Method::GET;
            let result = admit::dispatch_admitted(&state, &parts, target, &query, body).await;
            if aggregate {
                let _ = crate::ServerHandle {
                    state: state.clone(),
                }
                .aggregate_cluster_roles();
            }
            result
        }
        Route::OpenApi(rest) => match openapi::serve(&state, &rest, accept_header(&parts)) {
            Some(r) => Ok(r),
            None => return text_not_found(),
        },
        Route::UnknownResource => Err(ApiError::unknown_resource()),
        Route::Debug(_) | Route::NotFound => return text_not_found(),
    };
    result.unwrap_or_else(|e| {
        if protobuf_errors {
            protobuf_error_response(&e)
        } else {
            error_response(&e)
        }
    })
}

fn accept_header(parts: &http::request::Parts) -> &str {
    parts
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn dispatch(
    state: &Arc<AppState>,
    parts: &http::request::Parts,
    target: Target,
    query: &HashMap<String, String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let method = &parts.method;
    let headers = &parts.headers;
    check_verb(&target, method, query)?;
    let sub = target.sub.as_deref();
    match (target.name.is_some(), method.clone()) {
        (true, Method::POST) if sub == Some("eviction") => {
            crud::evict(state, &target, query, headers, &body)
        }
        (true, Method::POST) if sub == Some("binding") => {
            crud::bind(state, &target, query, headers, &body)
        }
        (true, Method::POST) if sub == Some("token") => {
            crud::token(state, &target, query, headers, &body)
        }
        (false, Method::POST) if crud::is_core_binding(&target.info) => {
            crud::bind(state, &target, query, headers, &body)
        }
        (false, Method::POST) if crud::is_review(&target.info) => {
            let user = parts
                .extensions
                .get::<crate::auth::UserInfo>()
                .cloned()
                .unwrap_or_else(crate::auth::UserInfo::admin);
            crud::review(state, &target, query, headers, &body, &user)
        }
        (false, Method::GET) => {
            let out = negotiate::output(headers, protobuf::supports(&target.info))?;
            let labels = crate::selector::field_labels(&target.info);
            let params = params::ListParams::parse(query, target.watch_path, labels)?;
            if params.watch {
                watch::watch(state, &target, params, out, query).await
            } else {
                list::list(state, &target, &params, out, query).await
            }
        }
        (true, Method::GET) if target.watch_path => {
            let out = negotiate::output(headers, protobuf::supports(&target.info))?;
            let mut q = query.clone();
            let name = target.name.clone().unwrap_or_default();
            q.insert("fieldSelector".into(), format!("metadata.name={name}"));
            let params =
                params::ListParams::parse(&q, true, crate::selector::field_labels(&target.info))?;
            let t = Target {
                name: None,
                ..target
            };
            watch::watch(state, &t, params, out, query).await
        }
        (true, Method::GET) if target.sub.as_deref() == Some("scale") => {
            crud::get_scale(state, &target, headers)
        }
        (true, Method::PUT) if target.sub.as_deref() == Some("scale") => {
            crud::update_scale(state, &target, query, headers, &body)
        }
        (true, Method::PATCH) if target.sub.as_deref() == Some("scale") => {
            crud::patch_scale(state, &target, query, headers, &body)
        }
        (true, Method::GET) => crud::get(state, &target, query, headers).await,
        (false, Method::POST) => crud::create(state, &target, query, headers, &body),
        (true, Method::PUT) => crud::update(state, &target, query, headers, &body),
        (true, Method::PATCH) => crud::patch(state, &target, query, headers, &body),
        (true, Method::DELETE) => delete::delete(state, &target, query, headers, &body),
        (false, Method::DELETE) => delete::delete_collection(state, &target, query, headers, &body),
        _ => Err(ApiError::method_not_allowed()),
    }
}
