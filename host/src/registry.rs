//! The units the server has loaded, by id: what decisions run.
//!
//! A decision clones the `Arc`s it needs when it starts, so replacing a
//! unit's module swaps the entry and lets decisions in flight finish on the
//! old code while new ones get the new code. Each entry carries the unit's
//! name and description as stored (an upload may override the module's own),
//! so the pipeline's rules and explain records use the names operators see.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use sandpiper_model::Inventory;
use sandpiper_model::{BalanceRequest, Migration, Rejection, Request, Scores, UnitInfo};
use uuid::Uuid;

use crate::unit::{CallResult, Exports, Unit};

/// A loaded unit under its stored name.
pub struct Named {
    info: UnitInfo,
    inner: Arc<dyn Unit>,
}

impl Named {
    /// Wraps `inner`, naming it `name` and describing it as `description`.
    pub fn new(inner: Arc<dyn Unit>, name: &str, description: &str) -> Named {
        let mut info = inner.info().clone();
        info.name = name.to_owned();
        info.description = description.to_owned();
        Named { info, inner }
    }
}

impl Unit for Named {
    fn info(&self) -> &UnitInfo {
        &self.info
    }

    fn exports(&self) -> Exports {
        self.inner.exports()
    }

    fn filter(
        &self,
        inventory: &Arc<Inventory>,
        request: &Request,
        candidates: &[u32],
    ) -> CallResult<Vec<Rejection>> {
        self.inner.filter(inventory, request, candidates)
    }

    fn score(
        &self,
        inventory: &Arc<Inventory>,
        request: &Request,
        candidates: &[u32],
    ) -> CallResult<Scores> {
        self.inner.score(inventory, request, candidates)
    }

    fn balance(
        &self,
        inventory: &Arc<Inventory>,
        request: &BalanceRequest,
    ) -> CallResult<Option<Migration>> {
        self.inner.balance(inventory, request)
    }
}

/// The loaded units by id.
#[derive(Default)]
pub struct Registry {
    units: RwLock<HashMap<Uuid, Arc<dyn Unit>>>,
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The unit loaded under `id`.
    pub fn get(&self, id: Uuid) -> Option<Arc<dyn Unit>> {
        self.read().get(&id).cloned()
    }

    /// Loads (or atomically replaces) the unit under `id`.
    pub fn insert(&self, id: Uuid, unit: Arc<dyn Unit>) {
        self.write().insert(id, unit);
    }

    /// Forgets the unit under `id`; decisions holding it finish normally.
    pub fn remove(&self, id: Uuid) {
        self.write().remove(&id);
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    // A panic while holding the lock cannot leave the map half-written (each
    // operation is one map call), so a poisoned lock is still consistent.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Uuid, Arc<dyn Unit>>> {
        self.units.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Uuid, Arc<dyn Unit>>> {
        self.units.write().unwrap_or_else(|p| p.into_inner())
    }
}
