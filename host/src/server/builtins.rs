//! The built-in units and the built-in policies, registered at every start.
//!
//! Built-in units come embedded in the binary (`crate::builtin::UNITS`).
//! They are stored like uploads (content-addressed module, compiled code)
//! but internal: they cannot be deleted, replaced or disabled, and their ids
//! are derived from their names so they survive restarts and upgrades. The
//! built-in policies (`policies/defaults/*.json`, embedded) are locked and
//! rewritten at every start when they changed, so an upgraded binary brings
//! its units' new versions and its policies along.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Bytes;
use uuid::Uuid;

use super::StartError;
use crate::builtin::{BuiltinPolicy, BuiltinUnit};
use crate::pipeline::OnFailure;
use crate::registry::{Named, Registry};
use crate::sandbox::code_cache::{CodeCache, Origin};
use crate::sandbox::{LoadError, Runtime, sha256};
use crate::store::policies::{FilterLink, PolicyRecord, WeightLink};
use crate::store::units::UnitModule;
use crate::store::{self, Store};
use crate::unit::Unit;
use crate::upload::{Modules, module_sha256};

/// Namespace of the ids of built-in units (a random UUID,
/// fixed forever: changing it would change every built-in id).
const BUILTIN_NAMESPACE: Uuid = Uuid::from_u128(0x5a2c_1f3e_9b7d_4c60_8e21_d4f0_6a8b_3c17);

/// Who "uploaded" a built-in unit, as shown in `uploaded_by`.
const BUILTIN_UPLOADER: &str = "builtin";

/// The name of oVirt's default policy, `none` (no load balancing), which is
/// ours too (`policies/defaults/none.json`).
pub const BUILTIN_POLICY_NAME: &str = "none";

/// The stable id of the built-in unit called `name`.
pub fn builtin_unit_id(name: &str) -> Uuid {
    Uuid::new_v5(&BUILTIN_NAMESPACE, format!("unit/{name}").as_bytes())
}

/// Registers every built-in unit (storing, compiling and loading it) and
/// then every built-in policy.
///
/// A first start takes each unit's compiled code from the binary (release
/// builds embed it), else from the user's cache in `cache_dir` (what an
/// earlier start of the same build compiled, on any database), or else
/// compiles it, which is then most of its time (`compile_missing`); all of them are written in one transaction, so the
/// store is never left with half of this binary's units and pays one
/// commit, not one per unit. A restart finds their compiled code stored.
pub async fn register(
    store: &Store,
    modules: &Modules,
    registry: &Registry,
    cache_dir: Option<PathBuf>,
) -> Result<(), StartError> {
    let builtins = crate::builtin::UNITS;
    let engine_hash = modules.engine_hash();
    let digests: Vec<String> = builtins.iter().map(|b| module_sha256(b.wasm)).collect();
    let mut stored = Vec::with_capacity(builtins.len());
    {
        let mut conn = store.read().await?;
        for sha256 in &digests {
            stored.push(conn.artifact(sha256, &engine_hash).await?);
        }
    }
    let artifacts = compile_missing(modules, stored, cache_dir).await?;

    let mut loaded = Vec::with_capacity(builtins.len());
    for (i, builtin) in builtins.iter().enumerate() {
        // A `Bytes` clone shares the buffer: the artifact is not copied.
        let unit = modules
            .load(&digests[i], artifacts[i].code.clone())
            .await
            .map_err(|e| builtin_error(builtin, e.to_string()))?;
        loaded.push(unit);
    }

    let mut by_name: HashMap<String, Uuid> = HashMap::new();
    let mut named_units = Vec::with_capacity(builtins.len());
    let mut tx = store.write().await?;
    for (i, (builtin, unit)) in builtins.iter().zip(loaded).enumerate() {
        let sha256 = &digests[i];
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
        let holder = tx.unit_by_name(&module.name).await?;
        if let Some(other) = holder.filter(|other| other.id != id) {
            return Err(builtin_error(
                builtin,
                format!(
                    "an uploaded unit ({}) is already called `{}`; rename or delete it",
                    other.id, module.name
                ),
            ));
        }
        let language = crate::sandbox::language::source_language(builtin.wasm);
        tx.insert_module(sha256, builtin.wasm.len() as u64, language, builtin.wasm)
            .await?;
        if artifacts[i].fresh {
            tx.insert_artifact(sha256, &engine_hash, &artifacts[i].code)
                .await?;
        }
        match tx.unit(id).await? {
            None => tx.insert_unit(id, true, &module).await?,
            Some(existing) if differs(&existing, &module) => {
                let keep = crate::store::units::DEFAULT_UNIT_VERSIONS_RETAINED;
                tx.replace_unit_module(id, &module, None, keep).await?;
            }
            Some(_) => {}
        }
        by_name.insert(module.name.clone(), id);
        let named: Arc<dyn Unit> = Arc::new(Named::new(unit, &module.name, &module.description));
        named_units.push((id, named));
    }
    tx.commit().await?;
    for (id, named) in named_units {
        registry.insert(id, named);
    }

    let policies = BuiltinPolicy::all().map_err(|message| StartError::Builtin {
        name: "policies/defaults".to_owned(),
        message,
    })?;
    for policy in &policies {
        register_policy(store, registry, &by_name, policy).await?;
    }
    Ok(())
}

fn builtin_error(builtin: &BuiltinUnit, message: String) -> StartError {
    StartError::Builtin {
        name: builtin.name.to_owned(),
        message,
    }
}

/// A built-in unit's compiled code, and whether this start produced it
/// (then it is not stored yet).
struct Artifact {
    code: Bytes,
    fresh: bool,
}

/// Where the code of a built-in unit this start did not find stored came
/// from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CodeSource {
    /// Compiled by this binary's own build (`BuiltinUnit::compiled`).
    Embedded,
    /// Compiled by an earlier process of the same build, read from the
    /// user's cache ([`CodeCache`]).
    Cached,
    /// Compiled now.
    Compiled,
}

/// The compiled code of every built-in unit, in `UNITS` order: the stored
/// one where `stored` has it, else the code a release build embedded, else
/// the user's cache's in `cache_dir`, else compiled now (and cached),
/// logging progress. One at a time: wasmtime already compiles each
/// component's functions on every core. Our own embedded units are
/// trusted: they are compiled in process, not in the upload's sandboxed
/// child.
async fn compile_missing(
    modules: &Modules,
    stored: Vec<Option<Vec<u8>>>,
    cache_dir: Option<PathBuf>,
) -> Result<Vec<Artifact>, StartError> {
    let builtins = crate::builtin::UNITS;
    let total = stored.iter().filter(|s| s.is_none()).count();
    let runtime = Arc::clone(modules.runtime());
    let started = std::time::Instant::now();
    let loaded = tokio::task::spawn_blocking(move || {
        let mut missing = Missing::new(total, cache_dir);
        let mut artifacts = Vec::with_capacity(builtins.len());
        for (builtin, stored) in builtins.iter().zip(stored) {
            let artifact = match stored {
                Some(code) => Artifact {
                    code: code.into(),
                    fresh: false,
                },
                None => Artifact {
                    code: missing
                        .code_of(&runtime, builtin.wasm, builtin.compiled)
                        .map_err(|e| builtin_error(builtin, e.to_string()))?,
                    fresh: true,
                },
            };
            artifacts.push(artifact);
        }
        Ok::<_, StartError>((artifacts, missing))
    })
    .await
    .map_err(|e| StartError::Builtin {
        name: "(compiling)".to_owned(),
        message: e.to_string(),
    })??;
    let (artifacts, missing) = loaded;
    if total > 0 {
        tracing::info!(
            embedded = missing.embedded,
            cached = missing.cached,
            compiled = missing.compiled,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "built-in units loaded"
        );
    }
    Ok(artifacts)
}

/// The built-in units a start found no stored code for, as it gets theirs.
struct Missing {
    total: usize,
    embedded: usize,
    cached: usize,
    compiled: usize,
    /// False once wasmtime refused embedded code: the rest was compiled by
    /// the same build for the same CPU, so it would be refused too.
    try_embedded: bool,
    cache_dir: Option<PathBuf>,
    /// The user's cache, opened (its directory made) only when a unit has
    /// no embedded code: a release build's start never touches it.
    cache: Option<CodeCache>,
}

impl Missing {
    fn new(total: usize, cache_dir: Option<PathBuf>) -> Self {
        Missing {
            total,
            embedded: 0,
            cached: 0,
            compiled: 0,
            try_embedded: true,
            cache_dir,
            cache: None,
        }
    }

    /// Compiled code for `wasm`: `embedded` (our build's compiled code for
    /// it) when wasmtime accepts it here, else the user's cache's, else
    /// compiled now. Either way the unit is loaded into the runtime's
    /// cache.
    fn code_of(
        &mut self,
        runtime: &Runtime,
        wasm: &[u8],
        embedded: Option<&'static [u8]>,
    ) -> Result<Bytes, LoadError> {
        let (code, source) = self.code_and_source(runtime, wasm, embedded)?;
        match source {
            CodeSource::Embedded => self.embedded += 1,
            CodeSource::Cached => self.cached += 1,
            CodeSource::Compiled => {
                if self.compiled == 0 {
                    tracing::info!(
                        units = self.total - self.embedded - self.cached,
                        "compiling the built-in units (once: their compiled code is stored)"
                    );
                }
                self.compiled += 1;
                // A line per quarter, so a slow first start shows it moves.
                let of = self.total - self.embedded - self.cached;
                if self.compiled * 4 / of != (self.compiled - 1) * 4 / of {
                    tracing::info!(done = self.compiled, of, "built-in units compiled");
                }
            }
        }
        Ok(code)
    }

    fn code_and_source(
        &mut self,
        runtime: &Runtime,
        wasm: &[u8],
        embedded: Option<&'static [u8]>,
    ) -> Result<(Bytes, CodeSource), LoadError> {
        if let Some(code) = embedded.filter(|_| self.try_embedded) {
            // SAFETY: `code` is `sandpiper-precompile`'s output for `wasm`,
            // made by this binary's own build and embedded in it
            // (`BuiltinUnit::compiled`); never bytes from outside.
            match unsafe { runtime.load_precompiled(sha256(wasm), code) } {
                Ok(_) => return Ok((Bytes::from_static(code), CodeSource::Embedded)),
                Err(error) => {
                    tracing::warn!(
                        %error,
                        "the built-in units' embedded compiled code was refused \
                         (built for another CPU?); compiling them instead"
                    );
                    self.try_embedded = false;
                }
            }
        }
        let dir = self.cache_dir.as_deref();
        let cache = self
            .cache
            .get_or_insert_with(|| CodeCache::open(runtime, dir));
        let (code, _, origin) = cache.code(runtime, wasm)?;
        let source = match origin {
            Origin::Cached => CodeSource::Cached,
            Origin::Compiled => CodeSource::Compiled,
        };
        Ok((code.into(), source))
    }
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

/// The stored form of a built-in policy. Every unit it names must be in
/// this binary: a policy that silently lost a filter would place VMs where
/// its users do not expect them.
pub(crate) fn policy_record(
    policy: &BuiltinPolicy,
    by_name: &HashMap<String, Uuid>,
) -> Result<PolicyRecord, StartError> {
    let find = |name: &str| {
        by_name
            .get(name)
            .copied()
            .ok_or_else(|| StartError::Builtin {
                name: policy.name.clone(),
                message: format!("names the unit `{name}`, which this build does not have"),
            })
    };
    let mut filters = Vec::with_capacity(policy.filters.len());
    for filter in &policy.filters {
        filters.push(FilterLink {
            unit_id: find(&filter.unit)?,
            position: filter.position,
            on_failure: OnFailure::FailClosed,
            run_once: filter.run_once,
        });
    }
    let mut weights = Vec::with_capacity(policy.weights.len());
    for weight in &policy.weights {
        weights.push(WeightLink {
            unit_id: find(&weight.unit)?,
            factor: weight.factor,
            on_failure: weight.on_failure,
        });
    }
    Ok(PolicyRecord {
        id: policy.id,
        name: policy.name.clone(),
        description: policy.description.clone(),
        locked: true,
        is_default: false,
        combination: policy.mode,
        params: policy.properties.clone(),
        filters,
        weights,
        balance: policy.balance.as_deref().map(find).transpose()?,
        created_at: String::new(),
        updated_at: String::new(),
    })
}

/// Writes one built-in policy (locked) when this binary's version of it
/// differs from the stored one, and makes it the default when it is the
/// designated default and no policy is.
async fn register_policy(
    store: &Store,
    registry: &Registry,
    by_name: &HashMap<String, Uuid>,
    policy: &BuiltinPolicy,
) -> Result<(), StartError> {
    let fail = |message: String| StartError::Builtin {
        name: policy.name.clone(),
        message,
    };
    let record = policy_record(policy, by_name)?;
    // The composition rules hold for built-in policies too.
    let lookup = |unit_id: Uuid| registry.get(unit_id);
    crate::api::assemble::assemble(&record, &lookup, &Default::default())
        .map_err(|e| fail(format!("{e:?}")))?;

    let mut tx = store.write().await?;
    let holder = tx.policy_id_by_name(&record.name).await?;
    if let Some(other) = holder.filter(|&other| other != record.id) {
        return Err(fail(format!(
            "a policy ({other}) is already called `{}`; rename it",
            record.name
        )));
    }
    // Rewritten only when this binary's version differs, so a restart
    // leaves the store exactly as it was.
    let current = tx.policy(record.id).await?;
    if current.is_none_or(|c| !same_policy(&c, &record)) {
        tx.save_policy(&record).await?;
    }
    if policy.default && tx.default_policy_id().await?.is_none() {
        tx.make_default_policy(record.id).await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sandbox::Limits;

    /// A built-in unit's component, to compile.
    fn component() -> &'static [u8] {
        crate::builtin::UNITS[0].wasm
    }

    /// `wasm` compiled as the build step does (`sandpiper-precompile`), in
    /// a `'static` buffer as embedded code is.
    fn compiled_by_build_step(config: &wasmtime::Config, wasm: &[u8]) -> &'static [u8] {
        let engine = wasmtime::Engine::new(config).unwrap();
        engine.precompile_component(wasm).unwrap().leak()
    }

    /// What keeps the build step honest: code compiled with
    /// `sandpiper_compile::config()` alone is accepted by the server's
    /// engine, which adds its memory layout to those settings. If the two
    /// drifted apart, a release build's embedded code would be refused and
    /// every first start would compile again.
    #[test]
    fn embedded_code_from_the_build_step_is_loaded_not_compiled() {
        let runtime = Runtime::new(Limits::default()).unwrap();
        let embedded = compiled_by_build_step(&sandpiper_compile::config(), component());
        let mut missing = Missing::new(1, None);
        let (code, source) = missing
            .code_and_source(&runtime, component(), Some(embedded))
            .unwrap();
        assert_eq!(source, CodeSource::Embedded);
        assert_eq!(&code[..], embedded, "the embedded code is what gets stored");
        assert!(runtime.compatibility_hash().len() == 64);
    }

    #[test]
    fn refused_embedded_code_is_compiled_instead_and_not_tried_again() {
        let runtime = Runtime::new(Limits::default()).unwrap();
        // Code for another engine configuration (no fuel): wasmtime refuses
        // it, as it would code built for another CPU.
        let mut other = sandpiper_compile::config();
        other.consume_fuel(false);
        let foreign = compiled_by_build_step(&other, component());
        let mut missing = Missing::new(2, None);
        let (code, source) = missing
            .code_and_source(&runtime, component(), Some(foreign))
            .unwrap();
        assert_eq!(source, CodeSource::Compiled);
        assert_ne!(&code[..], foreign);
        assert!(!missing.try_embedded);

        // Good code for the next unit is not tried: the build that made the
        // refused code made it too.
        let second = crate::builtin::UNITS[1].wasm;
        let good = compiled_by_build_step(&sandpiper_compile::config(), second);
        let (_, source) = missing
            .code_and_source(&runtime, second, Some(good))
            .unwrap();
        assert_eq!(source, CodeSource::Compiled);
    }

    #[test]
    fn without_embedded_code_a_unit_an_earlier_start_compiled_is_read_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let first = Runtime::new(Limits::default()).unwrap();
        let mut missing = Missing::new(1, Some(dir.path().to_owned()));
        let compiled = missing.code_of(&first, component(), None).unwrap();
        assert_eq!((missing.cached, missing.compiled), (0, 1));

        // Another start (a new runtime), on another database.
        let second = Runtime::new(Limits::default()).unwrap();
        let mut missing = Missing::new(1, Some(dir.path().to_owned()));
        let code = missing.code_of(&second, component(), None).unwrap();
        assert_eq!((missing.cached, missing.compiled), (1, 0));
        assert_eq!(code, compiled);
    }

    #[test]
    fn without_embedded_code_units_are_compiled() {
        let runtime = Runtime::new(Limits::default()).unwrap();
        let mut missing = Missing::new(1, None);
        let code = missing.code_of(&runtime, component(), None).unwrap();
        assert_eq!((missing.embedded, missing.compiled), (0, 1));
        // SAFETY: `code` is `Runtime::precompile`'s output, just made.
        unsafe { runtime.load_precompiled(sha256(component()), &code) }.unwrap();
    }
}
