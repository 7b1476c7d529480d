//! The `sandpiper serve` flags of the operations queue, each with an
//! environment variable; the defaults and their reasons are the constants
//! of `super` and of `sandpiper_queue`.

use std::time::Duration;

use super::OperationsConfig;

/// Operations queue settings of `sandpiper serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct OperationsArgs {
    /// Operations of one cluster leased at once (Ganeti's parallel-job
    /// limit); more wait in the queue.
    #[arg(long, env = "SANDPIPER_MAX_LEASED_OPERATIONS", default_value_t = super::DEFAULT_MAX_LEASED,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_leased_operations: usize,

    /// Operations one cluster may have queued; more are refused 503
    /// `queue_full`.
    #[arg(long, env = "SANDPIPER_MAX_QUEUED_OPERATIONS", default_value_t = super::DEFAULT_MAX_QUEUED,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_queued_operations: usize,

    /// Milliseconds a lease lasts when the worker asks for no TTL.
    #[arg(long, env = "SANDPIPER_LEASE_TTL_MS", default_value_t = millis(super::DEFAULT_LEASE_TTL),
          value_parser = clap::value_parser!(u64).range(millis(super::MIN_LEASE_TTL)..=millis(super::MAX_LEASE_TTL)))]
    pub lease_ttl_ms: u64,

    /// Seconds per tick of an operation's age in the predictive order.
    #[arg(long, env = "SANDPIPER_QUEUE_TICK_SECS", default_value_t = sandpiper_queue::TICK.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub queue_tick_secs: u64,

    /// Ticks after which every queued operation weighs 0 (K: how long an
    /// operation can be passed over by lighter ones).
    #[arg(long, env = "SANDPIPER_QUEUE_STARVATION_TICKS", default_value_t = sandpiper_queue::STARVATION_TICKS as u32,
          value_parser = clap::builder::RangedU64ValueParser::<u32>::new().range(1..))]
    pub queue_starvation_ticks: u32,

    /// Days a finished operation (succeeded, failed, cancelled) is kept.
    #[arg(long, env = "SANDPIPER_OPERATIONS_MAX_AGE_DAYS", default_value_t = super::DEFAULT_FINISHED_MAX_AGE.as_secs() / 86_400,
          value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..))]
    pub operations_max_age_days: u64,
}

const fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

impl OperationsArgs {
    pub fn config(&self) -> OperationsConfig {
        OperationsConfig {
            max_leased: self.max_leased_operations,
            max_queued: self.max_queued_operations,
            default_lease_ttl: Duration::from_millis(self.lease_ttl_ms),
            finished_max_age: Duration::from_secs(
                self.operations_max_age_days.saturating_mul(86_400),
            ),
            order: sandpiper_queue::Config {
                tick: Duration::from_secs(self.queue_tick_secs),
                starvation_ticks: f64::from(self.queue_starvation_ticks),
                ..sandpiper_queue::Config::default()
            },
            ..OperationsConfig::default()
        }
    }
}
