//! Log lines from an informer's tasks name its resource: the handler tasks and the FIFO's drain
//! run in the `informer{resource=…}` span.
//!
//! A test binary of its own: tracing caches each call site's interest process-wide, and a
//! call site first reached by another test's thread while this test installs its scoped
//! subscriber can cache "never" (a race in tracing-core's registration) - the likely reason one
//! CI run lost the panic line while the lib tests ran in parallel. Alone in its process the
//! test has no such race.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use kcache::informer::{Config, HandlerFns, SharedIndexInformer};
use kcache::{reflector, testing::FakeSource, testing::config_map as cm};

/// A `MakeWriter` into a shared buffer.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_handler_panic_is_logged_under_the_informer_s_resource() {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    // The current-thread runtime runs every task on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);

    let src = FakeSource::new();
    src.upsert(cm("a"));
    let config = Config::default().reflector(reflector::Config::default().name("configmaps in ns"));
    let informer = SharedIndexInformer::<ConfigMap>::new(src, config);
    let reg = informer
        .add_event_handler(HandlerFns::new().on_add(|_, _| panic!("boom")))
        .unwrap();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    assert!(reg.synced().await);
    for _ in 0..1000 {
        if String::from_utf8_lossy(&logs.0.lock()).contains("panicked") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    cancel.cancel();
    run.await.unwrap();
    let text = String::from_utf8_lossy(&logs.0.lock()).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("event handler panicked"))
        .expect("the panic is logged");
    assert!(
        line.contains("informer{resource=configmaps in ns}"),
        "the log line does not name the resource: {line}"
    );
}
