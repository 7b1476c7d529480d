//! End-to-end tests of the `sandpiper` server: the real binary, started on
//! a random port with a temporary SQLite file, driven over HTTP.
