//! Several replicas on one PostgreSQL database (issue #13, docs/fleet.md).
//!
//! Every cluster is decided by one replica at a time, its **owner**: the
//! owner holds the cluster's inventory, claims and operations queue in
//! memory and serves every request that names the cluster; the other
//! replicas forward those requests to it (`api::forward`). Ownership is a
//! lease in the database (`store::fleet`): a replica takes a cluster whose
//! lease is free or expired when a request for it arrives, renews its
//! leases every [`FleetConfig::renew_every`], and loses a cluster whose
//! lease it could not renew in time. A replica that dies (even `kill -9`)
//! so loses its clusters within one lease, and the next request for each
//! makes another replica its owner, which loads the cluster from the
//! database as stored.
//!
//! Why leases and forwarding rather than a database lock per decision:
//! the no-overcommit guarantee comes from deciding over the claims in
//! memory under one lock per cluster (`placement::service`), which is what
//! makes a decision cost microseconds; reading a cluster's state from the
//! database at every decision would cost milliseconds. A lease keeps that
//! design and adds one rule: the store's writer fences every placement
//! write with the owner's epoch (`store::Fence`), so a replica that lost
//! its lease without noticing cannot store a claim made on stale memory.
//!
//! With an SQLite file there is one process and it owns every cluster
//! ([`Fleet::single`]): no lease, no forwarding, no fence.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use crate::operations::OperationsService;
use crate::placement::PlacementService;
use crate::store::{Backend, Fence, Store, StoreError};

/// A lease's default length: how long a dead replica's clusters wait for
/// a new owner, at most.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(5);

/// How a replica takes part in the fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetConfig {
    /// This replica's id, new at every start.
    pub replica_id: String,
    /// Where the other replicas reach this one (`http://host:port`).
    pub url: String,
    /// How long a taken or renewed lease lasts.
    pub lease: Duration,
}

impl FleetConfig {
    /// Leases are renewed five times per lease, so that a slow database
    /// round trip or two does not lose them.
    pub fn renew_every(&self) -> Duration {
        self.lease / 5
    }
}

/// Who decides for a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// This replica: serve the request here.
    Here,
    /// Another replica, reached at `url`.
    There { replica_id: String, url: String },
}

/// The replicas' membership as this one sees it; cloning shares it.
#[derive(Clone, Debug)]
pub struct Fleet {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    /// `None`: the only replica (SQLite).
    config: Option<FleetConfig>,
    /// The clusters this replica owns: the epoch it took each with, and
    /// until when it may serve it without renewing (this process's clock,
    /// started before the database's, so it ends first).
    owned: Mutex<HashMap<Uuid, Lease>>,
    /// What holds per-cluster state, told when a cluster arrives or goes.
    holders: OnceLock<Holders>,
    /// Serialises taking clusters over, so that two requests for a free
    /// cluster load it once.
    taking: tokio::sync::Mutex<()>,
    /// Other replicas' clusters as last read, and until when that answer
    /// is used without asking the database again (a fifth of a lease): a
    /// replica forwarding a burst asks once, not per request.
    elsewhere: Mutex<HashMap<Uuid, (Owner, Instant)>>,
}

#[derive(Clone, Copy, Debug)]
struct Lease {
    epoch: i64,
    /// When this replica asked for the lease it holds.
    taken_at: Instant,
    valid_until: Instant,
}

/// The services that keep a cluster's state in memory.
#[derive(Clone)]
struct Holders {
    placement: PlacementService,
    operations: OperationsService,
}

impl std::fmt::Debug for Holders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Holders")
    }
}

/// What the writer's fence asks ([`Fence`]).
#[derive(Debug)]
struct Epochs(Arc<Inner>);

impl Fence for Epochs {
    fn replica_id(&self) -> &str {
        self.0.config.as_ref().map_or("", |c| c.replica_id.as_str())
    }

    fn epoch(&self, cluster_id: Uuid) -> Option<i64> {
        self.0.lease(cluster_id).map(|l| l.epoch)
    }
}

impl Inner {
    fn lease(&self, cluster_id: Uuid) -> Option<Lease> {
        let owned = self.owned.lock().unwrap_or_else(|p| p.into_inner());
        owned
            .get(&cluster_id)
            .filter(|l| l.valid_until > Instant::now())
            .copied()
    }
}

impl Fleet {
    /// The one process on an SQLite file: it owns every cluster.
    pub fn single(store: Store) -> Fleet {
        Fleet::new(store, None)
    }

    /// One replica of several on `store` (PostgreSQL). Fences the store's
    /// writer with this replica's leases.
    pub fn shared(store: Store, config: FleetConfig) -> Fleet {
        debug_assert_eq!(store.backend(), Backend::Postgres);
        let fleet = Fleet::new(store, Some(config));
        fleet
            .inner
            .store
            .set_fence(Arc::new(Epochs(Arc::clone(&fleet.inner))));
        fleet
    }

    fn new(store: Store, config: Option<FleetConfig>) -> Fleet {
        Fleet {
            inner: Arc::new(Inner {
                store,
                config,
                owned: Mutex::new(HashMap::new()),
                holders: OnceLock::new(),
                taking: tokio::sync::Mutex::new(()),
                elsewhere: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Tells the fleet what to reload when this replica takes a cluster
    /// over and what to drop when it loses one; then starts renewing.
    pub fn start(&self, placement: PlacementService, operations: OperationsService) {
        let _ = self.inner.holders.set(Holders {
            placement,
            operations,
        });
        if let Some(config) = &self.inner.config {
            tokio::spawn(renew(Arc::downgrade(&self.inner), config.renew_every()));
        }
    }

    /// Whether several replicas share the database.
    pub fn is_shared(&self) -> bool {
        self.inner.config.is_some()
    }

    /// This replica's settings, when shared.
    pub fn config(&self) -> Option<&FleetConfig> {
        self.inner.config.as_ref()
    }

    /// Whether this replica owns `cluster_id` now, without asking the
    /// database: what the background loops (periodic balance, pools) ask
    /// before they act on a cluster.
    pub fn owns(&self, cluster_id: Uuid) -> bool {
        self.inner.config.is_none() || self.inner.lease(cluster_id).is_some()
    }

    /// The clusters this replica owns (for `/healthz`); empty for the only
    /// replica, which owns them all.
    pub fn owned(&self) -> Vec<Uuid> {
        let now = Instant::now();
        let owned = self.inner.owned.lock().unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<Uuid> = owned
            .iter()
            .filter(|(_, l)| l.valid_until > now)
            .map(|(id, _)| *id)
            .collect();
        ids.sort();
        ids
    }

    /// Who decides for `cluster_id`, taking it for this replica if nobody
    /// does. A cluster taken over is loaded from the database before this
    /// returns [`Owner::Here`].
    pub async fn owner(&self, cluster_id: Uuid) -> Result<Owner, StoreError> {
        let Some(config) = &self.inner.config else {
            return Ok(Owner::Here);
        };
        if self.inner.lease(cluster_id).is_some() {
            return Ok(Owner::Here);
        }
        if let Some(owner) = self.remembered(cluster_id) {
            return Ok(owner);
        }
        let _taking = self.inner.taking.lock().await;
        if self.inner.lease(cluster_id).is_some() {
            return Ok(Owner::Here);
        }
        let asked = Instant::now();
        let row = {
            let mut conn = self.inner.store.read().await?;
            conn.take_cluster(cluster_id, &config.replica_id, &config.url, config.lease)
                .await?
        };
        // No such cluster: the route answers that, here.
        let Some(row) = row else {
            return Ok(Owner::Here);
        };
        if row.replica_id != config.replica_id {
            let owner = Owner::There {
                replica_id: row.replica_id,
                url: row.url,
            };
            self.inner
                .elsewhere
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(cluster_id, (owner.clone(), asked + config.renew_every()));
            return Ok(owner);
        }
        // Whatever this replica held of the cluster from an earlier lease
        // may have changed under another owner since: start from the store,
        // once what this replica still had queued for it is stored (under
        // the same epoch) or refused (under an older one).
        if let Some(holders) = self.inner.holders.get() {
            if let Err(e) = holders.placement.forget_settled(cluster_id).await {
                tracing::warn!(cluster = %cluster_id, error = %e, "settling a cluster before taking it over");
            }
            holders.operations.adopt(cluster_id).await?;
        }
        tracing::info!(cluster = %cluster_id, epoch = row.epoch, "cluster taken over");
        self.inner
            .owned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                cluster_id,
                Lease {
                    epoch: row.epoch,
                    taken_at: asked,
                    valid_until: asked + config.lease,
                },
            );
        Ok(Owner::Here)
    }

    /// Another replica's ownership of `cluster_id`, if read recently.
    fn remembered(&self, cluster_id: Uuid) -> Option<Owner> {
        let mut elsewhere = self
            .inner
            .elsewhere
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match elsewhere.get(&cluster_id) {
            Some((owner, until)) if *until > Instant::now() => Some(owner.clone()),
            Some(_) => {
                elsewhere.remove(&cluster_id);
                None
            }
            None => None,
        }
    }

    /// Forgets who else owns `cluster_id` (it did not answer): the next
    /// request asks the database.
    pub fn forget_owner(&self, cluster_id: Uuid) {
        self.inner
            .elsewhere
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&cluster_id);
    }

    /// Gives up every cluster at once (a clean stop), so the other
    /// replicas take them over at their next request.
    pub async fn leave(&self) {
        let Some(config) = &self.inner.config else {
            return;
        };
        self.inner
            .owned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        let released = async {
            let mut conn = self.inner.store.read().await?;
            conn.release_clusters(&config.replica_id).await
        };
        if let Err(e) = released.await {
            tracing::warn!(error = %e, "could not give up this replica's clusters; they move when their leases end");
        }
    }
}

/// Renews this replica's leases every `every`; drops the clusters whose
/// lease it could not renew in time.
async fn renew(inner: std::sync::Weak<Inner>, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let Some(config) = &inner.config else {
            return;
        };
        let asked = Instant::now();
        let renewed = async {
            let mut conn = inner.store.read().await?;
            conn.renew_clusters(&config.replica_id, config.lease).await
        }
        .await;
        let lost: Vec<Uuid> = {
            let mut owned = inner.owned.lock().unwrap_or_else(|p| p.into_inner());
            match renewed {
                Ok(rows) => {
                    let renewed: HashMap<Uuid, i64> = rows.into_iter().collect();
                    for (id, lease) in owned.iter_mut() {
                        if renewed.get(id) == Some(&lease.epoch) {
                            lease.valid_until = asked + config.lease;
                        }
                    }
                    // Not renewed: the database says the lease had run
                    // out. (Unless taken after the renewal was asked.)
                    owned
                        .iter()
                        .filter(|(id, l)| renewed.get(id) != Some(&l.epoch) && l.taken_at < asked)
                        .map(|(id, _)| *id)
                        .collect()
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not renew cluster leases");
                    let now = Instant::now();
                    owned
                        .iter()
                        .filter(|(_, l)| l.valid_until <= now)
                        .map(|(id, _)| *id)
                        .collect()
                }
            }
        };
        if lost.is_empty() {
            continue;
        }
        {
            let mut owned = inner.owned.lock().unwrap_or_else(|p| p.into_inner());
            for id in &lost {
                owned.remove(id);
            }
        }
        if let Some(holders) = inner.holders.get() {
            for id in &lost {
                tracing::warn!(cluster = %id, "cluster lease lost; another replica decides for it now");
                holders.placement.forget(*id);
                holders.operations.forget(*id);
            }
        }
    }
}
