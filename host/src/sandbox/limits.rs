//! What one unit call may consume: fuel, wall-clock time and linear memory.
//!
//! Budgets scale with the snapshot's host count (Shopify Functions scale
//! their instruction limit with cart size the same way), so one policy works
//! for a ten-host lab and a ten-thousand-host cloud. Defaults suit compiled
//! (Rust, C) units; interpreted units (Python, JavaScript) need larger
//! per-unit budgets, set when they are registered.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Fuel every call gets regardless of size: instantiation, the guest's own
/// start-up and reading its request. An infinite loop burns 20 M fuel in
/// roughly 2 ms (1 M fuel stopped one after ~90 µs when measured), so it
/// stops fast, while an honest unit never gets near it.
pub const DEFAULT_FUEL_BASE: u64 = 20_000_000;

/// Fuel per host in the snapshot. Sized for the hungriest honest unit in any
/// language we support, because one default applies to every uploaded unit:
/// measured at 10k hosts (`cargo bench -p sandpiper-tests --bench languages`
/// and `--bench sandbox`), compiled units (Rust, C) burn under 500 per host
/// (`Memory`, formatting a reason per rejected host, ~8.4k), Python ~23k and
/// JavaScript (StarlingMonkey) ~55k. 150k leaves ~2.7x headroom for
/// JavaScript; a runaway unit still stops once it has spun through the
/// budget (70-260 ms at 10k hosts, ~10 ms at 50 hosts).
pub const DEFAULT_FUEL_PER_HOST: u64 = 150_000;

/// Wall-clock time every call gets. The deadline is the guard for what fuel
/// does not meter (host-side copying, page faults, a starved thread on a
/// busy machine), so it is generous: a 10k-host Rust call takes ~1 ms.
pub const DEFAULT_DEADLINE_BASE: Duration = Duration::from_millis(250);

/// Wall-clock time per host in the snapshot: with the base, 500 ms at 10k
/// hosts, ~7x what an interpreted unit (Python 44-60 ms, JavaScript
/// 55-73 ms at 10k hosts) takes, and far above a compiled unit's ~0.1 µs.
pub const DEFAULT_DEADLINE_PER_HOST: Duration = Duration::from_micros(25);

/// A call stopped by its wall-clock deadline was **starved** (the machine is
/// overloaded), not slow, when its thread got less than this percentage of
/// the elapsed wall-clock time as CPU time.
///
/// A call runs on one thread from start to end and never sleeps (clocks
/// are frozen, timers are due at once, host functions only copy), so a
/// unit that had a core to itself shows CPU time close to its wall time
/// (measured: 95-100 % for a spinning unit on an idle machine). Under half
/// means other work held the core more than the unit did, and the same call
/// would most likely have finished in time on a machine that was not
/// overloaded: the failure says nothing about the unit or the policy, and
/// is answered 503 `overloaded` for the engine to retry. At or above half,
/// the unit had the CPU and still ran out of time: it is too slow
/// (`deadline_exceeded`), a verdict that a retry will not change.
pub const STARVED_CPU_PERCENT: u32 = 50;

/// Linear memory a compiled unit may hold, all its memories together. A Rust
/// unit built by the SDK starts at 4 MiB (`INITIAL_MEMORY_BYTES` of
/// sandpiper-guest-build, mostly untouched) and reads a few columns of 8
/// bytes per host, so 64 MiB covers 100k hosts; a memory bomb hits it in
/// milliseconds.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;

/// The largest memory limit a unit may be given. Each pooled memory slot is
/// sized for it; 512 MiB holds the JavaScript runtime (which needs more than
/// 64 MiB at 10k hosts) with room to spare.
pub const MAX_MEMORY_BYTES: u64 = 512 << 20;

/// Core instances one call may create. A Rust component has a handful;
/// componentize-py 0.25.1's have 38 (its libraries are linked as separate
/// modules), measured with policies/examples/python; 64 leaves room for a
/// larger Python app without letting a unit exhaust the pool.
pub const MAX_INSTANCES_PER_CALL: usize = 64;

/// Linear memories one call may create: the unit's own plus the WASI
/// adapter's, with room for runtimes that link several modules.
pub const MAX_MEMORIES_PER_CALL: usize = 8;

/// Tables one call may create: the component adapters use small tables for
/// indirect calls between their modules.
pub const MAX_TABLES_PER_CALL: usize = 32;

/// Elements any one table may grow to; matches wasmtime's pooling default,
/// which a C# debug build was seen to need.
pub const MAX_TABLE_ELEMENTS: usize = 20_000;

/// Per-call limits of one unit. Defaults come from the constants above;
/// a server's config and a unit's registration may override any field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Fuel for any call, before the per-host part.
    pub fuel_base: u64,
    /// Fuel added per host in the snapshot.
    pub fuel_per_host: u64,
    /// Wall-clock time for any call, before the per-host part.
    #[serde(rename = "deadline_base_ms", with = "millis")]
    pub deadline_base: Duration,
    /// Wall-clock time added per host in the snapshot.
    #[serde(rename = "deadline_per_host_us", with = "micros")]
    pub deadline_per_host: Duration,
    /// Linear memory, all of the unit's memories together, in bytes.
    pub memory_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel_base: DEFAULT_FUEL_BASE,
            fuel_per_host: DEFAULT_FUEL_PER_HOST,
            deadline_base: DEFAULT_DEADLINE_BASE,
            deadline_per_host: DEFAULT_DEADLINE_PER_HOST,
            memory_bytes: DEFAULT_MEMORY_BYTES,
        }
    }
}

/// Limits that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    #[error("memory limit of {requested} bytes is above the maximum of {MAX_MEMORY_BYTES} bytes")]
    MemoryAboveMaximum { requested: u64 },
    #[error("the {0} limit is zero, so no call could ever succeed")]
    Zero(&'static str),
}

impl Limits {
    /// Checks that a call could succeed under these limits at all.
    pub fn validate(&self) -> Result<(), LimitsError> {
        if self.memory_bytes > MAX_MEMORY_BYTES {
            return Err(LimitsError::MemoryAboveMaximum {
                requested: self.memory_bytes,
            });
        }
        if self.memory_bytes == 0 {
            return Err(LimitsError::Zero("memory"));
        }
        if self.fuel_base == 0 {
            return Err(LimitsError::Zero("fuel"));
        }
        if self.deadline_base.is_zero() {
            return Err(LimitsError::Zero("deadline"));
        }
        Ok(())
    }

    /// The fuel budget of a call over a snapshot of `hosts` hosts.
    pub fn fuel_budget(&self, hosts: usize) -> u64 {
        let hosts = u64::try_from(hosts).unwrap_or(u64::MAX);
        self.fuel_base
            .saturating_add(self.fuel_per_host.saturating_mul(hosts))
    }

    /// The wall-clock deadline of a call over a snapshot of `hosts` hosts.
    pub fn deadline(&self, hosts: usize) -> Duration {
        let hosts = u32::try_from(hosts).unwrap_or(u32::MAX);
        self.deadline_base
            .saturating_add(self.deadline_per_host.saturating_mul(hosts))
    }
}

/// Serialises a `Duration` as whole milliseconds.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// Serialises a `Duration` as whole microseconds.
mod micros {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_micros)
    }
}

/// A memory growth the limiter refused. Recorded as a value so that the
/// call's failure is classified `MemoryLimit` by type, whatever the guest
/// did after the refusal (Rust aborts with `unreachable`, others may trap
/// differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryRefusal {
    pub limit_bytes: u64,
}

/// The store's `ResourceLimiter`: caps the unit's linear memory (all
/// memories together) and the number of instances, memories and tables.
pub(crate) struct MemoryLimiter {
    limit_bytes: u64,
    used_bytes: u64,
    refusal: Option<MemoryRefusal>,
}

impl MemoryLimiter {
    pub(crate) fn new(limit_bytes: u64) -> Self {
        MemoryLimiter {
            limit_bytes,
            used_bytes: 0,
            refusal: None,
        }
    }

    /// The first growth refused during this call, if any.
    pub(crate) fn refusal(&self) -> Option<MemoryRefusal> {
        self.refusal
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Wasmtime also calls this when a memory is first created (current
        // 0), so `used_bytes` is the sum of every memory's size.
        let growth = u64::try_from(desired.saturating_sub(current)).unwrap_or(u64::MAX);
        let total = self.used_bytes.saturating_add(growth);
        if total > self.limit_bytes {
            self.refusal.get_or_insert(MemoryRefusal {
                limit_bytes: self.limit_bytes,
            });
            return Ok(false);
        }
        self.used_bytes = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES_PER_CALL
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES_PER_CALL
    }

    fn tables(&self) -> usize {
        MAX_TABLES_PER_CALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn budgets_scale_with_hosts() {
        let limits = Limits::default();
        assert_eq!(limits.fuel_budget(0), DEFAULT_FUEL_BASE);
        assert_eq!(
            limits.fuel_budget(10_000),
            DEFAULT_FUEL_BASE + 10_000 * DEFAULT_FUEL_PER_HOST
        );
        assert_eq!(
            limits.deadline(1000),
            DEFAULT_DEADLINE_BASE + DEFAULT_DEADLINE_PER_HOST * 1000
        );
        assert_eq!(limits.fuel_budget(usize::MAX), u64::MAX);
    }

    #[test]
    fn limiter_counts_all_memories_and_records_the_refusal() {
        let mut limiter = MemoryLimiter::new(4 << 16);
        assert!(limiter.memory_growing(0, 2 << 16, None).unwrap());
        assert!(limiter.memory_growing(0, 1 << 16, None).unwrap());
        assert_eq!(limiter.refusal(), None);
        assert!(!limiter.memory_growing(2 << 16, 4 << 16, None).unwrap());
        assert_eq!(
            limiter.refusal(),
            Some(MemoryRefusal {
                limit_bytes: 4 << 16
            })
        );
        // A smaller growth that fits is still allowed.
        assert!(limiter.memory_growing(1 << 16, 2 << 16, None).unwrap());
    }

    #[test]
    fn limits_read_from_config_with_defaults() {
        let limits: Limits = serde_json::from_str(r#"{"memory_bytes": 1048576}"#).unwrap();
        assert_eq!(limits.memory_bytes, 1 << 20);
        assert_eq!(limits.fuel_base, DEFAULT_FUEL_BASE);
        let err = serde_json::from_str::<Limits>(r#"{"memory": 1}"#);
        assert!(err.is_err(), "unknown fields are refused");
        let too_big = Limits {
            memory_bytes: MAX_MEMORY_BYTES + 1,
            ..Limits::default()
        };
        assert!(too_big.validate().is_err());
    }
}
