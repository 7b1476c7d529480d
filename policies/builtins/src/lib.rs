//! What ships inside the server, listed from the folder tree by `build.rs`:
//! every built-in unit (each crate `policies/<family>/<unit>` whose package
//! is `sandpiper-policy-*`) as a component, and every built-in policy
//! (`policies/defaults/*.json`) as JSON text.
//!
//! With the `native` feature every unit is also compiled natively from the
//! very same source file (`BuiltinUnit::native`), for the tests that run
//! each unit both ways and the benchmarks that compare them. So the host,
//! the tests and the benchmarks share this one list, and adding a unit is
//! adding its folder: no manifest names it.

/// A unit shipped inside the binary.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinUnit {
    /// Its Cargo package, e.g. `sandpiper-policy-memory`.
    pub package: &'static str,
    /// Its package name without `sandpiper-policy-`, e.g. `memory` or
    /// `nova-ram`: stable across versions and folder moves, so it can seed
    /// the unit's id.
    pub name: &'static str,
    /// Its crate's folder, relative to the workspace root, e.g.
    /// `policies/nova/ram` (its cases are in `cases/` there).
    pub dir: &'static str,
    /// The component.
    pub wasm: &'static [u8],
    /// The component compiled by our own build with the server's settings
    /// (`sandpiper-compile`), for the building machine's CPU: release
    /// builds only (`sandpiper_guest_build::precompile`). Wasmtime refuses
    /// it safely on another CPU or engine configuration; the server then
    /// compiles `wasm`.
    pub compiled: Option<&'static [u8]>,
    /// Its `native_unit()`, compiled into this crate.
    #[cfg(feature = "native")]
    native_unit: fn() -> sandpiper_guest::native::NativeUnit,
}

impl BuiltinUnit {
    /// The unit compiled natively from the same source as its component,
    /// with exactly the roles the component exports.
    #[cfg(feature = "native")]
    pub fn native(&self) -> sandpiper_guest::native::NativeUnit {
        (self.native_unit)()
    }
}

/// Every built-in unit, ordered by package name.
pub static UNITS: &[BuiltinUnit] = include!(concat!(env!("OUT_DIR"), "/units.rs"));

/// Every built-in policy file as (file name, JSON text), ordered by file
/// name.
pub static POLICY_FILES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/policies.rs"));

/// The built-in unit of package `package`.
pub fn unit(package: &str) -> Option<&'static BuiltinUnit> {
    UNITS.iter().find(|unit| unit.package == package)
}

/// The units' sources compiled natively (the `native` feature).
#[cfg(feature = "native")]
pub mod native {
    /// One module per unit, named for its package (`sandpiper_policy_memory`),
    /// whose file is the unit crate's own `src/lib.rs`: the same source its
    /// component is built from, so the two cannot drift apart.
    #[doc(hidden)]
    pub mod sources {
        include!(concat!(env!("OUT_DIR"), "/native_sources.rs"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::{Path, PathBuf};

    fn workspace_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The `sandpiper-policy-*` crates found by walking `policies/*/*`, as
    /// (package, folder relative to the workspace root): what the list must
    /// hold, found independently of `build.rs`'s `cargo metadata`.
    fn unit_crates_on_disk() -> Vec<(String, String)> {
        let root = workspace_root();
        let mut found = Vec::new();
        for family in std::fs::read_dir(root.join("policies")).unwrap() {
            let family = family.unwrap().path();
            let Ok(entries) = std::fs::read_dir(&family) else {
                continue;
            };
            for entry in entries {
                let dir = entry.unwrap().path();
                let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
                    continue;
                };
                let Some(package) = manifest
                    .lines()
                    .find_map(|line| line.strip_prefix("name = \""))
                    .and_then(|rest| rest.strip_suffix('"'))
                    .filter(|name| name.starts_with("sandpiper-policy-"))
                else {
                    continue;
                };
                let relative = dir.strip_prefix(&root).unwrap().to_string_lossy();
                found.push((package.to_owned(), relative.replace('\\', "/")));
            }
        }
        found.sort();
        found
    }

    #[test]
    fn every_unit_folder_is_listed_as_a_component() {
        let listed: Vec<(String, String)> = UNITS
            .iter()
            .map(|unit| (unit.package.to_owned(), unit.dir.to_owned()))
            .collect();
        let on_disk = unit_crates_on_disk();
        assert!(on_disk.len() > 50, "the built-in units: {on_disk:?}");
        assert_eq!(listed, on_disk);
        for unit in UNITS {
            assert_eq!(
                Some(unit.name),
                unit.package.strip_prefix("sandpiper-policy-")
            );
            assert!(
                unit.wasm.starts_with(b"\0asm"),
                "{}: not WebAssembly",
                unit.package
            );
        }
    }

    #[test]
    fn every_policy_file_is_listed() {
        let mut files: Vec<String> = std::fs::read_dir(workspace_root().join("policies/defaults"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".json"))
            .collect();
        files.sort();
        let listed: Vec<&str> = POLICY_FILES.iter().map(|(file, _)| *file).collect();
        assert_eq!(listed, files);
    }

    #[cfg(feature = "native")]
    #[test]
    fn every_unit_has_a_native_build_of_its_own_source() {
        for unit in UNITS {
            let native = unit.native();
            assert!(
                !native.info.name.is_empty(),
                "{}: a native build with a name",
                unit.package
            );
        }
    }
}
