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
    let mut loaded: HashMap<Uuid, Loaded> = HashMap::new();
    let mut seen: Option<i64> = None;
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
        if seen == Some(generation) {
            continue;
        }
        let first = seen.is_none();
        match reload(&state, &mut loaded, first).await {
            Ok(()) => seen = Some(generation),
            Err(e) => tracing::warn!(error = %e, "could not follow a configuration change"),
        }
    }
}

/// Brings the loaded units in line with the store; on the first call only
/// records what the start loaded.
async fn reload(
    state: &AppState,
    loaded: &mut HashMap<Uuid, Loaded>,
    first: bool,
) -> Result<(), StoreError> {
    let units: Vec<UnitRecord> = {
        let mut conn = state.store().read().await?;
        conn.units().await?
    }
    .into_iter()
    .filter(|u| !u.internal)
    .collect();
    if first {
        *loaded = units.iter().map(|u| (u.id, Loaded::of(u))).collect();
        return Ok(());
    }
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
                registry.insert(
                    unit.id,
                    Arc::new(Named::new(module, &unit.name, &unit.description)),
                );
                loaded.insert(unit.id, now);
                tracing::info!(unit = %unit.name, "unit changed by another replica, reloaded");
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
