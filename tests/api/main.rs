//! In-process tests of the HTTP API's contract: every request goes through
//! [`sandpiper::server::Services::app`] over the state the server itself builds
//! ([`sandpiper::server::Server::build_state`]), with tower's `oneshot`
//! and no socket. One module per area; table-driven cases live in
//! `cases/`, golden files in `golden/`.
//!
//! What needs a real process (restart, graceful shutdown, load over real
//! connections, the first start's token file, the catalog on a true first
//! start, the languages' uploads) stays in `tests/e2e`.

mod audit;
mod bad_input;
mod compact_body;
mod console;
mod decisions_log;
mod extender;
mod hardware;
mod inventory_hosts;
mod openapi;
mod operations;
mod ovirt;
mod rebalance;
mod reuse;
mod roles;
mod simulations;
mod support;
mod unit_versions;
mod units;
mod vmpools;
mod weights;
mod what_if;
