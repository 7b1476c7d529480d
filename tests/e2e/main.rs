//! End-to-end tests of the `sandpiper` server: the real binary, started on
//! a random port with a temporary SQLite file, driven over HTTP. Here is
//! what needs a process: restart, shutdown, load over real connections, a
//! true first start. The routes' contracts are tested in process, in
//! `tests/api`.

mod admin_token;
mod api_shutdown;
mod api_tour;
mod catalog;
mod cli;
mod cluster_delete;
mod compact_body;
mod console;
mod extender;
mod fleet;
mod hardening_input;
mod hardening_load;
mod hardening_net;
mod hardware;
mod iallocator;
mod languages;
mod load;
mod metrics;
mod operations;
mod ovirt;
mod pools;
mod rebalance;
mod restart;
mod schemathesis;
mod simulate;
mod starting;
mod support;
mod tls;
mod unit_new;
