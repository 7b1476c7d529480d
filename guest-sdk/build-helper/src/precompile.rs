//! Compiling the built components ahead of time, for release builds: the
//! server embeds the compiled code and its first start loads it instead of
//! compiling every built-in unit (7–9 s of Cranelift on two cores).
//!
//! The compiler is `sandpiper-precompile` (crate `sandpiper-compile`, with
//! the very settings the server compiles with), built by a nested
//! `cargo build --release` into `<target>/precompile`: its own target
//! directory, as for the guests, so the nested cargo never waits for the
//! outer build's lock. That builds wasmtime a second time, once per clean
//! target directory, which is why only release builds do it (see
//! [`wanted`]); test builds compile the units at start, as before.
//!
//! The code is compiled for the CPU of the machine that builds. A server
//! on another CPU finds it refused by wasmtime (safely: wasmtime checks
//! the CPU features and the settings the code was compiled with) and
//! compiles the units itself.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::nested::{self, Workspace};
use crate::{BuildError, BuiltGuest};

/// The variable that overrides [`wanted`]: `1` compiles ahead of time in
/// any profile, `0` in none.
pub const ENV: &str = "SANDPIPER_PRECOMPILE_BUILTINS";

/// The package, binary and feature of the compiler.
const PACKAGE: &str = "sandpiper-compile";
const BINARY: &str = "sandpiper-precompile";
const FEATURE: &str = "tool";

/// The compiler's target directory, inside the workspace's.
pub const TARGET_SUBDIR: &str = "precompile";

/// Where in `OUT_DIR` the compiled code goes.
pub const OUT_SUBDIR: &str = "compiled";

/// Whether this build script's build should embed compiled code: release
/// builds (`cargo build --release`, `cargo bench`, `cargo install`) do,
/// others do not, unless [`ENV`] says otherwise.
pub fn wanted() -> bool {
    println!("cargo::rerun-if-env-changed={ENV}");
    match std::env::var(ENV).as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => std::env::var("PROFILE").as_deref() == Ok("release"),
    }
}

/// Compiles `guests` and returns each one's compiled code, in order, for a
/// build script: on failure it stops the build with the nested cargo's or
/// the compiler's errors.
pub fn precompile(guests: &[BuiltGuest]) -> Vec<PathBuf> {
    try_precompile(guests).unwrap_or_else(|error| panic!("{error}"))
}

fn try_precompile(guests: &[BuiltGuest]) -> Result<Vec<PathBuf>, BuildError> {
    let var = |name: &'static str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .ok_or(BuildError::NotInBuildScript(name))
    };
    let cargo = var("CARGO").unwrap_or_else(|_| PathBuf::from("cargo"));
    let out_dir = var("OUT_DIR")?.join(OUT_SUBDIR);
    let workspace = Workspace::read(&cargo, &var("CARGO_MANIFEST_DIR")?)?;
    let crate_dir = workspace
        .package_dir(PACKAGE)
        .ok_or_else(|| BuildError::UnknownPackage(PACKAGE.to_owned()))?;
    // The compiler's settings and the wasmtime it is built with.
    println!("cargo::rerun-if-changed={}", crate_dir.display());
    println!(
        "cargo::rerun-if-changed={}",
        workspace.root.join("Cargo.lock").display()
    );

    let compiler = build_compiler(&cargo, &workspace)?;
    std::fs::create_dir_all(&out_dir).map_err(|source| BuildError::Write {
        path: out_dir.clone(),
        source,
    })?;
    let mut command = Command::new(&compiler);
    command.arg(&out_dir);
    command.args(guests.iter().map(|guest| &guest.path));
    nested::run(&mut command, |status, stderr| BuildError::Precompile {
        status,
        stderr,
    })?;
    Ok(guests
        .iter()
        .map(|guest| out_dir.join(compiled_name(&guest.path)))
        .collect())
}

/// `sandpiper-precompile`, built by a nested release cargo.
fn build_compiler(cargo: &Path, workspace: &Workspace) -> Result<PathBuf, BuildError> {
    let mut command = Command::new(cargo);
    command
        .args(["build", "--release", "--package", PACKAGE])
        .args(["--features", FEATURE, "--bin", BINARY])
        .arg("--target-dir")
        .arg(workspace.target_dir.join(TARGET_SUBDIR))
        .arg("--message-format=json-render-diagnostics")
        .current_dir(&workspace.root);
    nested::scrub(&mut command);
    let stdout = nested::run(&mut command, |status, stderr| BuildError::Cargo {
        status,
        stderr,
    })?;
    executable(&String::from_utf8_lossy(&stdout)).ok_or(BuildError::MissingExecutable(BINARY))
}

/// The executable among cargo's `compiler-artifact` messages.
fn executable(messages: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
}

/// The file `sandpiper-precompile` writes for `component`.
fn compiled_name(component: &Path) -> PathBuf {
    component
        .with_extension("cwasm")
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_executable_in_cargo_messages() {
        let messages = r#"{"reason":"compiler-artifact","package_id":"registry+https://github.com/rust-lang/crates.io-index#wasmtime@48.0.8","filenames":["/t/libwasmtime.rlib"],"executable":null}
{"reason":"compiler-artifact","package_id":"path+file:///w/host/compile#sandpiper-compile@0.1.0","filenames":["/t/release/sandpiper-precompile"],"executable":"/t/release/sandpiper-precompile"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            executable(messages),
            Some(PathBuf::from("/t/release/sandpiper-precompile"))
        );
        assert_eq!(executable("not json"), None);
    }

    #[test]
    fn compiled_code_is_named_for_its_component() {
        assert_eq!(
            compiled_name(Path::new("/o/guests/sandpiper-policy-cpu.wasm")),
            PathBuf::from("sandpiper-policy-cpu.cwasm")
        );
    }
}
