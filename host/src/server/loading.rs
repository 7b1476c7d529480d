//! Loading the uploaded units at startup: each from its stored compiled
//! code when the engine matches, otherwise recompiled from its stored
//! `.wasm` (after a wasmtime upgrade) through the same out-of-process
//! compile step as an upload.

use std::sync::Arc;

use super::StartError;
use crate::registry::{Named, Registry};
use crate::store::Store;
use crate::upload::Modules;

/// Loads every stored unit that is not built in. A unit that no longer
/// loads is logged and left out: the server still starts, and decisions of
/// the policies using it fail with an internal error naming it until it is
/// replaced or removed.
pub async fn load_uploaded(
    store: &Store,
    modules: &Modules,
    registry: &Registry,
) -> Result<(), StartError> {
    let engine_hash = modules.engine_hash();
    let units = {
        let mut conn = store.read().await?;
        conn.units().await?
    };
    for unit in units.into_iter().filter(|u| !u.internal) {
        let stored = {
            let mut conn = store.read().await?;
            conn.artifact(&unit.module_sha256, &engine_hash).await?
        };
        let artifact = match stored {
            Some(artifact) => artifact,
            None => {
                let wasm = {
                    let mut conn = store.read().await?;
                    conn.module_wasm(&unit.module_sha256).await?
                };
                let Some(wasm) = wasm else {
                    tracing::error!(unit = %unit.name, sha256 = %unit.module_sha256, "module bytes missing from the store; unit not loaded");
                    continue;
                };
                tracing::info!(unit = %unit.name, "recompiling for this engine");
                match modules.compile(&wasm).await {
                    Ok(artifact) => {
                        let mut tx = store.write().await?;
                        tx.insert_artifact(&unit.module_sha256, &engine_hash, &artifact)
                            .await?;
                        tx.commit().await?;
                        artifact
                    }
                    Err(e) => {
                        tracing::error!(unit = %unit.name, error = %e, "unit does not compile any more; not loaded");
                        continue;
                    }
                }
            }
        };
        match modules.load(&unit.module_sha256, artifact).await {
            Ok(loaded) => registry.insert(
                unit.id,
                Arc::new(Named::new(loaded, &unit.name, &unit.description)),
            ),
            Err(e) => {
                tracing::error!(unit = %unit.name, error = %e, "unit does not load; not loaded");
            }
        }
    }
    let mut tx = store.write().await?;
    tx.collect_module_garbage(&engine_hash).await?;
    tx.commit().await?;
    Ok(())
}
