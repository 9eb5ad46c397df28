//! The informer's cache memory accounting and budget ([`crate::memory`]).

use std::sync::atomic::Ordering;

use kube_core::Resource;
use tracing::{info, warn};

use super::{SharedIndexInformer, shared_informer::Inner};
use crate::memory::MemoryUsage;

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// The objects and bytes the cache holds, when memory is accounted
    /// ([`Builder::account_memory`](super::Builder::account_memory),
    /// [`Builder::memory_sizer`](super::Builder::memory_sizer)); `None` otherwise.
    pub fn memory(&self) -> Option<MemoryUsage> {
        self.inner.indexer.memory()
    }

    /// The cache's memory budget in bytes
    /// ([`Config::memory_budget_bytes`](super::Config::memory_budget_bytes)).
    pub fn memory_budget(&self) -> Option<usize> {
        self.inner.config.memory_budget_bytes
    }

    /// Whether the cache holds more bytes than its budget (never without a budget or without
    /// accounting).
    pub fn over_memory_budget(&self) -> bool {
        self.inner.over_budget_now()
    }
}

impl<K> Inner<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    fn over_budget_now(&self) -> bool {
        match (self.config.memory_budget_bytes, self.indexer.memory()) {
            (Some(budget), Some(usage)) => usage.bytes > budget,
            _ => false,
        }
    }

    /// After each applied batch: logs a warning when the cache crosses its budget upwards,
    /// and once more when it is back under.
    pub(super) fn check_memory_budget(&self) {
        let Some(budget) = self.config.memory_budget_bytes else {
            return;
        };
        let Some(usage) = self.indexer.memory() else {
            return;
        };
        let over = usage.bytes > budget;
        if self.over_budget.swap(over, Ordering::AcqRel) == over {
            return;
        }
        let resource = self.resource_name();
        if over {
            warn!(
                %resource, bytes = usage.bytes, objects = usage.objects, budget,
                "informer cache is over its memory budget"
            );
        } else {
            info!(
                %resource, bytes = usage.bytes, objects = usage.objects, budget,
                "informer cache is back under its memory budget"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::ConfigMap;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::{
        informer,
        memory::estimate,
        store::entry_overhead,
        store::{KeyListerGetter, ObjectKey},
        test_support::eventually,
        testing::{FakeSource, config_map},
    };

    fn big(name: &str, bytes: usize) -> ConfigMap {
        let mut cm = config_map(name);
        cm.data = Some(BTreeMap::from([("blob".to_owned(), "x".repeat(bytes))]));
        cm
    }

    fn from_scratch(informer: &SharedIndexInformer<ConfigMap>) -> usize {
        KeyListerGetter::list_keyed(informer.indexer())
            .iter()
            .map(|(k, o)| estimate(&**o) + entry_overhead::<ConfigMap>(k))
            .sum()
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_is_crossed_by_adds_and_left_by_deletes_and_the_total_stays_exact() {
        let src = FakeSource::new();
        src.upsert(big("a", 1000));
        let config = informer::Config::default().memory_budget_bytes(10_000);
        let unaccounted = SharedIndexInformer::new(src.clone(), config.clone());
        assert_eq!(unaccounted.memory(), None, "not accounted");
        let informer = SharedIndexInformer::builder(src.clone())
            .config(config)
            .account_memory()
            .build();
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (i, c) = (informer.clone(), cancel.clone());
            async move { i.run(c).await }
        });
        informer.wait_for_sync().await;
        assert_eq!(informer.memory_budget(), Some(10_000));
        assert!(!informer.over_memory_budget());
        src.upsert(big("b", 20_000));
        eventually(|| informer.memory().unwrap().objects == 2).await;
        assert!(informer.over_memory_budget());
        assert_eq!(informer.memory().unwrap().bytes, from_scratch(&informer));
        src.delete(&ObjectKey::new(Some("ns"), "b"));
        eventually(|| informer.memory().unwrap().objects == 1).await;
        assert!(!informer.over_memory_budget());
        assert_eq!(informer.memory().unwrap().bytes, from_scratch(&informer));
        cancel.cancel();
        task.await.unwrap();
    }
}
