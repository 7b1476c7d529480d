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

    /// Every loaded unit, as loaded now: what [`Registry::replace_if_unchanged`]
    /// compares against.
    pub fn snapshot(&self) -> HashMap<Uuid, Arc<dyn Unit>> {
        self.read().clone()
    }

    /// Replaces the unit under `id` with `unit` only if what is loaded
    /// there is still `seen` (the same instance, or nothing): a reload
    /// that read the store before a change made here committed must not
    /// put the older unit back over the newer one. True when replaced.
    pub fn replace_if_unchanged(
        &self,
        id: Uuid,
        seen: Option<&Arc<dyn Unit>>,
        unit: Arc<dyn Unit>,
    ) -> bool {
        let mut units = self.write();
        let same = match (units.get(&id), seen) {
            (None, None) => true,
            // The data pointers: a `dyn` pointer's vtable part may differ
            // for one instance.
            (Some(now), Some(seen)) => std::ptr::addr_eq(Arc::as_ptr(now), Arc::as_ptr(seen)),
            _ => false,
        };
        if same {
            units.insert(id, unit);
        }
        same
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_units::native;

    /// A reload that read the store before a change made here must not put
    /// its older unit back (server/follow.rs).
    #[test]
    fn a_stale_replacement_loses_to_a_newer_change() {
        let registry = Registry::new();
        let id = Uuid::new_v4();
        let old = native("sandpiper-policy-memory");
        registry.insert(id, old.clone());
        let seen = registry.snapshot();
        let newer = native("sandpiper-policy-cpu");
        registry.insert(id, newer.clone());
        let stale = native("sandpiper-policy-memory");
        assert!(!registry.replace_if_unchanged(id, seen.get(&id), stale));
        let now = registry.get(id).expect("loaded");
        assert!(std::ptr::addr_eq(Arc::as_ptr(&now), Arc::as_ptr(&newer)));
        let fresh = native("sandpiper-policy-memory");
        assert!(registry.replace_if_unchanged(id, Some(&newer), fresh));
        assert!(!registry.replace_if_unchanged(Uuid::new_v4(), Some(&old), old.clone()));
        assert!(registry.replace_if_unchanged(Uuid::new_v4(), None, old));
    }
}
