//! Builds every test unit (each crate directly under `tests/guests/`) to a
//! component and lists them in `OUT_DIR/guests.rs` for `src/lib.rs`. The
//! list comes from the directory, so a new test guest needs no other edit.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("`CARGO_MANIFEST_DIR` is set by cargo"),
    );
    let cargo = PathBuf::from(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    let workspace = sandpiper_guest_build::nested::Workspace::read(&cargo, &manifest_dir)
        .unwrap_or_else(|error| panic!("{error}"));
    let guests_dir = manifest_dir.join("guests");
    // A new guest directory changes the list.
    println!("cargo::rerun-if-changed={}", guests_dir.display());

    let mut packages: Vec<&str> = workspace
        .packages
        .iter()
        .filter(|(_, dir)| dir.parent() == Some(guests_dir.as_path()))
        .map(|(name, _)| name.as_str())
        .collect();
    packages.sort_unstable();
    let built = sandpiper_guest_build::build(&packages);
    sandpiper_guest_build::write_listing("guests.rs", &built);
}
