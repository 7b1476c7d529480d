//! Sandpiper's host: the sandboxed runtime, the scheduling pipeline, the
//! store and the HTTP API.

pub mod allocator;
pub mod api;
pub mod arrow_snapshot;
pub mod auth;
pub mod builtin;
pub mod cli;
pub mod config;
pub mod console;
pub mod extender;
pub mod fleet;
pub mod hardware;
pub mod iallocator;
pub mod inputs;
pub mod metrics;
pub mod names;
pub mod operations;
pub mod ovirt;
pub mod pipeline;
pub mod placement;
pub mod pools;
pub mod rebalance;
pub mod registry;
pub mod role;
pub mod sandbox;
pub mod server;
pub mod simulate;
pub mod snapshot;
pub mod store;
pub mod time;
pub mod unit;
pub mod unit_cases;
pub mod unit_new;
pub mod unit_test;
pub mod upload;

#[cfg(test)]
mod test_units;
