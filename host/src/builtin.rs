//! The built-in units: every crate under `policies/`, compiled to a
//! component by `build.rs` and embedded in the binary.

/// A unit shipped inside the binary.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinUnit {
    /// Its Cargo package, e.g. `sandpiper-policy-memory`.
    pub package: &'static str,
    /// Its directory under `policies/`, e.g. `memory`: stable across
    /// versions, so it can seed the unit's id.
    pub name: &'static str,
    /// The component.
    pub wasm: &'static [u8],
}

/// Every built-in unit, ordered by package name.
pub static UNITS: &[BuiltinUnit] = include!(concat!(env!("OUT_DIR"), "/builtin_units.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_crate_is_embedded_as_a_component() {
        let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
        let mut dirs: Vec<String> = std::fs::read_dir(&policies)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                std::fs::read_to_string(path.join("Cargo.toml"))
                    .is_ok_and(|manifest| manifest.contains("name = \"sandpiper-policy-"))
            })
            .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        dirs.sort();
        let names: Vec<&str> = UNITS.iter().map(|unit| unit.name).collect();
        assert_eq!(names, dirs);
        for unit in UNITS {
            assert!(
                wasmparser::Parser::is_component(unit.wasm),
                "{}",
                unit.package
            );
        }
    }
}
