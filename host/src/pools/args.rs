//! The `sandpiper serve` flags of the pool monitor, each with an
//! environment variable; the defaults and their reasons are the constants
//! of `super` (oVirt's names in docs/pools.md).

use std::time::Duration;

use super::PoolConfig;

/// Pool monitor settings of `sandpiper serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct PoolArgs {
    /// Milliseconds between two runs of the pool monitor (oVirt's
    /// `VmPoolMonitorIntervalInMinutes`, 5 minutes).
    #[arg(long, env = "SANDPIPER_POOL_MONITOR_INTERVAL_MS", default_value_t = super::DEFAULT_MONITOR_INTERVAL.as_millis() as u64)]
    pub pool_monitor_interval_ms: u64,

    /// Most members one run starts per pool (`VmPoolMonitorBatchSize`).
    #[arg(long, env = "SANDPIPER_POOL_MONITOR_BATCH_SIZE", default_value_t = super::DEFAULT_BATCH_SIZE)]
    pub pool_monitor_batch_size: u32,

    /// Consecutive failed starts that end a run over a pool
    /// (`VmPoolMonitorMaxAttempts`).
    #[arg(long, env = "SANDPIPER_POOL_MONITOR_MAX_ATTEMPTS", default_value_t = super::DEFAULT_MAX_ATTEMPTS)]
    pub pool_monitor_max_attempts: u32,
}

impl PoolArgs {
    pub fn config(&self) -> PoolConfig {
        PoolConfig {
            // A floor, so a mistyped 0 cannot spin the monitor.
            interval: Duration::from_millis(self.pool_monitor_interval_ms.max(10)),
            batch_size: self.pool_monitor_batch_size.max(1),
            max_attempts: self.pool_monitor_max_attempts.max(1),
        }
    }
}
