//! The controller's unit tests (FakeSource, paused time).

use crate::test_support::eventually;
use std::{
    collections::HashMap,
    sync::atomic::{AtomicUsize, Ordering},
};

use k8s_openapi::{
    api::core::v1::{ConfigMap, Secret},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use parking_lot::Mutex;

use super::*;
use crate::workqueue::RateLimitingInterface as _;
use crate::{informer, testing::FakeSource};

use crate::testing::config_map as cm;

/// The instants at which a reconcile ran.
struct Attempts {
    times: Arc<Mutex<Vec<tokio::time::Instant>>>,
}

impl Attempts {
    fn new() -> Self {
        Self {
            times: Arc::default(),
        }
    }
    fn log(&self) -> Arc<Mutex<Vec<tokio::time::Instant>>> {
        Arc::clone(&self.times)
    }
    fn count(&self) -> usize {
        self.times.lock().len()
    }
    fn gaps(&self) -> Vec<Duration> {
        self.times.lock().windows(2).map(|w| w[1] - w[0]).collect()
    }
}

mod metrics;

struct Setup {
    src: FakeSource<ConfigMap>,
    informer: SharedIndexInformer<ConfigMap>,
    cancel: CancellationToken,
}

fn setup() -> Setup {
    let src = FakeSource::new();
    let informer = SharedIndexInformer::new(src.clone(), informer::Config::default());
    let cancel = CancellationToken::new();
    tokio::spawn({
        let (i, c) = (informer.clone(), cancel.clone());
        async move { i.run(c).await }
    });
    Setup {
        src,
        informer,
        cancel,
    }
}

mod failures;
mod leading;
mod reconcile;
