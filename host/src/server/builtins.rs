//! The built-in units and the built-in policy, registered at every start.
//!
//! Built-in units come embedded in the binary (`crate::builtin::UNITS`).
//! They are stored like uploads (content-addressed module, compiled code)
//! but internal: they cannot be deleted, replaced or disabled, and their ids
//! are derived from their names so they survive restarts and upgrades. The
//! built-in policy is locked and rewritten at every start, so an upgraded
//! binary brings its units' new versions and the policy along.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::StartError;
use crate::pipeline::{Combination, OnFailure, Position};
use crate::registry::{Named, Registry};
use crate::store::policies::{FilterLink, PolicyRecord, WeightLink};
use crate::store::units::UnitModule;
use crate::store::{self, Store};
use crate::unit::Unit;
use crate::upload::{Modules, module_sha256};

/// Namespace of the ids of built-in units and policies (a random UUID,
/// fixed forever: changing it would change every built-in id).
const BUILTIN_NAMESPACE: Uuid = Uuid::from_u128(0x5a2c_1f3e_9b7d_4c60_8e21_d4f0_6a8b_3c17);

/// Who "uploaded" a built-in unit, as shown in `uploaded_by`.
const BUILTIN_UPLOADER: &str = "builtin";

/// The built-in policy's name: oVirt's default policy is called `none`
/// (no load balancing), and so is ours.
pub const BUILTIN_POLICY_NAME: &str = "none";

const BUILTIN_POLICY_DESCRIPTION: &str = "Built in, locked. oVirt's default `none` policy: \
     hosts without the CPU or memory for the VM are filtered out, and the rest are ranked \
     by even CPU (factor 2) and even memory (factor 1) distribution. No balancing. \
     Clone it to change it.";

/// The built-in policy's filters, by unit name, in run order.
const BUILTIN_FILTERS: &[&str] = &["CPU", "Memory"];

/// The built-in policy's weights, by unit name, with oVirt's factors for
/// its `none` policy.
const BUILTIN_WEIGHTS: &[(&str, u32)] = &[
    ("OptimalForCpuEvenDistribution", 2),
    ("OptimalForMemoryEvenDistribution", 1),
];

/// The stable id of the built-in unit called `name`.
pub fn builtin_unit_id(name: &str) -> Uuid {
    Uuid::new_v5(&BUILTIN_NAMESPACE, format!("unit/{name}").as_bytes())
}

fn builtin_policy_id() -> Uuid {
    Uuid::new_v5(
        &BUILTIN_NAMESPACE,
        format!("policy/{BUILTIN_POLICY_NAME}").as_bytes(),
    )
}

/// Registers every built-in unit (storing, compiling and loading it) and
/// then the built-in policy.
pub async fn register(
    store: &Store,
    modules: &Modules,
    registry: &Registry,
) -> Result<(), StartError> {
    let engine_hash = modules.engine_hash();
    let mut by_name: HashMap<String, Uuid> = HashMap::new();
    for builtin in crate::builtin::UNITS {
        let fail = |message: String| StartError::Builtin {
            name: builtin.name.to_owned(),
            message,
        };
        let sha256 = module_sha256(builtin.wasm);
        let stored = {
            let mut conn = store.read().await?;
            store::modules::artifact(&mut conn, &sha256, &engine_hash).await?
        };
        let (artifact, fresh) = match stored {
            Some(artifact) => (artifact, false),
            None => {
                // Our own embedded units are trusted: compiled in process.
                let runtime = Arc::clone(modules.runtime());
                let wasm = builtin.wasm;
                let artifact = tokio::task::spawn_blocking(move || runtime.precompile(wasm))
                    .await
                    .map_err(|e| fail(e.to_string()))?
                    .map_err(|e| fail(e.to_string()))?;
                (artifact, true)
            }
        };
        let unit = modules
            .load(&sha256, artifact.clone())
            .await
            .map_err(|e| fail(e.to_string()))?;
        let info = unit.info();
        let id = builtin_unit_id(builtin.name);
        let module = UnitModule {
            name: info.name.clone(),
            description: info.description.clone(),
            exports: unit.exports(),
            score_order: info.score_order,
            params: info.params.clone(),
            module_sha256: sha256.clone(),
            uploaded_by: BUILTIN_UPLOADER.to_owned(),
        };

        let mut tx = store.write().await?;
        let holder = store::units::get_by_name(&mut tx, &module.name).await?;
        if let Some(other) = holder.filter(|other| other.id != id) {
            return Err(fail(format!(
                "an uploaded unit ({}) is already called `{}`; rename or delete it",
                other.id, module.name
            )));
        }
        store::modules::insert(&mut tx, &sha256, builtin.wasm).await?;
        if fresh {
            store::modules::insert_artifact(&mut tx, &sha256, &engine_hash, &artifact).await?;
        }
        match store::units::get(&mut tx, id).await? {
            None => store::units::insert(&mut tx, id, true, &module).await?,
            Some(existing) if differs(&existing, &module) => {
                store::units::replace_module(&mut tx, id, &module).await?;
            }
            Some(_) => {}
        }
        tx.commit().await?;
        by_name.insert(module.name.clone(), id);
        let named: Arc<dyn Unit> = Arc::new(Named::new(unit, &module.name, &module.description));
        registry.insert(id, named);
    }
    register_policy(store, registry, &by_name).await
}

/// Whether two policies have the same content (ignoring times and the
/// default flag).
fn same_policy(a: &PolicyRecord, b: &PolicyRecord) -> bool {
    a.name == b.name
        && a.description == b.description
        && a.locked == b.locked
        && a.combination == b.combination
        && a.params == b.params
        && a.filters == b.filters
        && a.weights == b.weights
        && a.balance == b.balance
}

fn differs(existing: &store::units::UnitRecord, module: &UnitModule) -> bool {
    existing.module_sha256 != module.module_sha256
        || existing.name != module.name
        || existing.description != module.description
}

/// Writes the built-in policy with whichever of its units this binary has,
/// and makes it the default when no policy is.
async fn register_policy(
    store: &Store,
    registry: &Registry,
    by_name: &HashMap<String, Uuid>,
) -> Result<(), StartError> {
    let find = |name: &str| {
        let id = by_name.get(name).copied();
        if id.is_none() {
            tracing::warn!(
                unit = name,
                "built-in policy unit missing from this build; left out"
            );
        }
        id
    };
    let id = builtin_policy_id();
    let record = PolicyRecord {
        id,
        name: BUILTIN_POLICY_NAME.to_owned(),
        description: BUILTIN_POLICY_DESCRIPTION.to_owned(),
        locked: true,
        is_default: false,
        combination: Combination::Rank,
        params: Default::default(),
        filters: BUILTIN_FILTERS
            .iter()
            .filter_map(|n| find(n))
            .map(|unit_id| FilterLink {
                unit_id,
                position: Position::Middle,
                on_failure: OnFailure::FailClosed,
            })
            .collect(),
        weights: BUILTIN_WEIGHTS
            .iter()
            .filter_map(|&(n, factor)| find(n).map(|unit_id| WeightLink { unit_id, factor }))
            .collect(),
        balance: None,
        created_at: String::new(),
        updated_at: String::new(),
    };
    // The composition rules hold for the built-in policy too.
    let lookup = |unit_id: Uuid| registry.get(unit_id);
    crate::api::assemble::assemble(&record, &lookup, &Default::default()).map_err(|e| {
        StartError::Builtin {
            name: BUILTIN_POLICY_NAME.to_owned(),
            message: format!("{e:?}"),
        }
    })?;

    let mut tx = store.write().await?;
    let holder = store::policies::id_by_name(&mut tx, BUILTIN_POLICY_NAME).await?;
    if let Some(other) = holder.filter(|&other| other != id) {
        return Err(StartError::Builtin {
            name: BUILTIN_POLICY_NAME.to_owned(),
            message: format!(
                "a policy ({other}) is already called `{BUILTIN_POLICY_NAME}`; rename it"
            ),
        });
    }
    // Rewritten only when this binary's version differs, so a restart
    // leaves the store exactly as it was.
    let current = store::policies::get(&mut tx, id).await?;
    if current.is_none_or(|c| !same_policy(&c, &record)) {
        store::policies::save(&mut tx, &record).await?;
    }
    if store::policies::default_id(&mut tx).await?.is_none() {
        store::policies::make_default(&mut tx, id).await?;
    }
    tx.commit().await?;
    Ok(())
}
