//! End-to-end tests of the `sandpiper` server: the real binary, started on
//! a random port with a temporary SQLite file, driven over HTTP.

mod api_bad_input;
mod api_openapi;
mod api_roles;
mod api_shutdown;
mod api_tour;
mod api_units;
mod catalog;
mod cluster_delete;
mod hardening_net;
mod languages;
mod load;
mod restart;
mod support;
