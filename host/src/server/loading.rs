//! Loading the uploaded units at startup: each from its stored compiled
//! code when the engine matches, otherwise recompiled from its stored
//! `.wasm` (after a wasmtime upgrade) through the same out-of-process
//! compile step as an upload ([`Modules::load_stored`]).

use std::sync::Arc;

use super::StartError;
use crate::registry::{Named, Registry};
use crate::store::Store;
use crate::upload::{Modules, StoredLoadError};

/// Loads every stored unit that is not built in. A unit that no longer
/// loads is logged and left out: the server still starts, and decisions of
/// the policies using it fail with an internal error naming it until it is
/// replaced or removed. Only a store that cannot be reached stops the
/// start.
pub async fn load_uploaded(
    store: &Store,
    modules: &Modules,
    registry: &Registry,
) -> Result<(), StartError> {
    let units = {
        let mut conn = store.read().await?;
        conn.units().await?
    };
    for unit in units.into_iter().filter(|u| !u.internal) {
        match modules.load_stored(store, &unit.module_sha256).await {
            Ok(loaded) => registry.insert(
                unit.id,
                Arc::new(Named::new(loaded, &unit.name, &unit.description)),
            ),
            Err(StoredLoadError::Store(e)) => return Err(e.into()),
            Err(e) => {
                tracing::error!(unit = %unit.name, sha256 = %unit.module_sha256, error = %e, "unit not loaded");
            }
        }
    }
    let mut tx = store.write().await?;
    tx.collect_module_garbage(&modules.engine_hash()).await?;
    tx.commit().await?;
    Ok(())
}
