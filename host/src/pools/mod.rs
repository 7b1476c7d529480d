//! Prestarted VM pools (oVirt's VM pools with `prestarted_vms`, seed
//! `ovirt-prestarted-vm.txt`): a pool of identical VMs in one cluster, of
//! which `prestarted_vms` are kept running and unassigned, so that a user
//! who asks for one gets it at once instead of waiting for a boot.
//!
//! * [`member`]: a member's state, derived from its last start operation;
//! * [`starts`]: starting a member (a placement with a claim through the
//!   cluster's policy, recorded in the decisions log, then a `start`
//!   operation in the queue) and reading its start operations' states;
//! * [`actions`]: allocating a member to a user and returning it;
//! * [`monitor`]: the background task that keeps each pool's prestarted
//!   count topped up (oVirt's `VmPoolMonitor`).
//!
//! * [`routes`]: the HTTP contract, `/api/v1/vmpools`.
//!
//! Pools sit above the API, not below it: the monitor and the routes are
//! clients of the same services a request handler uses (the store, the
//! prepared policy, the placement service, the operations queue), through
//! the same [`AppState`], and make their decisions through the one
//! decision path (`api::schedule::place_held`). The API never names a
//! pool: `server` merges [`routes::routes()`] into the application and hands
//! the handlers the [`Pools`] handle as an `axum::Extension`. Every change
//! to one pool's members (an allocation, a return, a resize, a monitor
//! run) holds that pool's lock ([`Pools::lock`]), so two of them never
//! pick the same member.

pub mod actions;
pub mod args;
pub mod member;
pub mod monitor;
pub mod routes;
pub mod starts;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, OwnedMutexGuard};
use uuid::Uuid;

use crate::api::AppState;

pub use args::PoolArgs;

/// Most members a pool may have (oVirt's `MaxVmsInPool`, 1000).
pub const MAX_VMS_IN_POOL: u32 = 1000;

/// How often the monitor runs over every pool (oVirt's
/// `VmPoolMonitorIntervalInMinutes`, 5). It also runs at once when a pool
/// is created or changed, a member is allocated or returned, and at start.
pub const DEFAULT_MONITOR_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// Most members one run starts per pool (oVirt's `VmPoolMonitorBatchSize`,
/// 5): a pool of a thousand does not flood the queue at once.
pub const DEFAULT_BATCH_SIZE: u32 = 5;

/// Consecutive failed starts after which a run gives up on a pool until
/// the next run (oVirt's `VmPoolMonitorMaxAttempts`, 3): when the cluster
/// is full, trying every down member would only fill the log.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// The monitor's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    pub interval: Duration,
    pub batch_size: u32,
    pub max_attempts: u32,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            interval: DEFAULT_MONITOR_INTERVAL,
            batch_size: DEFAULT_BATCH_SIZE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }
}

/// What the pools share: their locks, the monitor's trigger and settings.
/// Cloning shares it.
#[derive(Clone, Default)]
pub struct Pools {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    config: PoolConfig,
    locks: Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<()>>>>,
    trigger: Notify,
}

impl Pools {
    pub fn new(config: PoolConfig) -> Pools {
        Pools {
            inner: Arc::new(Inner {
                config,
                ..Inner::default()
            }),
        }
    }

    pub fn config(&self) -> &PoolConfig {
        &self.inner.config
    }

    /// Takes the pool's lock: held while its members change.
    pub async fn lock(&self, pool_id: Uuid) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.inner.locks.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(locks.entry(pool_id).or_default())
        };
        lock.lock_owned().await
    }

    /// Forgets a deleted pool's lock.
    pub fn forget(&self, pool_id: Uuid) {
        self.inner
            .locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&pool_id);
    }

    /// Asks the monitor to run now (once more, if it is running).
    pub fn trigger(&self) {
        self.inner.trigger.notify_one();
    }

    async fn triggered(&self) {
        self.inner.trigger.notified().await;
    }
}

/// Starts the monitor over the pools on the current runtime: a run at
/// once, then one per interval or per trigger, whichever comes first.
pub fn start_monitor(state: AppState, pools: Pools) {
    tokio::spawn(monitor::run_forever(state, pools));
}
