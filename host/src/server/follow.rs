//! With several replicas (docs/fleet.md): following the configuration
//! changes made through the others. An admin change raises the stored
//! configuration generation (`api::prepared::track_config_changes`); every
//! replica reads it every [`POLL`] and, when it moved, forgets its prepared
//! policies and cached tokens and brings its loaded units in line with the
//! stored ones. A change made through one replica so is in effect on all
//! within about [`POLL`] (plus a unit's load time, for a new module).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::api::AppState;
use crate::registry::Named;
use crate::store::StoreError;
use crate::store::units::UnitRecord;
use crate::upload::StoredLoadError;

/// How often a replica reads the configuration generation.
pub const POLL: Duration = Duration::from_secs(1);

/// How often a replica reloads even though the generation did not move:
/// a change whose raise was lost (the changing replica died between its
/// commit and the raise) is in effect everywhere within this time.
pub const REFRESH: Duration = Duration::from_secs(30);

/// What a loaded unit was loaded from: a change of any reloads it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Loaded {
    sha256: String,
    name: String,
    description: String,
}

impl Loaded {
    fn of(unit: &UnitRecord) -> Loaded {
        Loaded {
            sha256: unit.module_sha256.clone(),
            name: unit.name.clone(),
            description: unit.description.clone(),
        }
    }
}

/// Follows the configuration generation until the process ends.
pub async fn run(state: AppState) {
    // Empty: the first poll reloads every unit, so a change made while
    // this replica started is not missed.
    let mut loaded: HashMap<Uuid, Loaded> = HashMap::new();
    let mut seen: Option<i64> = None;
    let mut refreshed = tokio::time::Instant::now();
    let mut ticker = tokio::time::interval(POLL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let generation = async {
            let mut conn = state.store().read().await?;
            conn.config_generation().await
        }
        .await;
        let generation = match generation {
            Ok(generation) => generation,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the configuration generation");
                continue;
            }
        };
        if seen == Some(generation) && refreshed.elapsed() < REFRESH {
            continue;
        }
        match reload(&state, &mut loaded).await {
            Ok(()) => {
                seen = Some(generation);
                refreshed = tokio::time::Instant::now();
            }
            Err(e) => tracing::warn!(error = %e, "could not follow a configuration change"),
        }
    }
}

/// Brings the loaded units in line with the store.
///
/// A unit changed through this replica while the reload runs is left as
/// that change loaded it: the registry is read before the store, and a
/// unit is replaced only if its entry is still the one read then
/// (`Registry::replace_if_unchanged`). Otherwise a reload that read the
/// store just before the change committed would put the old module back
/// until the next poll.
async fn reload(state: &AppState, loaded: &mut HashMap<Uuid, Loaded>) -> Result<(), StoreError> {
    let before = state.registry().snapshot();
    let units: Vec<UnitRecord> = {
        let mut conn = state.store().read().await?;
        conn.units().await?
    }
    .into_iter()
    .filter(|u| !u.internal)
    .collect();
    state.prepared().invalidate();
    state.tokens().invalidate();
    let registry = state.registry();
    for unit in &units {
        let now = Loaded::of(unit);
        if loaded.get(&unit.id) == Some(&now) {
            continue;
        }
        match state
            .modules()
            .load_stored(state.store(), &unit.module_sha256)
            .await
        {
            Ok(module) => {
                let named = Arc::new(Named::new(module, &unit.name, &unit.description));
                if registry.replace_if_unchanged(unit.id, before.get(&unit.id), named) {
                    loaded.insert(unit.id, now);
                    tracing::debug!(unit = %unit.name, "unit (re)loaded as stored");
                } else {
                    // Changed here meanwhile; the change raised the
                    // generation, so the next poll looks again.
                    loaded.remove(&unit.id);
                }
            }
            Err(StoredLoadError::Store(e)) => return Err(e),
            Err(e) => {
                tracing::error!(unit = %unit.name, error = %e, "unit changed by another replica did not load");
            }
        }
    }
    let kept: std::collections::HashSet<Uuid> = units.iter().map(|u| u.id).collect();
    loaded.retain(|id, _| {
        let keep = kept.contains(id);
        if !keep {
            registry.remove(*id);
        }
        keep
    });
    // Prepared policies read since the invalidation above may hold a unit
    // replaced just now.
    state.prepared().invalidate();
    Ok(())
}
