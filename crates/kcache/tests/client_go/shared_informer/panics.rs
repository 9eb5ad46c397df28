//! `shared_informer_test.go`: a handler that panics.

use super::*;

/// A `MakeWriter` into a shared buffer, for the log lines of handler panics.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }
}

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

/// Logs of this thread go to the returned buffer while the guard lives (the paused-time
/// runtime runs every task on the test's thread).
fn capture_logs() -> (Logs, tracing::subscriber::DefaultGuard) {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    (logs.clone(), tracing::subscriber::set_default(subscriber))
}

/// The handler of `TestEventPanics`: every add panics with "fake panic".
fn panicking_handler() -> HandlerFns<Pod> {
    HandlerFns::new().on_add(|_: &Arc<Pod>, _| panic!("fake panic"))
}

/// The line client-go logs for a handler panic: `"Observed a panic" panic="fake panic"`, with
/// the handler's logger name when it has one. kcache logs "event handler panicked" with the
/// handler's name and the object's key; the panic's value must be on the line too.
fn panic_lines(logs: &str, handler: Option<&str>) -> usize {
    logs.lines()
        .filter(|l| l.contains("event handler panicked") && l.contains("fake panic"))
        .filter(|l| handler.is_none_or(|h| l.contains(&format!("handler={h}"))))
        .count()
}

async fn eventually_logged(logs: &Logs, what: &str, cond: impl Fn(&str) -> bool) {
    tokio::time::timeout(WAIT, async {
        while !cond(&logs.text()) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}; the log:\n{}", logs.text()));
}

#[tokio::test(start_paused = true)]
async fn test_event_panics__simple() {
    let (logs, _guard) = capture_logs();
    let src = FakeSource::<Pod>::new();
    src.upsert(pod("pod1"));
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let handle = informer
        .add_event_handler_with_config(
            panicking_handler(),
            HandlerConfig::default().delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    eventually_logged(&logs, "the handler's panic was not logged", |text| {
        panic_lines(text, None) >= 1
    })
    .await;
    run.stop().await;
    assert!(informer.is_stopped());
    handle.remove();
}

/// Five pods, two named handlers that panic on every add: each panic is logged under its
/// handler's name. client-go also pauses a handler for a second after each panic (its
/// `processorListener.run` is restarted by `wait.Until`); kcache goes on with the next
/// notification at once, so that timing is not ported.
#[tokio::test(start_paused = true)]
async fn test_event_panics__many() {
    let (logs, _guard) = capture_logs();
    let src = FakeSource::<Pod>::new();
    let num_pods = 5;
    for i in 0..num_pods {
        src.upsert(pod(&format!("pod{}", i + 1)));
    }
    let informer = informer_with_resync(&src, Duration::from_secs(1));
    let name1 = "fake-event-handler-1";
    let name2 = "fake-event-handler-2";
    let handle1 = informer
        .add_event_handler_with_config(
            panicking_handler(),
            HandlerConfig::default()
                .name(name1)
                .delivery(Delivery::Inline),
        )
        .unwrap();
    let handle2 = informer
        .add_event_handler_with_config(
            panicking_handler(),
            HandlerConfig::default()
                .name(name2)
                .delivery(Delivery::Inline),
        )
        .unwrap();
    let run = Running::start(&informer);
    wait_for_sync(&informer).await;
    eventually_logged(&logs, "not every panic was logged", |text| {
        panic_lines(text, Some(name1)) >= num_pods && panic_lines(text, Some(name2)) >= num_pods
    })
    .await;
    let text = logs.text();
    assert_eq!(panic_lines(&text, Some(name1)), num_pods, "{text}");
    assert_eq!(panic_lines(&text, Some(name2)), num_pods, "{text}");
    run.stop().await;
    assert!(informer.is_stopped());
    handle1.remove();
    handle2.remove();
}
