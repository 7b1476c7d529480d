//! The policy of an offline run (no server): a built-in policy by name or
//! a policy file, assembled from the units built into the binary, of
//! which only the ones the policy names are loaded.
//!
//! A policy file has the shape of the built-in ones (`policies/defaults/*.json`:
//! `id`, `name`, `description`, `default`, `mode`, `filters`, `weights`,
//! `balance`, `properties`), its units named by their declared names; copy
//! one and edit it. Units are only the built-in ones: an uploaded unit
//! lives in a server, so a policy using one runs with `--server`.
//!
//! **Compiled units are cached** per user, because compiling a component
//! takes far longer than a decision (`crate::sandbox::code_cache`, which a
//! server's first start shares). Which declared name each component has
//! (`info()`, known only once loaded) is kept beside them in
//! `names-<engine>.json`, so a run loads only its policy's units.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::builtin::{BuiltinPolicy, BuiltinUnit, UNITS};
use crate::sandbox::code_cache::{self, CodeCache};
use crate::sandbox::{Limits, Runtime};
use crate::server::builtins::builtin_unit_id;
use crate::unit::Unit;
use crate::upload::module_sha256;
use uuid::Uuid;

use super::decide::Local;

/// The built-in policy an offline run uses when none is named:
/// `nova_default`. hail places where the cluster stays most balanced in
/// free memory, free disk and vCPUs per CPU, after refusing nodes short of
/// memory, disk or CPUs at the group's `vcpu-ratio`. Nova's default is the
/// built-in policy with exactly those parts: `RamFilter`, `DiskFilter` and
/// `CoreFilter` (its `cpu_allocation_ratio` 4.0 is Ganeti's default
/// `vcpu-ratio`, and each node's group ratio overrides it), and the RAM,
/// disk and CPU weighers, which prefer the node with the most free, i.e.
/// spread. oVirt's policies check no disk.
pub const DEFAULT_POLICY: &str = "nova_default";

/// The largest policy file read, bytes: a policy is a few kilobytes.
pub const MAX_POLICY_FILE_BYTES: u64 = 1024 * 1024;

/// The cache file of declared unit names by component sha256.
const NAMES_FILE: &str = "names.json";

/// Why the offline policy could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("`{0}` is neither a built-in policy nor a readable file: {1}")]
    NotFound(String, String),
    #[error("the policy file {0} is larger than {MAX_POLICY_FILE_BYTES} bytes")]
    TooLarge(String),
    #[error("{0}")]
    Invalid(String),
    #[error("the policy names the unit `{0}`, which is not built into this binary")]
    UnknownUnit(String),
    #[error("the WebAssembly runtime: {0}")]
    Runtime(String),
    #[error("the built-in unit {0} does not load: {1}")]
    Load(String, String),
}

/// Reads the policy `name_or_file` names: a built-in policy's name, else a
/// file.
pub fn resolve(name_or_file: &str) -> Result<BuiltinPolicy, PolicyError> {
    let builtins = BuiltinPolicy::all().map_err(PolicyError::Invalid)?;
    if let Some(policy) = builtins.into_iter().find(|p| p.name == name_or_file) {
        return Ok(policy);
    }
    let path = Path::new(name_or_file);
    let size = std::fs::metadata(path)
        .map_err(|e| PolicyError::NotFound(name_or_file.to_owned(), e.to_string()))?
        .len();
    if size > MAX_POLICY_FILE_BYTES {
        return Err(PolicyError::TooLarge(name_or_file.to_owned()));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| PolicyError::NotFound(name_or_file.to_owned(), e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| PolicyError::Invalid(format!("{name_or_file}: {e}")))
}

/// The policy assembled for deciding in process, its units cached in the
/// user's cache directory.
pub fn local(policy: &BuiltinPolicy) -> Result<Local, PolicyError> {
    local_in(policy, code_cache::default_dir())
}

/// [`local`] with the cache in `cache` (none: compile every unit).
pub fn local_in(policy: &BuiltinPolicy, cache: Option<PathBuf>) -> Result<Local, PolicyError> {
    let runtime =
        Runtime::new(Limits::default()).map_err(|e| PolicyError::Runtime(e.to_string()))?;
    let mut cache = Cache::open(&runtime, cache);
    let wanted: HashSet<&str> = policy.unit_names().collect();
    let mut by_name: HashMap<String, Uuid> = HashMap::new();
    let mut units: HashMap<Uuid, Arc<dyn Unit>> = HashMap::new();
    // The units the name index places first, then any other until every
    // name is found (a first run, or a build with new units).
    let mut order: Vec<(String, &'static BuiltinUnit)> =
        UNITS.iter().map(|u| (module_sha256(u.wasm), u)).collect();
    order.sort_by_key(|(sha256, _)| {
        let known = cache.names.get(sha256);
        !known.is_some_and(|name| wanted.contains(name.as_str()))
    });
    for (sha256, builtin) in order {
        if wanted.iter().all(|name| by_name.contains_key(*name)) {
            break;
        }
        if let Some(name) = cache.names.get(&sha256)
            && !wanted.contains(name.as_str())
        {
            continue;
        }
        let unit = cache.load(&runtime, builtin)?;
        let name = unit.info().name.clone();
        cache.remember(&sha256, &name);
        if wanted.contains(name.as_str()) {
            let id = builtin_unit_id(builtin.name);
            by_name.insert(name, id);
            units.insert(id, unit);
        }
    }
    cache.save_names();
    if let Some(missing) = wanted.iter().find(|name| !by_name.contains_key(**name)) {
        return Err(PolicyError::UnknownUnit((*missing).to_owned()));
    }
    let record = crate::server::builtins::policy_record(policy, &by_name)
        .map_err(|e| PolicyError::Invalid(e.to_string()))?;
    let lookup = |id: Uuid| units.get(&id).cloned();
    let assembled = crate::api::assemble::assemble(&record, &lookup, &HashSet::new())
        .map_err(|e| PolicyError::Invalid(format!("{}: {e:?}", policy.name)))?;
    Ok(Local {
        policy: assembled,
        params: BTreeMap::new(),
    })
}

/// The offline run's side of the per-user cache of compiled units
/// ([`CodeCache`]): which declared name each cached component has.
struct Cache {
    code: CodeCache,
    /// Declared unit name by component sha256.
    names: BTreeMap<String, String>,
    names_changed: bool,
}

impl Cache {
    fn open(runtime: &Runtime, dir: Option<PathBuf>) -> Cache {
        let code = CodeCache::open(runtime, dir.as_deref());
        let names = code
            .read_file(NAMES_FILE)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Cache {
            code,
            names,
            names_changed: false,
        }
    }

    fn remember(&mut self, sha256: &str, name: &str) {
        if self.names.get(sha256).map(String::as_str) != Some(name) {
            self.names.insert(sha256.to_owned(), name.to_owned());
            self.names_changed = true;
        }
    }

    /// A built-in unit from its cached code, else compiled (and its code
    /// cached).
    fn load(&self, runtime: &Runtime, builtin: &BuiltinUnit) -> Result<Arc<dyn Unit>, PolicyError> {
        let (_, unit, _) = self
            .code
            .code(runtime, builtin.wasm)
            .map_err(|e| PolicyError::Load(builtin.name.to_owned(), e.to_string()))?;
        Ok(unit as Arc<dyn Unit>)
    }

    fn save_names(&self) {
        if self.names_changed
            && let Ok(json) = serde_json::to_vec_pretty(&self.names)
        {
            self.code.write_file(NAMES_FILE, &json);
        }
    }
}
