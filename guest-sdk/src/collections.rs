//! Hash maps and sets for units, keyed without asking the host for
//! randomness.
//!
//! std's `HashMap::new` seeds its hasher from `wasi:random` once per
//! instance, and every call runs in a fresh instance: so a unit that makes
//! a map makes a host call each time, and the host builds the call's WASI
//! for it, a few per cent of a call's fixed cost. The sandbox's randomness
//! is a fixed sequence (`sandbox::wasi` on the host), so the seed was the
//! same on every call anyway: fixed keys lose nothing and cost nothing.

use std::hash::{BuildHasherDefault, DefaultHasher};

/// std's SipHash with fixed keys.
pub type FixedState = BuildHasherDefault<DefaultHasher>;

/// A `std::collections::HashMap` keyed with [`FixedState`]; make one with
/// `HashMap::default()`.
pub type HashMap<K, V> = std::collections::HashMap<K, V, FixedState>;

/// A `std::collections::HashSet` keyed with [`FixedState`]; make one with
/// `HashSet::default()`.
pub type HashSet<T> = std::collections::HashSet<T, FixedState>;
