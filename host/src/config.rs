//! The server's configuration: every flag of `sandpiper serve`, each with
//! an environment variable, a default and the reason for it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::api::ApiLimits;
use crate::sandbox::{self as limits, Limits};
use crate::store::{self, StoreLimits};
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

/// Byte budget of the whole decisions log, MiB: see
/// [`crate::store::decisions::DEFAULT_LOG_MAX_BYTES`] for the reason.
pub const DEFAULT_DECISIONS_MAX_MIB: u64 =
    crate::store::decisions::DEFAULT_LOG_MAX_BYTES / MIB as u64;

/// How long shutdown waits for requests in flight, seconds, before it
/// stops waiting and closes the store anyway. A decision takes
/// milliseconds; an upload compile is bounded by the compile timeout.
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 30;

/// How long a client may take to send a request's headers, seconds
/// (also how long an idle keep-alive connection is kept). Headers are a
/// few hundred bytes; a client that has not sent them in 10 s is broken or
/// is holding the connection on purpose (slowloris).
pub const DEFAULT_HEADER_READ_TIMEOUT_SECS: u64 = 10;

/// Longest gap between two pieces of a request body, seconds. A healthy
/// sender never pauses this long; a stalled upload stops holding its
/// connection and its upload slot after it.
pub const DEFAULT_BODY_IDLE_TIMEOUT_SECS: u64 = 15;

/// How long a whole request body may take to arrive, seconds. 64 MiB (the
/// largest upload) arrives in 54 s at 10 Mbit/s; 120 s allows half that
/// rate, and bounds a client that trickles a byte just often enough to
/// beat the idle timeout.
pub const DEFAULT_BODY_READ_TIMEOUT_SECS: u64 = 120;

/// Open connections across all clients. Each costs a file descriptor and a
/// task; engines keep a handful each, so 512 serves a large fleet and
/// stays well under the usual descriptor limit of 1024.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// Open connections from one IP address. An engine's connection pool is a
/// few connections; 64 leaves room for many engines behind one NAT address
/// while one client cannot take all [`DEFAULT_MAX_CONNECTIONS`]. Raise it
/// when a reverse proxy puts every client behind one address.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 64;

/// Compiles that may run at once, when not configured: one per core, at
/// most two. Cranelift already uses several threads per compile, so more
/// would only slow every compile and starve decisions; two keeps one slow
/// (hostile) upload from holding up every other uploader.
pub const DEFAULT_MAX_COMPILE_SLOTS: usize = 2;

/// Uploads waiting for a compile slot, across all uploaders. Each waits
/// as a temporary file on disk (64 MiB at most), so 8 bounds both the disk
/// used and the wait; more are refused with 503 and `Retry-After`.
pub const DEFAULT_COMPILE_QUEUE: usize = 8;

/// Uploads one token may have in progress (compiling or waiting) at once.
/// A token compiles one module at a time anyway (see `upload`); 2 lets an
/// author queue the next while the first compiles, and keeps one uploader
/// from filling the queue.
pub const DEFAULT_COMPILES_PER_UPLOADER: usize = 2;

const MIB: usize = 1024 * 1024;

/// `sandpiper serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (the address bound is
    /// logged and printed as `listening on <addr>`).
    #[arg(long, env = "SANDPIPER_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// A second address that serves only kube-scheduler's extender routes
    /// (`/k8s/{cluster}/filter`, `/prioritize`), with no token: the
    /// extender configuration cannot send one. Bind it where only
    /// kube-scheduler reaches (localhost, a private network); those routes
    /// read and claim nothing. Unset, they are served on `--listen` only,
    /// with an engine token (docs/kubernetes.md).
    #[arg(long, env = "SANDPIPER_EXTENDER_LISTEN")]
    pub extender_listen: Option<SocketAddr>,

    /// An address that serves oVirt's external scheduler protocol
    /// (XML-RPC `discover`, `runFilters`, `runCostFunctions`,
    /// `runLoadBalancing` at `/`), with no token: the engine's XML-RPC
    /// client cannot send one. oVirt's proxy listened on 18781
    /// (`127.0.0.1:18781`); bind it where only the engine reaches. Those
    /// calls read the held inventory and claim nothing. Unset, the
    /// protocol is not served (docs/ovirt.md).
    #[arg(long, env = "SANDPIPER_OVIRT_LISTEN")]
    pub ovirt_listen: Option<SocketAddr>,

    /// A PEM certificate chain (leaf first): every listener then speaks
    /// HTTPS only, with rustls (TLS 1.2 and 1.3). Needs `--tls-key`.
    #[arg(long, env = "SANDPIPER_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of `--tls-cert` (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "SANDPIPER_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// The database: an SQLite file, created (with its directory) if
    /// missing, or a `postgres://` URL, which several replicas can share
    /// (docs/fleet.md).
    #[arg(long, env = "SANDPIPER_DB", default_value = DEFAULT_DB)]
    pub db: crate::store::Location,

    /// With a PostgreSQL `--db`: the URL at which the other replicas reach
    /// this one, to forward it the requests of the clusters it owns
    /// (docs/fleet.md). Default: `http://` and the address bound.
    #[arg(long, env = "SANDPIPER_ADVERTISE_URL")]
    pub advertise_url: Option<String>,

    /// With a PostgreSQL `--db`: how long a replica owns a cluster without
    /// renewing (it renews five times per lease), ms; so also how long a
    /// dead replica's clusters wait for another owner, at most.
    #[arg(long, env = "SANDPIPER_OWNER_LEASE_MS", default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(500..=600_000))]
    pub owner_lease_ms: u64,

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

    /// A directory of compiled built-in units shared by every start of this
    /// build by this user, on any database: a first start with no embedded
    /// compiled code (debug builds) reads them there instead of compiling
    /// every unit again (tens of seconds), and writes those it compiles.
    /// Only files this user owns and nobody else may write are read.
    /// Default: `$XDG_CACHE_HOME/sandpiper`, else `~/.cache/sandpiper` (the
    /// cache of `sandpiper iallocator` and `simulate`).
    #[arg(long, env = "SANDPIPER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Decisions kept per cluster in the decisions log.
    #[arg(long, env = "SANDPIPER_DECISIONS_RETAINED", default_value_t = DEFAULT_DECISIONS_RETAINED)]
    pub decisions_retained: u32,

    /// Bytes the whole decisions log may take, MiB: the full answers of
    /// large decisions are dropped first, oldest first, then the oldest
    /// decisions.
    #[arg(long, env = "SANDPIPER_DECISIONS_MAX_MIB", default_value_t = DEFAULT_DECISIONS_MAX_MIB)]
    pub decisions_max_mib: u64,

    /// Days the audit log keeps an entry (every admin change: who, what,
    /// when; `GET /api/v1/audit`).
    #[arg(long, env = "SANDPIPER_AUDIT_RETAINED_DAYS", default_value_t = crate::api::audit::DEFAULT_AUDIT_RETAINED_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub audit_retained_days: u32,

    /// Versions (modules it has run) each uploaded unit keeps for a
    /// rollback, its current one included.
    #[arg(long, env = "SANDPIPER_UNIT_VERSIONS_RETAINED", default_value_t = crate::store::units::DEFAULT_UNIT_VERSIONS_RETAINED,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub unit_versions_retained: u32,

    /// Seconds shutdown waits for requests in flight.
    #[arg(long, env = "SANDPIPER_SHUTDOWN_GRACE_SECS", default_value_t = DEFAULT_SHUTDOWN_GRACE_SECS)]
    pub shutdown_grace_secs: u64,

    /// Seconds a client may take to send a request's headers (and an idle
    /// keep-alive connection is kept).
    #[arg(long, env = "SANDPIPER_HEADER_READ_TIMEOUT_SECS", default_value_t = DEFAULT_HEADER_READ_TIMEOUT_SECS)]
    pub header_read_timeout_secs: u64,

    /// Longest pause, in seconds, while a request body arrives.
    #[arg(long, env = "SANDPIPER_BODY_IDLE_TIMEOUT_SECS", default_value_t = DEFAULT_BODY_IDLE_TIMEOUT_SECS)]
    pub body_idle_timeout_secs: u64,

    /// Seconds a whole request body may take to arrive.
    #[arg(long, env = "SANDPIPER_BODY_READ_TIMEOUT_SECS", default_value_t = DEFAULT_BODY_READ_TIMEOUT_SECS)]
    pub body_read_timeout_secs: u64,

    /// Open connections across all clients; more are answered 503.
    #[arg(long, env = "SANDPIPER_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// Open connections from one IP address; more are answered 503.
    #[arg(long, env = "SANDPIPER_MAX_CONNECTIONS_PER_IP", default_value_t = DEFAULT_MAX_CONNECTIONS_PER_IP)]
    pub max_connections_per_ip: usize,

    /// Compiles that run at once [default: one per core, at most 2].
    #[arg(long, env = "SANDPIPER_COMPILE_SLOTS")]
    pub compile_slots: Option<usize>,

    /// Uploads that may wait for a compile slot; more are answered 503.
    #[arg(long, env = "SANDPIPER_COMPILE_QUEUE", default_value_t = DEFAULT_COMPILE_QUEUE)]
    pub compile_queue: usize,

    /// Uploads one token may have compiling or waiting at once.
    #[arg(long, env = "SANDPIPER_COMPILES_PER_UPLOADER", default_value_t = DEFAULT_COMPILES_PER_UPLOADER)]
    pub compiles_per_uploader: usize,

    /// Database connections for reads and admin changes (the writer of
    /// decisions and claims has one of its own).
    #[arg(long, env = "SANDPIPER_DB_READ_CONNECTIONS", default_value_t = store::DEFAULT_READ_CONNECTIONS)]
    pub db_read_connections: u32,

    /// Milliseconds a request waits for a free database connection before
    /// it is answered 503 `database_busy` with `Retry-After`.
    #[arg(long, env = "SANDPIPER_DB_ACQUIRE_TIMEOUT_MS", default_value_t = duration_ms(store::DEFAULT_ACQUIRE_TIMEOUT))]
    pub db_acquire_timeout_ms: u64,

    /// The per-call limits of every unit.
    #[command(flatten)]
    pub limits: UnitLimitsArgs,

    /// Held inventories and claims: claim TTL, cluster lock limits,
    /// delay-and-retry, host sampling, decision log age.
    #[command(flatten)]
    pub placement: crate::placement::PlacementArgs,

    /// The operations queue: leases per cluster, queue length, lease TTL,
    /// the predictive order's aging.
    #[command(flatten)]
    pub operations: crate::operations::OperationsArgs,
    /// The prestarted VM pools' monitor: interval, batch size, attempts.
    #[command(flatten)]
    pub pools: crate::pools::PoolArgs,
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

    /// How long the API keeps its own records.
    pub fn retention(&self) -> crate::api::Retention {
        crate::api::Retention {
            audit: crate::api::audit::retained(self.audit_retained_days),
            unit_versions: self.unit_versions_retained,
        }
    }

    /// Where compiled built-in units are cached (`--cache-dir`, else the
    /// user's cache directory), if anywhere.
    pub fn unit_cache_dir(&self) -> Option<PathBuf> {
        self.cache_dir
            .clone()
            .filter(|dir| !dir.as_os_str().is_empty())
            .or_else(crate::sandbox::code_cache::default_dir)
    }

    pub fn compile_limits(&self) -> CompileLimits {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        CompileLimits {
            timeout: Duration::from_secs(self.compile_timeout_secs),
            memory_bytes: self.compile_memory_mib.saturating_mul(MIB as u64),
            max_module_bytes: self.max_module_mib.saturating_mul(MIB),
            slots: self
                .compile_slots
                .unwrap_or_else(|| cores.min(DEFAULT_MAX_COMPILE_SLOTS))
                .max(1),
            queue: self.compile_queue,
            per_uploader: self.compiles_per_uploader.max(1),
        }
    }

    /// The store's connection settings, each at least 1.
    pub fn store_limits(&self) -> StoreLimits {
        StoreLimits {
            read_connections: self.db_read_connections.max(1),
            acquire_timeout: Duration::from_millis(self.db_acquire_timeout_ms.max(1)),
        }
    }

    /// The per-call limits of every unit.
    pub fn unit_limits(&self) -> Limits {
        self.limits.limits()
    }

    /// The decisions log's byte budget.
    pub fn decision_log_bytes(&self) -> u64 {
        self.decisions_max_mib.saturating_mul(MIB as u64)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }
}
