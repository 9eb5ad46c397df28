//! Discovery against a server of our own: transient failures are retried, and a garbage
//! answer is reported as such (not as "cannot connect").

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use axum::{Router, http::StatusCode, routing::get};
use kcache_client::{Client, dynamic::ResourceScope};
use kube_core::GroupVersionKind;

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

const CONFIGMAPS: &str = r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["get","list","watch"]}]}"#;

#[tokio::test]
async fn discovery_retries_a_transient_503_and_succeeds() {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&hits);
    let app = Router::new().route(
        "/api/v1",
        get(move || {
            let n = h.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    (StatusCode::SERVICE_UNAVAILABLE, String::from("try later"))
                } else {
                    (StatusCode::OK, CONFIGMAPS.to_owned())
                }
            }
        }),
    );
    let client = Client::from_url(&serve(app).await).unwrap();
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let (resource, scope) = kcache_client::dynamic::discover(&client, &gvk)
        .await
        .expect("the second attempt succeeds");
    assert_eq!(resource.plural, "configmaps");
    assert_eq!(scope, ResourceScope::Namespaced);
    assert_eq!(hits.load(Ordering::SeqCst), 2, "one retry");
}

#[tokio::test]
async fn discovery_answered_with_garbage_says_so() {
    let app = Router::new().route("/api/v1", get(|| async { "<html>\u{1b}[31mnot json" }));
    let client = Client::from_url(&serve(app).await).unwrap();
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let err = kcache_client::dynamic::discover(&client, &gvk)
        .await
        .expect_err("garbage is an error");
    let text = err.to_string();
    assert!(text.contains("not JSON"), "{text}");
    assert!(
        !text.contains("cannot connect") && !text.contains("cannot reach"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(err.is_unusable_answer(), "{err:?}");
}

#[tokio::test]
async fn discovery_redirected_says_where_to_without_the_query() {
    let app = Router::new().route(
        "/api/v1",
        get(|| async {
            (
                StatusCode::FOUND,
                [(
                    axum::http::header::LOCATION,
                    "https://login.example.com/sso?session=s3cr3t",
                )],
                "<a href=\"https://login.example.com/sso?session=s3cr3t\">Found</a>",
            )
        }),
    );
    let client = Client::from_url(&serve(app).await).unwrap();
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let err = kcache_client::dynamic::discover(&client, &gvk)
        .await
        .expect_err("a redirect is not followed");
    let text = err.to_string();
    assert!(
        text.contains("redirected get /api/v1 to https://login.example.com/sso"),
        "{text}"
    );
    assert!(!text.contains("s3cr3t"), "{text}");
    assert!(
        !text.contains("JSON") && !text.contains("cannot connect"),
        "{text}"
    );
    assert!(err.is_unusable_answer(), "{err:?}");
}

#[tokio::test]
async fn discovery_answered_with_binary_says_binary_body_and_its_size() {
    let app = Router::new().route(
        "/api/v1",
        get(|| async { (0..=255u8).cycle().take(3000).collect::<Vec<u8>>() }),
    );
    let client = Client::from_url(&serve(app).await).unwrap();
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let err = kcache_client::dynamic::discover(&client, &gvk)
        .await
        .expect_err("binary is an error");
    let text = err.to_string();
    assert!(text.contains("not JSON"), "{text}");
    assert!(text.contains("binary body, 3000 bytes"), "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() || c == '\u{fffd}'),
        "{text:?}"
    );
    assert!(err.is_unusable_answer(), "{err:?}");
}
