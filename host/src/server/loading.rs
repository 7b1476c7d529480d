//! Loading the uploaded units at startup: each from its stored compiled
//! code when the engine matches, otherwise recompiled from its stored
//! `.wasm` (after a wasmtime upgrade) through the same out-of-process
//! compile step as an upload.

use std::sync::Arc;

use super::StartError;
use crate::registry::{Named, Registry};
use crate::store::Store;
use crate::upload::{Modules, Spooled, UploadError};

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
                let wasm = match stored_module(store, &unit.module_sha256).await? {
                    Ok(Some(wasm)) => wasm,
                    Ok(None) => {
                        tracing::error!(unit = %unit.name, sha256 = %unit.module_sha256, "module bytes missing from the store; unit not loaded");
                        continue;
                    }
                    Err(e) => {
                        tracing::error!(unit = %unit.name, error = %e, "stored module unreadable; unit not loaded");
                        continue;
                    }
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

/// The stored module `sha256` copied chunk by chunk into a temporary file
/// for the compile child, and checked against its sha256; `Ok(None)` when
/// the store has no such module. The outer error (no connection) stops
/// the start; the inner one (chunks missing, bytes changed, no temporary
/// file) only leaves the unit out.
async fn stored_module(
    store: &Store,
    sha256: &str,
) -> Result<Result<Option<Spooled>, UploadError>, StartError> {
    let (file, mut writer) = match Spooled::scratch() {
        Ok(scratch) => scratch,
        Err(e) => return Ok(Err(e)),
    };
    let copied = {
        let mut conn = store.read().await?;
        conn.copy_module_to(sha256, &mut writer).await
    };
    match copied {
        Ok(Some(_)) => Ok(Spooled::verified(file, sha256).await.map(Some)),
        Ok(None) => Ok(Ok(None)),
        Err(e) => Ok(Err(UploadError::Internal(e.to_string()))),
    }
}
