//! The `Runtime`: one per process. It compiles each distinct component once
//! (keyed by the sha256 of its bytes), validates it, and hands out units.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sandpiper_model::Inventory;
use sandpiper_model::UnitInfo;
use wasmtime::component::{Component, HasSelf, Linker};

use super::bindings::{Guests, PolicyVersion, columns, v0_1, v0_2, v0_3};
use super::call_state::{CallState, InventoryImport};
use super::engine::{self, EpochTicker};
use super::limits::{Limits, LimitsError};
use super::module_limits::ModuleLimit;
use super::validate::{self, BALANCE_EXPORT, FILTER_EXPORT, METADATA_EXPORT, SCORE_EXPORT};
use super::wasi;
use super::wasm_unit::{Compiled, Session, Shared, WasmUnit, blocking};
use crate::pipeline::SpecError;
use crate::unit::UnitError;

/// Why a component was not accepted as a unit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    #[error(
        "the component is {bytes} bytes, more than the limit of {} bytes",
        validate::MAX_COMPONENT_BYTES
    )]
    TooLarge { bytes: usize },
    #[error(
        "this is a precompiled wasmtime artifact, which is never accepted as an upload; \
         upload the .wasm component it was compiled from"
    )]
    Precompiled,
    #[error(
        "this is a core WebAssembly module, not a component: build the unit for the \
         `wasm32-wasip2` target, or wrap the module with `wasm-tools component new`"
    )]
    CoreModule,
    #[error("this is not WebAssembly (it does not start with the `\\0asm` header)")]
    NotWasm,
    #[error("the component is not valid: {0}")]
    Invalid(String),
    /// A core module inside passes one of the validator's size or count
    /// limits (checked before validating, see `module_limits`).
    #[error("{}", limit.explain(*found, *function))]
    CompilerLimit {
        limit: ModuleLimit,
        found: u64,
        /// The function's index, for the per-function limits.
        function: Option<u32>,
    },
    #[error(
        "the component imports `{import}`, which units may not use: units may import only \
         `sandpiper:policy/inventory` (0.1.x, 0.2.x or 0.3.x) and the WASI 0.2 interfaces io, \
         clocks, random, cli (environment, exit, std streams, terminals) and filesystem \
         (types, preopens)"
    )]
    ForbiddenImport { import: String },
    /// The component uses two versions of `sandpiper:policy` (say, imports
    /// 0.1.0's inventory and exports 0.2.0's metadata): a unit is built
    /// against one version, and its calls go through that version alone.
    #[error(
        "the component uses both `{first}` and `{second}`: a unit must be built against one \
         version of sandpiper:policy (0.1.x, 0.2.x or 0.3.x), not a mix"
    )]
    MixedVersions { first: String, second: String },
    #[error("the component does not export `{METADATA_EXPORT}` (0.1.x, 0.2.x or 0.3.x), which every unit must (it exports: {})", exports.join(", "))]
    MissingMetadata { exports: Vec<String> },
    #[error(
        "the component exports none of `{FILTER_EXPORT}`, `{SCORE_EXPORT}` or \
         `{BALANCE_EXPORT}`, so it has nothing to do (it exports: {})", exports.join(", ")
    )]
    NoRole { exports: Vec<String> },
    #[error(
        "the export `{interface}` does not have the type its version of sandpiper:policy gives \
         it: {detail}"
    )]
    WrongExportType { interface: String, detail: String },
    #[error("the component's imports cannot be satisfied: {0}")]
    Link(String),
    #[error("calling the unit's `info()` failed: {0}")]
    Info(UnitError),
    #[error("the unit's info is not usable: {0}")]
    InvalidInfo(String),
    /// The unit's parameter declarations are unusable: the same check and
    /// error a policy's parameter table gives.
    #[error("the unit's parameters are not usable: {0}")]
    Params(#[from] SpecError),
    #[error(
        "the precompiled artifact was refused ({0}); compile the original component again \
         (artifacts are tied to the wasmtime version and engine settings)"
    )]
    Artifact(String),
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("invalid default limits: {0}")]
    Limits(#[from] LimitsError),
    #[error("could not configure wasmtime: {0}")]
    Engine(String),
    #[error("could not start the epoch ticker thread: {0}")]
    Ticker(#[from] std::io::Error),
}

/// The sha256 of `bytes`: a unit's identity.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// Compiles, validates and caches units. Create one per process and share
/// it; every method takes `&self` and may be called from any thread.
pub struct Runtime {
    shared: Arc<Shared>,
    linker: Linker<CallState>,
    limits: Limits,
    cache: Mutex<HashMap<[u8; 32], Arc<WasmUnit>>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime whose units run under `limits` unless given their own.
    pub fn new(limits: Limits) -> Result<Runtime, RuntimeError> {
        limits.validate()?;
        let engine = engine::build().map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
        let mut linker = Linker::new(&engine);
        // Every version's inventory, side by side: their instance names
        // differ by version, so a unit links to the one it was built for.
        let linked = wasi::add_to_linker(&mut linker)
            .and_then(|()| {
                v0_1::FullUnit::add_to_linker::<CallState, HasSelf<InventoryImport>>(
                    &mut linker,
                    CallState::inventory,
                )
            })
            .and_then(|()| {
                v0_2::FullUnit::add_to_linker::<CallState, HasSelf<InventoryImport>>(
                    &mut linker,
                    CallState::inventory,
                )
            })
            .and_then(|()| {
                v0_3::FullUnit::add_to_linker::<CallState, HasSelf<InventoryImport>>(
                    &mut linker,
                    CallState::inventory,
                )
            })
            .and_then(|()| columns::add_to_linker(&mut linker));
        linked.map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
        let ticker = EpochTicker::start(engine.clone())?;
        Ok(Runtime {
            shared: Arc::new(Shared { engine, ticker }),
            linker,
            limits,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Identifies the wasmtime version and engine settings compiled
    /// artifacts depend on (hex sha256 of wasmtime's own compatibility
    /// hash): store artifacts under it and recompile when it changes.
    pub fn compatibility_hash(&self) -> String {
        use std::hash::Hash;
        let mut hasher = DigestHasher(sha2::Sha256::default());
        self.shared
            .engine
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        super::hex(&sha2::Digest::finalize(hasher.0))
    }

    /// The limits units get unless given their own.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Compiles and validates a component, or returns the unit already
    /// loaded from the same bytes.
    ///
    /// Two threads loading the same new bytes at once may both compile them;
    /// both get the one unit that was cached first.
    pub fn load(&self, bytes: &[u8]) -> Result<Arc<WasmUnit>, LoadError> {
        let sha256 = sha256(bytes);
        if let Some(unit) = self.cached(&sha256) {
            return Ok(unit);
        }
        let component = self.compile(bytes)?;
        self.accept(sha256, &component)
    }

    /// Compiles and validates a component and returns the compiled artifact,
    /// for [`Runtime::load_precompiled`] to load later without compiling.
    /// The unit is cached too, as by [`Runtime::load`].
    pub fn precompile(&self, bytes: &[u8]) -> Result<Vec<u8>, LoadError> {
        let component = self.compile(bytes)?;
        self.accept(sha256(bytes), &component)?;
        component
            .serialize()
            .map_err(|e| LoadError::Artifact(format!("{e:#}")))
    }

    /// Loads a unit from an artifact [`Runtime::precompile`] produced, keyed
    /// by the sha256 of the component it was compiled from; returns the
    /// cached unit if that component is already loaded.
    ///
    /// # Safety
    ///
    /// `artifact` must be the unmodified output of `precompile` (on this or
    /// another process of the same build). Wasmtime validates artifacts only
    /// lightly: arbitrary bytes could make it run arbitrary native code.
    /// Artifacts from another wasmtime version or engine configuration are
    /// refused safely with [`LoadError::Artifact`]. Never pass uploaded
    /// bytes here; the server stores artifacts it compiled itself, where
    /// users cannot write, and keeps the original component to recompile.
    pub unsafe fn load_precompiled(
        &self,
        sha256: [u8; 32],
        artifact: &[u8],
    ) -> Result<Arc<WasmUnit>, LoadError> {
        if let Some(unit) = self.cached(&sha256) {
            return Ok(unit);
        }
        // SAFETY: the caller guarantees `artifact` came from `precompile`.
        let component = unsafe { Component::deserialize(&self.shared.engine, artifact) }
            .map_err(|e| LoadError::Artifact(format!("{e:#}")))?;
        self.accept(sha256, &component)
    }

    /// Forgets the cached unit compiled from the component with `sha256`
    /// (units already handed out keep working).
    pub fn unload(&self, sha256: &[u8; 32]) {
        self.lock_cache().remove(sha256);
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Arc<WasmUnit>>> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn cached(&self, sha256: &[u8; 32]) -> Option<Arc<WasmUnit>> {
        self.lock_cache().get(sha256).cloned()
    }

    fn compile(&self, bytes: &[u8]) -> Result<Component, LoadError> {
        validate::check_bytes(bytes)?;
        Component::new(&self.shared.engine, bytes).map_err(|e| LoadError::Invalid(format!("{e:#}")))
    }

    /// Validates a compiled component and caches the unit.
    fn accept(&self, sha256: [u8; 32], component: &Component) -> Result<Arc<WasmUnit>, LoadError> {
        // Preparing runs the unit's `info()`, which blocks like any call.
        let compiled = blocking(|| self.prepare(sha256, component))?;
        let unit = Arc::new(WasmUnit::new(Arc::new(compiled), self.limits));
        Ok(Arc::clone(self.lock_cache().entry(sha256).or_insert(unit)))
    }

    /// Checks imports and exports, then instantiates the unit once (under
    /// the default limits, over an empty snapshot) to type-check its exports
    /// and read its info. The version of `sandpiper:policy` the unit uses
    /// decides which bindings every later call goes through.
    fn prepare(&self, sha256: [u8; 32], component: &Component) -> Result<Compiled, LoadError> {
        let engine = &self.shared.engine;
        validate::check_imports(engine, component)?;
        let version = validate::policy_version(engine, component)?;
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| LoadError::Link(format!("{e:#}")))?;
        let guests: Option<Box<dyn Guests>> = match version {
            Some(PolicyVersion::V0_1) => {
                v0_1::Guests::find(&pre).map(|g| Box::new(g) as Box<dyn Guests>)
            }
            Some(PolicyVersion::V0_2) => {
                v0_2::Guests::find(&pre).map(|g| Box::new(g) as Box<dyn Guests>)
            }
            Some(PolicyVersion::V0_3) => {
                v0_3::Guests::find(&pre).map(|g| Box::new(g) as Box<dyn Guests>)
            }
            None => None,
        };
        let Some(guests) = guests else {
            return Err(LoadError::MissingMetadata {
                exports: validate::export_names(engine, component),
            });
        };
        if guests.exports() == Default::default() {
            return Err(LoadError::NoRole {
                exports: validate::export_names(engine, component),
            });
        }

        let empty = Arc::new(Inventory::new(0, 0));
        let mut session = Session::open(&self.shared, &pre, &self.limits, &empty)
            .map_err(|f| LoadError::Info(f.error))?;
        let instance = session.instance;
        let store = &mut session.store;
        guests
            .check_types(store, &instance)
            .map_err(|(interface, e)| LoadError::WrongExportType {
                interface,
                detail: format!("{e:#}"),
            })?;
        let info: UnitInfo = match guests.info(store, &instance) {
            Ok(info) => info,
            Err(error) => return Err(LoadError::Info(session.fail(&error).error)),
        };
        validate::check_info(&info)?;
        Ok(Compiled {
            shared: Arc::clone(&self.shared),
            sha256,
            pre,
            guests,
            info,
        })
    }
}

/// Feeds `Hash` output into a sha256 digest: unlike `DefaultHasher`, the
/// result is specified, so it can be stored and compared across processes.
struct DigestHasher(sha2::Sha256);

impl std::hash::Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        sha2::Digest::update(&mut self.0, bytes);
    }

    fn finish(&self) -> u64 {
        // Only `write` is used; the digest is read from the field.
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `filter`'s signature in `wit/policy.wit`.
    const FILTER: &str =
        "filter: func(request: request, candidates: list<u32>) -> list<rejection>;";

    /// A component built against `wit/policy.wit` with `filter`'s
    /// signature replaced by `signature`, its functions empty (they trap):
    /// loading type-checks the exports before calling anything.
    fn unit_with_filter(signature: &str) -> Vec<u8> {
        let wit = include_str!("../../../wit/policy.wit");
        assert_eq!(wit.matches(FILTER).count(), 1, "filter's signature moved");
        let mut resolve = wit_parser::Resolve::default();
        let package = resolve
            .push_str("policy.wit", &wit.replace(FILTER, signature))
            .expect("the changed WIT parses");
        let world = resolve
            .select_world(&[package], Some("filter-unit"))
            .expect("the world");
        let mut module =
            wit_component::dummy_module(&resolve, world, wit_parser::ManglingAndAbi::Standard32);
        wit_component::embed_component_metadata(
            &mut module,
            &resolve,
            world,
            wit_component::StringEncoding::UTF8,
        )
        .expect("metadata embeds");
        wit_component::ComponentEncoder::default()
            .module(&module)
            .expect("the module")
            .validate(true)
            .encode()
            .expect("the component encodes")
    }

    #[test]
    fn a_role_exported_with_another_signature_is_refused_at_load() {
        let runtime = Runtime::new(Limits::default()).expect("the runtime starts");
        let other = unit_with_filter("filter: func(candidates: list<u32>) -> list<rejection>;");
        match runtime.load(&other) {
            Err(LoadError::WrongExportType { interface, .. }) => {
                assert_eq!(interface, "sandpiper:policy/filter@0.3.0");
            }
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(_) => panic!("a filter of another signature was accepted"),
        }
        // The same component with the real signature gets past the type
        // check, to the unit's empty `info()`, which traps.
        let same = unit_with_filter(FILTER);
        assert!(
            matches!(runtime.load(&same), Err(LoadError::Info(_))),
            "the unchanged signature did not pass the type check"
        );
    }
}
