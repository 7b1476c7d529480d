//! The limits units of every language run under in these tests: the
//! sandbox's defaults, which are sized so that an honest unit in any
//! supported language finishes at 10,000 hosts (see
//! `sandpiper::sandbox::DEFAULT_FUEL_PER_HOST`). Keeping the tests on the
//! defaults is what makes them prove that.
//!
//! Measured with `cargo bench -p sandpiper-tests --bench languages`
//! (HeadroomAffinity, filter and score over every host, 10,000 hosts):
//! fuel per host is ~450 in Rust and C, ~23,000 in Python and ~55,000 in
//! JavaScript; a 10k-host call takes under 0.4 ms in Rust and C and
//! 44-73 ms in Python and JavaScript; peak linear memory is 1-2 MiB in Rust
//! and C and 10-13 MiB in Python and JavaScript, well inside the default
//! 64 MiB.

use sandpiper::sandbox::Limits;

/// The limits every language's unit runs under here: the defaults.
pub fn for_every_language() -> Limits {
    Limits::default()
}
