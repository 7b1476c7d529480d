//! What the pipeline needs from a policy unit, whether it runs sandboxed in
//! WebAssembly or natively (benchmarks and tests run a unit's very source
//! natively through `sandpiper_guest::native::NativeUnit`).

use std::sync::Arc;
use std::time::Duration;

use sandpiper_model::{BalanceRequest, Migration, Rejection, Request, Scores, UnitInfo};
use sandpiper_model::{HostMetric, Inventory};

/// Which of the three roles a unit implements, read from its exports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Exports {
    pub filter: bool,
    pub score: bool,
    pub balance: bool,
}

/// The three roles, for errors and explain records (and `unit new --roles`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Filter,
    Score,
    Balance,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Filter => "filter",
            Role::Score => "score",
            Role::Balance => "balance",
        })
    }
}

impl Exports {
    /// The roles exported, in pipeline order (filter, score, balance).
    pub fn roles(&self) -> Vec<Role> {
        [Role::Filter, Role::Score, Role::Balance]
            .into_iter()
            .filter(|&role| self.has(role))
            .collect()
    }

    pub fn has(&self, role: Role) -> bool {
        match role {
            Role::Filter => self.filter,
            Role::Score => self.score,
            Role::Balance => self.balance,
        }
    }
}

/// What one call cost. `fuel` is `None` for native calls, which are not
/// metered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    pub fuel: Option<u64>,
    #[serde(serialize_with = "serialize_micros", rename = "elapsed_us")]
    pub elapsed: Duration,
}

fn serialize_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros().min(u128::from(u64::MAX)) as u64)
}

/// A unit's answer together with what it cost and what it read.
#[derive(Clone, Debug, PartialEq)]
pub struct Called<T> {
    pub value: T,
    pub usage: Usage,
    pub read: ColumnsRead,
}

/// Which of the snapshot's changeable columns a call read: each host
/// metric, the VM columns and the hardware columns. The VM count is not
/// a column here: every call reads it (the guest's snapshot is sized by
/// it), and a per-host answer may depend only on the VMs on its host,
/// which a unit finds through `vm-hosts`. These are what a decision's own snapshot changes between
/// calls without a host reporting anything (the claims pending on a host
/// move its usage metrics and add VMs), so an answer from a call that read
/// none of a change's columns cannot have depended on it: the reuse of
/// per-host answers relies on that (`pipeline::reuse`).
///
/// A sandboxed call's record is exact: the host serves every column the
/// unit reads through its `inventory` import and notes it. A native call
/// reads the snapshot directly, unseen, so it counts as having read
/// everything ([`ColumnsRead::ALL`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColumnsRead {
    /// Bit `m` for `HostMetric` `m`, then [`VMS`] and [`HARDWARE`]: one
    /// word, as every answer kept for reuse keeps its call's.
    bits: u64,
}

const VMS: u64 = 1 << 62;
const HARDWARE: u64 = 1 << 63;
const _: () = assert!(HostMetric::ALL.len() <= 62, "a bit per host metric");

impl ColumnsRead {
    /// Nothing read.
    pub const NONE: ColumnsRead = ColumnsRead { bits: 0 };

    /// Everything, as far as anyone can tell.
    pub const ALL: ColumnsRead = ColumnsRead { bits: u64::MAX };

    /// These host metrics, and the VM and hardware columns as given.
    pub const fn of(metrics: &[HostMetric], vms: bool, hardware: bool) -> ColumnsRead {
        let mut bits = 0;
        let mut i = 0;
        while i < metrics.len() {
            bits |= 1 << metrics[i] as u64;
            i += 1;
        }
        if vms {
            bits |= VMS;
        }
        if hardware {
            bits |= HARDWARE;
        }
        ColumnsRead { bits }
    }

    pub fn host_metric(&mut self, metric: HostMetric) {
        self.bits |= 1 << metric as u64;
    }

    pub fn vms(&mut self) {
        self.bits |= VMS;
    }

    pub fn hardware(&mut self) {
        self.bits |= HARDWARE;
    }

    /// Whether host metric `metric` was read.
    pub fn read_host_metric(self, metric: HostMetric) -> bool {
        self.bits & (1 << metric as u64) != 0
    }

    /// Whether a VM column (or which VMs run where) was read.
    pub fn read_vms(self) -> bool {
        self.bits & VMS != 0
    }

    /// What either call read: the record of a call made in parts.
    pub fn union(self, other: ColumnsRead) -> ColumnsRead {
        ColumnsRead {
            bits: self.bits | other.bits,
        }
    }

    /// Whether a column read here is among `other`'s.
    pub fn overlaps(self, other: ColumnsRead) -> bool {
        self.bits & other.bits != 0
    }
}

/// Why a unit call failed. Classified from typed traps and limiter errors,
/// never from message text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UnitError {
    #[error("ran out of fuel (budget {budget})")]
    OutOfFuel { budget: u64 },
    #[error("exceeded its deadline of {} ms", deadline.as_millis())]
    DeadlineExceeded { deadline: Duration },
    /// The deadline passed while the call's thread was starved of CPU (it
    /// got less than `sandbox::STARVED_CPU_PERCENT` of the wall-clock time):
    /// the machine is overloaded, and the unit is not to blame. Retryable.
    #[error(
        "was starved of CPU: {} ms of CPU time in {} ms, past its deadline of {} ms; the machine is overloaded",
        cpu.as_millis(), elapsed.as_millis(), deadline.as_millis()
    )]
    Overloaded {
        deadline: Duration,
        cpu: Duration,
        elapsed: Duration,
    },
    #[error("exceeded its memory limit of {limit_bytes} bytes")]
    MemoryLimit { limit_bytes: u64 },
    #[error("overflowed its stack")]
    StackOverflow,
    #[error("trapped: {trap}{}", panic.as_ref().map(|p| format!(" (panic: {p})")).unwrap_or_default())]
    Trap {
        /// wasmtime's trap code or the host-side failure, e.g. "unreachable".
        trap: String,
        /// The unit's own panic message, read from its stderr, when it printed one.
        panic: Option<String>,
    },
    #[error("returned invalid output: {0}")]
    InvalidOutput(String),
    #[error("does not export the {0} interface")]
    NotExported(Role),
    #[error("could not be instantiated: {0}")]
    Instantiate(String),
}

impl UnitError {
    /// A stable machine-readable code for APIs and explain records.
    pub fn code(&self) -> &'static str {
        match self {
            UnitError::OutOfFuel { .. } => "out_of_fuel",
            UnitError::DeadlineExceeded { .. } => "deadline_exceeded",
            UnitError::Overloaded { .. } => "overloaded",
            UnitError::MemoryLimit { .. } => "memory_limit",
            UnitError::StackOverflow => "stack_overflow",
            UnitError::Trap { .. } => "trap",
            UnitError::InvalidOutput(_) => "invalid_output",
            UnitError::NotExported(_) => "not_exported",
            UnitError::Instantiate(_) => "instantiate",
        }
    }
}

impl UnitError {
    /// Whether the failure is the machine's, not the unit's: the decision
    /// should be retried, not reported as the policy's verdict.
    pub fn is_overload(&self) -> bool {
        matches!(self, UnitError::Overloaded { .. })
    }
}

/// A failed call: the error and what the call cost before it failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct Failed {
    pub error: UnitError,
    pub usage: Usage,
}

pub type CallResult<T> = Result<Called<T>, Failed>;

/// A policy unit the pipeline can call. Implementations must be callable from
/// several threads at once, and each call must be independent of every other
/// (a sandboxed unit gets a fresh instance per call).
pub trait Unit: Send + Sync {
    /// What the unit says about itself (read once, when it was loaded).
    fn info(&self) -> &UnitInfo;

    /// Which roles the unit implements.
    fn exports(&self) -> Exports;

    /// Judges `candidates`; see `filter.filter` in the WIT.
    fn filter(
        &self,
        inventory: &Arc<Inventory>,
        request: &Request,
        candidates: &[u32],
    ) -> CallResult<Vec<Rejection>>;

    /// Scores `candidates`; see `score.score` in the WIT.
    fn score(
        &self,
        inventory: &Arc<Inventory>,
        request: &Request,
        candidates: &[u32],
    ) -> CallResult<Scores>;

    /// Proposes at most one migration; see `balance.balance` in the WIT.
    fn balance(
        &self,
        inventory: &Arc<Inventory>,
        request: &BalanceRequest,
    ) -> CallResult<Option<Migration>>;
}
