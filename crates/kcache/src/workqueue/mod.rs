//! Work queues for controllers: `Queue`, `DelayingQueue`, `RateLimitingQueue`.
