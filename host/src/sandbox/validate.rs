//! Checks a unit must pass before it is accepted: it is a component (not a
//! core module, not a precompiled artifact), it imports only what the
//! sandbox provides, it uses one version of `sandpiper:policy` (0.1.x,
//! 0.2.x or 0.3.x, not a mix), it exports `metadata` and at least one role, and what
//! its `info()` says is usable.

use sandpiper_model::{AppliesTo, UnitInfo};
use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use super::LoadError;
use super::bindings::PolicyVersion;

/// Largest component accepted, in bytes. componentize-py's units are about
/// 18 MiB and componentize-js's about 12 MiB; Rust units are tens of KiB.
pub const MAX_COMPONENT_BYTES: usize = 64 << 20;

/// Largest `info()` answer accepted, in bytes of text: a name, a description
/// and a parameter table, each a few lines at most.
pub const MAX_INFO_BYTES: usize = 64 << 10;

/// The WIT package and version range units are built against.
pub const POLICY_PACKAGE: &str = "sandpiper:policy";
/// Versions of WASI accepted: 0.2.x, which wasmtime-wasi implements by
/// semver compatibility (Rust std uses 0.2.6, componentize-py 0.2.9, ...).
const WASI_VERSION_PREFIX: &str = "0.2.";

/// The interfaces a unit may import, as `(package, interface)`; an entry
/// ending in `*` matches by prefix. Everything else (sockets, HTTP, any
/// unknown interface) is refused at load, naming the import.
pub const ALLOWED_IMPORTS: &[(&str, &str)] = &[
    (POLICY_PACKAGE, "inventory"),
    (POLICY_PACKAGE, "types"),
    ("wasi:io", "*"),
    ("wasi:clocks", "wall-clock"),
    ("wasi:clocks", "monotonic-clock"),
    ("wasi:random", "*"),
    ("wasi:cli", "environment"),
    ("wasi:cli", "exit"),
    ("wasi:cli", "stdin"),
    ("wasi:cli", "stdout"),
    ("wasi:cli", "stderr"),
    ("wasi:cli", "terminal-*"),
    ("wasi:filesystem", "types"),
    ("wasi:filesystem", "preopens"),
];

/// Export names of the four interfaces, for errors: each version's bindings
/// look them up with their own `@version` (wasmtime matches
/// semver-compatible `0.1.x`, `0.2.x` and `0.3.x` exports to them).
pub const METADATA_EXPORT: &str = "sandpiper:policy/metadata";
pub const FILTER_EXPORT: &str = "sandpiper:policy/filter";
pub const SCORE_EXPORT: &str = "sandpiper:policy/score";
pub const BALANCE_EXPORT: &str = "sandpiper:policy/balance";

/// Refuses bytes that are not a component, or whose core modules pass one
/// of the validator's limits, before anything compiles them.
pub(crate) fn check_bytes(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() > MAX_COMPONENT_BYTES {
        return Err(LoadError::TooLarge { bytes: bytes.len() });
    }
    if Engine::detect_precompiled(bytes).is_some() {
        return Err(LoadError::Precompiled);
    }
    if wasmparser::Parser::is_component(bytes) {
        super::module_limits::check_module_limits(bytes)
    } else if wasmparser::Parser::is_core_wasm(bytes) {
        Err(LoadError::CoreModule)
    } else {
        Err(LoadError::NotWasm)
    }
}

/// Splits `ns:pkg/iface@version` into its parts.
fn parse_interface_name(name: &str) -> Option<(&str, &str, &str)> {
    let (path, version) = name.split_once('@')?;
    let (package, interface) = path.split_once('/')?;
    Some((package, interface, version))
}

/// Whether an import named `name` is one the sandbox provides.
fn import_allowed(name: &str) -> bool {
    let Some((package, interface, version)) = parse_interface_name(name) else {
        return false;
    };
    let version_ok = if package == POLICY_PACKAGE {
        PolicyVersion::of(version).is_some()
    } else {
        version.starts_with(WASI_VERSION_PREFIX)
    };
    version_ok
        && ALLOWED_IMPORTS.iter().any(|&(p, i)| {
            p == package
                && match i.strip_suffix('*') {
                    Some(prefix) => interface.starts_with(prefix),
                    None => interface == i,
                }
        })
}

/// Refuses a component importing anything outside [`ALLOWED_IMPORTS`].
pub(crate) fn check_imports(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
    for (name, item) in ty.imports(engine) {
        let is_interface = matches!(item.ty, ComponentItem::ComponentInstance(_));
        if !is_interface || !import_allowed(name) {
            return Err(LoadError::ForbiddenImport {
                import: name.to_owned(),
            });
        }
    }
    Ok(())
}

/// The one version of `sandpiper:policy` a component's imports and exports
/// use; `None` when it names the package nowhere (it then lacks
/// `metadata`). Two versions are refused: a unit's calls go through one
/// version's bindings, and a component importing 0.1.0's inventory but
/// exporting 0.2.0's filter was built from a broken mix of bindings.
pub(crate) fn policy_version(
    engine: &Engine,
    component: &Component,
) -> Result<Option<PolicyVersion>, LoadError> {
    let ty = component.component_type();
    let names = ty
        .imports(engine)
        .map(|(name, _)| name)
        .chain(ty.exports(engine).map(|(name, _)| name));
    let mut found: Option<(PolicyVersion, &str)> = None;
    for name in names {
        let Some((package, _, version)) = parse_interface_name(name) else {
            continue;
        };
        if package != POLICY_PACKAGE {
            continue;
        }
        // An export of an unserved version is no export at all (the unit
        // then lacks `metadata`); imports were checked already.
        let Some(version) = PolicyVersion::of(version) else {
            continue;
        };
        match found {
            None => found = Some((version, name)),
            Some((first, first_name)) if first != version => {
                return Err(LoadError::MixedVersions {
                    first: first_name.to_owned(),
                    second: name.to_owned(),
                });
            }
            Some(_) => {}
        }
    }
    Ok(found.map(|(version, _)| version))
}

/// The names a component exports, for error messages.
pub(crate) fn export_names(engine: &Engine, component: &Component) -> Vec<String> {
    component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// Checks what a unit says about itself: bounded size, a name, and
/// parameter declarations a policy can use (the pipeline's own check,
/// [`crate::pipeline::check_specs`]).
pub(crate) fn check_info(info: &UnitInfo) -> Result<(), LoadError> {
    let text_bytes = info.name.len()
        + info.description.len()
        + info
            .params
            .iter()
            .map(|p| p.name.len() + p.description.len() + p.default_value.len() + p.pattern.len())
            .sum::<usize>();
    if text_bytes > MAX_INFO_BYTES {
        return Err(LoadError::InvalidInfo(format!(
            "info() is {text_bytes} bytes of text, more than {MAX_INFO_BYTES}"
        )));
    }
    if info.name.trim().is_empty() {
        return Err(LoadError::InvalidInfo(
            "info() gives an empty name".to_owned(),
        ));
    }
    if info.applies_to == AppliesTo::RequestsWith(Vec::new()) {
        return Err(LoadError::InvalidInfo(
            "info() says the unit applies to requests with one of no properties, so to none; \
             a unit that always runs says `every-request`"
                .to_owned(),
        ));
    }
    crate::pipeline::check_specs(&info.name, &info.params)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::SpecError;
    use sandpiper_model::ParamSpec;

    #[test]
    fn allowlist_takes_compatible_versions_only() {
        for allowed in [
            "sandpiper:policy/inventory@0.1.0",
            "sandpiper:policy/types@0.1.3",
            "sandpiper:policy/inventory@0.2.0",
            "sandpiper:policy/types@0.2.1",
            "sandpiper:policy/inventory@0.3.0",
            "wasi:io/streams@0.2.6",
            "wasi:io/error@0.2.9",
            "wasi:clocks/wall-clock@0.2.12",
            "wasi:random/insecure-seed@0.2.0",
            "wasi:cli/terminal-stdout@0.2.6",
            "wasi:filesystem/preopens@0.2.6",
        ] {
            assert!(import_allowed(allowed), "{allowed} should be allowed");
        }
        for refused in [
            "wasi:sockets/tcp@0.2.6",
            "wasi:http/outgoing-handler@0.2.10",
            "wasi:cli/run@0.2.6",
            "wasi:io/streams@0.3.0",
            "sandpiper:policy/inventory@0.4.0",
            "sandpiper:policy/inventory@1.0.0",
            "sandpiper:policy/filter@0.1.0",
            "example:evil/backdoor@1.0.0",
            "inventory",
        ] {
            assert!(!import_allowed(refused), "{refused} should be refused");
        }
    }

    #[test]
    fn refuses_what_is_not_a_component() {
        assert!(matches!(check_bytes(b"hello"), Err(LoadError::NotWasm)));
        assert!(matches!(
            check_bytes(b"\0asm\x01\0\0\0"),
            Err(LoadError::CoreModule)
        ));
        assert!(check_bytes(b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[test]
    fn info_patterns_must_compile_and_defaults_match() {
        let ok = UnitInfo::new("Memory", "").with_param(ParamSpec::new("N", "", "10", r"\d+"));
        assert!(check_info(&ok).is_ok());
        let bad = UnitInfo::new("Memory", "").with_param(ParamSpec::new("N", "", "10", "(("));
        assert!(matches!(
            check_info(&bad),
            Err(LoadError::Params(SpecError::BadPattern { key, .. })) if key == "N"
        ));
        let mismatch =
            UnitInfo::new("Memory", "").with_param(ParamSpec::new("N", "", "ten", r"\d+"));
        assert!(matches!(
            check_info(&mismatch),
            Err(LoadError::Params(SpecError::BadDefault { key, .. })) if key == "N"
        ));
        // Anchored: a pattern matching part of the default is not enough.
        let partial =
            UnitInfo::new("Memory", "").with_param(ParamSpec::new("N", "", "10x", r"\d+"));
        assert!(check_info(&partial).is_err());
        let twice = UnitInfo::new("Memory", "")
            .with_param(ParamSpec::new("N", "", "1", r"\d+"))
            .with_param(ParamSpec::new("N", "", "2", r"\d+"));
        assert!(matches!(
            check_info(&twice),
            Err(LoadError::Params(SpecError::DuplicateKey { .. }))
        ));
        let never = UnitInfo::new("Never", "").applies_to([]);
        assert!(matches!(check_info(&never), Err(LoadError::InvalidInfo(_))));
        let groups =
            UnitInfo::new("Groups", "").applies_to([sandpiper_model::RequestProperty::Groups]);
        assert!(check_info(&groups).is_ok());
    }
}
