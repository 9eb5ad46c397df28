//! In-memory test doubles (unit tests only; integration tests use real servers).
