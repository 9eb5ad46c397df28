//! Pages asked for ahead: a lister-watcher that tells a page's continue token before the page
//! is done gets the next page's request at once, one page ahead at most, never for a server
//! that pages with short pages, and never with a token the page did not end with.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::Config;
use super::hardening_tests::{for_inner_source, start};
use crate::{
    ListerWatcher,
    lister_watcher::{self, ListParams, ObjectList, WatchParams, WatchStream},
    testing::{FakeSource, config_map as cm},
};

/// How long a page takes to arrive after its continue token was told (virtual time).
const PAGE_TIME: Duration = Duration::from_millis(100);

/// Rewrites a page's answer, given the request's number (from 1).
type Rewrite = Arc<dyn Fn(usize, &mut ObjectList<ConfigMap>) + Send + Sync>;

/// A paginating [`FakeSource`] whose pages tell their continue token first, then take
/// [`PAGE_TIME`] to finish; counts requests in flight.
#[derive(Clone)]
struct Telling {
    inner: FakeSource<ConfigMap>,
    /// The token told early instead of the page's own, when set.
    tell_instead: Option<String>,
    /// Every page's answer rewritten: (the request's number, the page).
    rewrite: Option<Rewrite>,
    requests: Arc<Mutex<Vec<Option<String>>>>,
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
}

impl Telling {
    fn new(inner: &FakeSource<ConfigMap>) -> Self {
        inner.set_paginate_at_rv0(true);
        Self {
            inner: inner.clone(),
            tell_instead: None,
            rewrite: None,
            requests: Arc::default(),
            in_flight: Arc::default(),
            most_in_flight: Arc::default(),
        }
    }

    /// The continue token of every request, in order.
    fn requests(&self) -> Vec<Option<String>> {
        self.requests.lock().clone()
    }

    fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(Ordering::SeqCst)
    }
}

impl ListerWatcher<ConfigMap> for Telling {
    async fn list(
        &self,
        params: &ListParams,
    ) -> Result<ObjectList<ConfigMap>, lister_watcher::Error> {
        let (next, _) = oneshot::channel();
        self.list_telling_continue(params, next).await
    }

    async fn list_telling_continue(
        &self,
        params: &ListParams,
        next: oneshot::Sender<String>,
    ) -> Result<ObjectList<ConfigMap>, lister_watcher::Error> {
        let n = {
            let mut requests = self.requests.lock();
            requests.push(params.continue_token.clone());
            requests.len()
        };
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        let mut answer = self.inner.list(&for_inner_source(params)).await;
        if let (Ok(page), Some(rewrite)) = (&mut answer, &self.rewrite) {
            rewrite(n, page);
        }
        if let Ok(page) = &answer
            && let Some(token) = self
                .tell_instead
                .clone()
                .or(page.metadata.continue_.clone())
        {
            let _ = next.send(token);
        }
        tokio::time::sleep(PAGE_TIME).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let page = answer?;
        Ok(page)
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<ConfigMap>, lister_watcher::Error> {
        self.inner.watch(params, resource_version).await
    }
}

fn source_of(n: usize) -> FakeSource<ConfigMap> {
    let src = FakeSource::new();
    for i in 0..n {
        src.upsert(cm(&format!("cm-{i:02}")));
    }
    src
}

async fn wait_synced(run: &super::hardening_tests::Run) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !run.handle.health().synced_once && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(run.handle.health().synced_once, "the list ended");
}

/// 25 pages of 2: each next page is asked for when the page before tells its token, so two
/// requests are in flight, never more; every page is asked for once, in order, and the cache
/// holds every object. The list takes half the time of one page after the other.
#[tokio::test(start_paused = true)]
async fn the_next_page_is_asked_for_while_the_one_before_arrives() {
    let src = source_of(50);
    let lw = Telling::new(&src);
    let started = tokio::time::Instant::now();
    let run = start(
        &lw,
        Config::default()
            .initial_list(super::InitialList::List)
            .page_size(2),
    );
    wait_synced(&run).await;
    let took = started.elapsed();
    let requests = lw.requests();
    assert_eq!(requests.len(), 25, "one request per page: {requests:?}");
    let mut tokens: Vec<_> = requests.iter().flatten().collect();
    assert_eq!(tokens.len(), 24);
    tokens.dedup();
    assert_eq!(tokens.len(), 24, "no page asked for twice");
    assert_eq!(lw.most_in_flight(), 2, "one page ahead, no more");
    assert!(
        took < PAGE_TIME * 25,
        "pages overlapped: {took:?} for 25 pages of {PAGE_TIME:?}"
    );
    let names = run.names();
    assert_eq!(names.len(), 50);
    assert!(run.errors.lock().is_empty(), "{:?}", run.errors.lock());
    run.stop().await;
}

/// Without early tokens (the default [`ListerWatcher::list_telling_continue`]) pages go one
/// after the other, as before.
#[tokio::test(start_paused = true)]
async fn a_source_that_does_not_tell_gets_one_page_at_a_time() {
    #[derive(Clone)]
    struct Silent(Telling);
    impl ListerWatcher<ConfigMap> for Silent {
        async fn list(
            &self,
            params: &ListParams,
        ) -> Result<ObjectList<ConfigMap>, lister_watcher::Error> {
            self.0.list(params).await
        }
        async fn watch(
            &self,
            params: &WatchParams,
            resource_version: &str,
        ) -> Result<WatchStream<ConfigMap>, lister_watcher::Error> {
            self.0.watch(params, resource_version).await
        }
    }
    let src = source_of(20);
    let lw = Silent(Telling::new(&src));
    let run = start(
        &lw,
        Config::default()
            .initial_list(super::InitialList::List)
            .page_size(2),
    );
    wait_synced(&run).await;
    assert_eq!(lw.0.requests().len(), 10);
    assert_eq!(lw.0.most_in_flight(), 1);
    assert_eq!(run.names().len(), 20);
    run.stop().await;
}

/// A server that pages forever with short pages: once a short page is seen no page is asked
/// for ahead, and requests stay paced to 4 a second (the first two may overlap).
#[tokio::test(start_paused = true)]
async fn short_pages_are_not_asked_for_ahead() {
    let src = source_of(1);
    let mut lw = Telling::new(&src);
    lw.rewrite = Some(Arc::new(|n, page| {
        for item in &mut page.items {
            item.metadata.name = Some(format!("p{n}"));
        }
        page.metadata.continue_ = Some(format!("fake-t{n}"));
    }));
    let run = start(
        &lw,
        Config::default()
            .initial_list(super::InitialList::List)
            .page_size(10),
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    let requests = lw.requests().len();
    assert!(
        requests <= 4 * 60 + 2,
        "{requests} list requests in a minute (at most 4 a second)"
    );
    assert!(requests >= 100, "the list goes on, paced: {requests}");
    assert!(lw.most_in_flight() <= 2, "{}", lw.most_in_flight());
    run.stop().await;
}

/// A token told early that is not the one the page ends with: the request started with it
/// is dropped and the page's own token asked for; the list is whole.
#[tokio::test(start_paused = true)]
async fn a_wrong_early_token_is_not_used() {
    let src = source_of(10);
    let mut lw = Telling::new(&src);
    lw.tell_instead = Some("0:cm-00".into());
    let run = start(
        &lw,
        Config::default()
            .initial_list(super::InitialList::List)
            .page_size(2),
    );
    wait_synced(&run).await;
    assert_eq!(run.names().len(), 10);
    let requests = lw.requests();
    let ends: Vec<_> = requests
        .iter()
        .flatten()
        .filter(|t| t.as_str() != "0:cm-00")
        .collect();
    assert_eq!(
        ends.len(),
        4,
        "each real token asked for once: {requests:?}"
    );
    assert!(run.errors.lock().is_empty(), "{:?}", run.errors.lock());
    run.stop().await;
}
