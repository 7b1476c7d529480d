//! The limits units of every language run under in these tests: the
//! sandbox's defaults, with the two per-host budgets raised to what an honest
//! JavaScript unit needs at 10,000 hosts (proposed as the new defaults in
//! docs/authoring.md; once `sandpiper::sandbox` adopts them this module
//! becomes `Limits::default()`).
//!
//! Measured with `cargo bench -p sandpiper-tests --bench languages`
//! (HeadroomAffinity, filter and score over every host, 10,000 hosts):
//! fuel per host is ~450 in Rust and C, ~23,000 in Python and ~55,000 in
//! JavaScript; a 10k-host call takes under 0.4 ms in Rust and C and
//! 44-73 ms in Python and JavaScript; peak linear memory is 1-2 MiB in Rust
//! and C and 10-13 MiB in Python and JavaScript, well inside the default
//! 64 MiB.

use std::time::Duration;

use sandpiper::sandbox::Limits;

/// Fuel per host in the snapshot: JavaScript's ~55,000 with ~2.7x headroom
/// for units that do more per host than the example (the sandbox default,
/// 50,000, stops the JavaScript example's score at 10k hosts).
pub const FUEL_PER_HOST: u64 = 150_000;

/// Wall-clock time per host: 500 ms at 10k hosts with the 250 ms base,
/// ~7x what the interpreted examples take there; a loop burns the fuel
/// budget above in 70-260 ms, so fuel stops it first and the deadline
/// catches what fuel does not meter.
pub const DEADLINE_PER_HOST: Duration = Duration::from_micros(25);

/// The limits every language's unit runs under here.
pub fn for_every_language() -> Limits {
    Limits {
        fuel_per_host: FUEL_PER_HOST,
        deadline_per_host: DEADLINE_PER_HOST,
        ..Limits::default()
    }
}
