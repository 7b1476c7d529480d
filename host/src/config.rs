//! The server's configuration: every flag of `sandpiper serve`, each with
//! an environment variable, a default and the reason for it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::api::ApiLimits;
use crate::sandbox::{self as limits, Limits};
use crate::upload::CompileLimits;

/// Where the server listens unless told otherwise: loopback only, so a
/// fresh install is not reachable from the network before an operator
/// decides it should be.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The database file unless told otherwise, relative to the working
/// directory (git-ignored in the source tree).
pub const DEFAULT_DB: &str = "data/sandpiper.db";

/// Largest `.wasm` upload, MiB. A componentize-py unit is about 18 MiB and
/// a StarlingMonkey JavaScript one about 12 MiB; 64 leaves room for both
/// to grow.
pub const DEFAULT_MAX_MODULE_MIB: usize = 64;

/// Largest schedule or balance request, MiB. A host is a few hundred bytes
/// of JSON; 64 MiB holds a snapshot of well over 100,000 hosts.
pub const DEFAULT_MAX_REQUEST_MIB: usize = 64;

/// How long one upload may take to validate and compile, seconds. A Rust
/// unit compiles in under 100 ms and an 18 MB Python one in 4-7 s on two
/// cores (20-50 % more with fuel metering); two minutes absorbs a busy
/// machine while still bounding a module built to make the compiler crawl.
pub const DEFAULT_COMPILE_TIMEOUT_SECS: u64 = 120;

/// Memory the compile process may allocate, MiB. Compiling the largest
/// expected units (interpreters of 12-18 MB) needs well under 2 GiB; 4 GiB
/// is generous and still keeps a hostile module from taking the machine.
pub const DEFAULT_COMPILE_MEMORY_MIB: u64 = 4096;

/// Decisions kept per cluster. Enough to look back over a busy day of
/// placements for one cluster; explain records are a few kilobytes each.
pub const DEFAULT_DECISIONS_RETAINED: u32 = 1000;

/// How long shutdown waits for requests in flight, seconds, before it
/// stops waiting and closes the store anyway. A decision takes
/// milliseconds; an upload compile is bounded by the compile timeout.
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 30;

const MIB: usize = 1024 * 1024;

/// `sandpiper serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (the address bound is
    /// logged and printed as `listening on <addr>`).
    #[arg(long, env = "SANDPIPER_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// SQLite database file; created (with its directory) if missing.
    #[arg(long, env = "SANDPIPER_DB", default_value = DEFAULT_DB)]
    pub db: PathBuf,

    /// Largest `.wasm` upload, MiB.
    #[arg(long, env = "SANDPIPER_MAX_MODULE_MIB", default_value_t = DEFAULT_MAX_MODULE_MIB)]
    pub max_module_mib: usize,

    /// Largest schedule or balance request body, MiB.
    #[arg(long, env = "SANDPIPER_MAX_REQUEST_MIB", default_value_t = DEFAULT_MAX_REQUEST_MIB)]
    pub max_request_mib: usize,

    /// Seconds one upload may take to validate and compile.
    #[arg(long, env = "SANDPIPER_COMPILE_TIMEOUT_SECS", default_value_t = DEFAULT_COMPILE_TIMEOUT_SECS)]
    pub compile_timeout_secs: u64,

    /// Memory the compile process may allocate, MiB.
    #[arg(long, env = "SANDPIPER_COMPILE_MEMORY_MIB", default_value_t = DEFAULT_COMPILE_MEMORY_MIB)]
    pub compile_memory_mib: u64,

    /// Decisions kept per cluster in the decisions log.
    #[arg(long, env = "SANDPIPER_DECISIONS_RETAINED", default_value_t = DEFAULT_DECISIONS_RETAINED)]
    pub decisions_retained: u32,

    /// Seconds shutdown waits for requests in flight.
    #[arg(long, env = "SANDPIPER_SHUTDOWN_GRACE_SECS", default_value_t = DEFAULT_SHUTDOWN_GRACE_SECS)]
    pub shutdown_grace_secs: u64,

    /// The per-call limits of every unit.
    #[command(flatten)]
    pub limits: UnitLimitsArgs,

    /// Held inventories and claims: claim TTL, cluster lock limits,
    /// delay-and-retry, host sampling, decision log age.
    #[command(flatten)]
    pub placement: crate::placement::PlacementArgs,
}

/// The per-call limits of units, shared by `sandpiper serve` and
/// `sandpiper unit test` so a unit is tested under the limits it will run
/// under.
#[derive(Clone, Debug, clap::Args)]
pub struct UnitLimitsArgs {
    /// Fuel every unit call gets before the per-host part.
    #[arg(long, env = "SANDPIPER_FUEL_BASE", default_value_t = limits::DEFAULT_FUEL_BASE)]
    pub fuel_base: u64,

    /// Fuel a unit call gets per host in the snapshot.
    #[arg(long, env = "SANDPIPER_FUEL_PER_HOST", default_value_t = limits::DEFAULT_FUEL_PER_HOST)]
    pub fuel_per_host: u64,

    /// Wall-clock milliseconds every unit call gets before the per-host part.
    #[arg(long, env = "SANDPIPER_DEADLINE_BASE_MS", default_value_t = duration_ms(limits::DEFAULT_DEADLINE_BASE))]
    pub deadline_base_ms: u64,

    /// Wall-clock microseconds a unit call gets per host in the snapshot.
    #[arg(long, env = "SANDPIPER_DEADLINE_PER_HOST_US", default_value_t = duration_us(limits::DEFAULT_DEADLINE_PER_HOST))]
    pub deadline_per_host_us: u64,

    /// Linear memory a unit call may hold, MiB (all its memories together).
    #[arg(long, env = "SANDPIPER_UNIT_MEMORY_MIB", default_value_t = limits::DEFAULT_MEMORY_BYTES / MIB as u64)]
    pub unit_memory_mib: u64,
}

impl UnitLimitsArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> Limits {
        Limits {
            fuel_base: self.fuel_base,
            fuel_per_host: self.fuel_per_host,
            deadline_base: Duration::from_millis(self.deadline_base_ms),
            deadline_per_host: Duration::from_micros(self.deadline_per_host_us),
            memory_bytes: self.unit_memory_mib.saturating_mul(MIB as u64),
        }
    }
}

const fn duration_ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

const fn duration_us(d: Duration) -> u64 {
    d.as_micros() as u64
}

impl ServeArgs {
    pub fn api_limits(&self) -> ApiLimits {
        ApiLimits {
            max_module_bytes: self.max_module_mib.saturating_mul(MIB),
            max_snapshot_bytes: self.max_request_mib.saturating_mul(MIB),
        }
    }

    pub fn compile_limits(&self) -> CompileLimits {
        CompileLimits {
            timeout: Duration::from_secs(self.compile_timeout_secs),
            memory_bytes: self.compile_memory_mib.saturating_mul(MIB as u64),
            max_module_bytes: self.max_module_mib.saturating_mul(MIB),
        }
    }

    /// The per-call limits of every unit.
    pub fn unit_limits(&self) -> Limits {
        self.limits.limits()
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }
}
