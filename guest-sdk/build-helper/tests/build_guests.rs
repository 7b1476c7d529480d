//! Builds real guest crates of this workspace with the helper, as a build
//! script would, and checks the components it returns.

use std::path::{Path, PathBuf};

use sandpiper_guest_build::{BuildError, Builder, INITIAL_MEMORY_BYTES, render_listing};
use wasmparser::{Parser, Payload, TypeRef};

/// The WIT interface a unit reads its columns through.
const INVENTORY_IMPORT: &str = "sandpiper:policy/inventory@0.3.0";
/// Bytes in a WebAssembly page.
const WASM_PAGE_BYTES: u64 = 64 * 1024;

/// A builder like a build script's, writing into a fresh directory under
/// cargo's scratch space for integration tests.
fn builder(name: &str, target_dir: Option<PathBuf>) -> Builder {
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&out_dir);
    Builder {
        manifest_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        out_dir,
        target_dir,
        cargo: std::env::var_os("CARGO").map_or_else(|| "cargo".into(), PathBuf::from),
        emit_rerun_if_changed: false,
    }
}

/// The names a component exports at its top level.
fn component_exports(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).expect("the component was written");
    let mut depth = 0;
    let mut exports = Vec::new();
    for payload in Parser::new(0).parse_all(&bytes) {
        match payload.expect("a valid component") {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth -= 1,
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    exports.push(export.expect("a valid export").name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    exports.sort();
    exports
}

/// What the component's core modules import from [`INVENTORY_IMPORT`], and
/// the initial size of every memory they define, bytes.
fn core_imports_and_memories(path: &Path) -> (Vec<String>, Vec<u64>) {
    let bytes = std::fs::read(path).expect("the component was written");
    let mut imports = Vec::new();
    let mut memories = Vec::new();
    for payload in Parser::new(0).parse_all(&bytes) {
        match payload.expect("a valid component") {
            Payload::ImportSection(section) => {
                for import in section.into_imports() {
                    let import = import.expect("a valid import");
                    if import.module == INVENTORY_IMPORT && matches!(import.ty, TypeRef::Func(_)) {
                        imports.push(import.name.to_owned());
                    }
                }
            }
            Payload::MemorySection(section) => {
                for memory in section {
                    memories.push(memory.expect("a valid memory").initial * WASM_PAGE_BYTES);
                }
            }
            _ => {}
        }
    }
    imports.sort();
    (imports, memories)
}

fn assert_exports(path: &Path, interfaces: &[&str]) {
    let expected: Vec<String> = interfaces
        .iter()
        .map(|name| format!("sandpiper:policy/{name}@0.3.0"))
        .collect();
    assert_eq!(component_exports(path), expected, "{}", path.display());
}

fn build_and_check(builder: &Builder) {
    let built = builder
        .build(&[
            "sandpiper-policy-cpu",
            "sandpiper-policy-even-guest-distribution",
        ])
        .expect("the guests build");
    assert_eq!(built.len(), 2);
    assert_eq!(built[0].package, "sandpiper-policy-cpu");
    assert!(built[0].path.starts_with(&builder.out_dir));
    assert_exports(&built[0].path, &["filter", "metadata"]);
    assert_exports(&built[1].path, &["balance", "metadata", "score"]);
    let listing = render_listing(&built);
    assert!(listing.contains("SANDPIPER_POLICY_EVEN_GUEST_DISTRIBUTION"));
}

#[test]
fn builds_components_exporting_exactly_their_roles() {
    build_and_check(&builder("roles", None));
}

/// Slow (a full guest build on two cores takes minutes): run with
/// `cargo test -p sandpiper-guest-build -- --ignored`.
#[test]
#[ignore]
fn builds_from_a_clean_target_directory() {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clean-guests-target");
    let _ = std::fs::remove_dir_all(&target);
    build_and_check(&builder("clean", Some(target)));
}

/// A unit's component imports only the inventory functions its unit calls,
/// and starts with [`INITIAL_MEMORY_BYTES`] of memory. Both regressed
/// unnoticed once (issue #10, docs/performance.md): a `dyn Fetch` in the
/// model crate made every unit import every column function and turned
/// each per-host column read into an out-of-line call, and the `Memory`
/// filter's sandboxed call became ~30 % slower with its fuel barely moved.
#[test]
fn a_unit_links_only_the_columns_it_reads_and_starts_with_its_memory() {
    let built = builder("imports", None)
        .build(&["sandpiper-policy-memory"])
        .expect("the guest builds");
    let (imports, memories) = core_imports_and_memories(&built[0].path);
    // `Memory` reads host metrics only; every snapshot asks its size.
    assert_eq!(imports, ["host-count", "host-metrics", "vm-count"]);
    assert_eq!(memories, [INITIAL_MEMORY_BYTES]);
}

#[test]
fn an_unknown_package_is_a_typed_error() {
    let error = builder("unknown", None)
        .build(&["sandpiper-policy-nonexistent"])
        .expect_err("no such package");
    assert!(
        matches!(&error, BuildError::UnknownPackage(name) if name == "sandpiper-policy-nonexistent"),
        "{error}"
    );
}
