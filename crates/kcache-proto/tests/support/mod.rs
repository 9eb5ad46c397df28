//! Shared test helpers.

pub mod protobuf_fixture;
