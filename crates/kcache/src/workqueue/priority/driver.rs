//! The driver task of a [`PriorityQueue`](super::PriorityQueue): hands out delayed items when
//! their time comes and refreshes the unfinished-work gauges, until the queue stops.

use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use super::state::{Changes, Shared};

/// How often the unfinished-work gauges are refreshed (client-go's value).
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// The driver: hands out delayed items when their time comes, and refreshes the metrics, until
/// the queue stops.
pub(super) async fn drive<T>(shared: Arc<Shared<T>>)
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    let metrics = async {
        if shared.metrics.is_none() {
            return;
        }
        let mut ticker = tokio::time::interval(UNFINISHED_WORK_UPDATE_PERIOD);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shared.stopped.cancelled() => return,
                _ = ticker.tick() => shared.update_unfinished_work(),
            }
        }
    };
    let timers = async {
        loop {
            let mut earlier = pin!(shared.earlier.notified());
            earlier.as_mut().enable();
            let mut changes = Changes::default();
            let next = {
                let mut state = shared.state.lock();
                state.promote(Instant::now(), &mut changes);
                state.waiting.first_key_value().map(|(k, _)| k.0)
            };
            shared.publish(changes);
            let sleep = async {
                match next {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shared.stopped.cancelled() => return,
                () = earlier => {}
                () = sleep => {}
            }
        }
    };
    tokio::join!(metrics, timers);
}
