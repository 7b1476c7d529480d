//! Policies in any language: the HeadroomAffinity example, written in Rust,
//! Python, JavaScript and C (`policies/examples/`), is built from source in
//! each, run through the real sandbox, and must answer identically — on a
//! generated cluster, on the example's fixture through `sandpiper unit
//! test`, at 10,000 hosts under each language's limits, and end to end
//! through the server. An infinite loop must stop in every language.
//!
//! Building needs the guest toolchains (`scripts/install-guest-toolchains.sh`);
//! a missing one fails the test with that command.

pub mod examples;
pub mod limits;

mod cluster;
mod sandboxed;
