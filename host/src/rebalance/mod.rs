//! The periodic balance (issue #12; oVirt's Balance, "called
//! periodically"): Sandpiper balances each cluster's held inventory on its
//! own and queues the migration it decides on as a `migrate` operation,
//! which an engine leases and carries out (`crate::operations`).
//!
//! One task per server ([`run`]) wakes every [`TICK`] and starts a round
//! ([`round::run`]) for each cluster that is due: periodic balance enabled,
//! its interval passed since its last round (or since the server started,
//! or since the cluster appeared). Rounds run one cluster after another: a
//! round is a few milliseconds of unit time, and running them in turn keeps
//! the balance from ever taking more than one sandbox slot from the
//! decisions engines ask for.

pub mod round;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::api::AppState;

pub use round::{Round, RoundError};

/// How often the loop looks for clusters that are due. Intervals are whole
/// seconds, so a quarter second keeps a round within 250 ms of its time.
pub const TICK: Duration = Duration::from_millis(250);

/// Balances every due cluster, forever; spawned by `server::build_state`.
pub async fn run(state: AppState) {
    let mut last_round: HashMap<Uuid, Instant> = HashMap::new();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let clusters = match state.store().read().await {
            Ok(mut conn) => conn.balance_settings().await,
            Err(e) => Err(e),
        };
        let clusters = match clusters {
            Ok(clusters) => clusters,
            Err(e) => {
                tracing::warn!(error = %e, "periodic balance: listing clusters failed");
                continue;
            }
        };
        let now = Instant::now();
        let present: HashSet<Uuid> = clusters.iter().map(|(id, _)| *id).collect();
        last_round.retain(|id, _| present.contains(id));
        // With several replicas, each balances the clusters it owns
        // (docs/fleet.md): a cluster's held inventory is only there.
        let owned = |id: &Uuid| state.fleet().owns(*id);
        for (cluster_id, balance) in clusters.iter().filter(|(id, b)| b.enabled && owned(id)) {
            let last = last_round.entry(*cluster_id).or_insert(now);
            let interval = Duration::from_secs(balance.interval_seconds.into());
            if now.duration_since(*last) < interval {
                continue;
            }
            *last = now;
            match round::run(&state, *cluster_id).await {
                Ok(round) => tracing::debug!(cluster = %cluster_id, ?round, "periodic balance"),
                Err(e) => {
                    tracing::warn!(cluster = %cluster_id, error = %e, "periodic balance round failed")
                }
            }
        }
    }
}
