//! Running cargo from inside a build script: reading the workspace and
//! building guests with an environment cleaned of the outer build's
//! settings.
//!
//! Cargo hands a build script the variables it uses to configure *that*
//! build: host rustflags, the clippy driver, the jobserver, `cfg` values of
//! the host target, the outer target directory. A nested cargo would read
//! them as its own and build the guests wrongly (native rustflags on a wasm
//! target, clippy's `-D warnings` on guests, `CARGO_CFG_UNIX` in the guests'
//! build scripts) or wait on a lock the outer build holds.
//! [`SCRUBBED_VARS`] and [`SCRUBBED_PREFIXES`] list what is removed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{BuildError, INITIAL_MEMORY_BYTES, PROFILE, TARGET, UNROLL_PARTIAL_THRESHOLD};

/// Variables removed from the nested cargo's environment.
pub const SCRUBBED_VARS: &[&str] = &[
    // The outer build's target, target directory and flags.
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    // The outer build's jobserver: the nested cargo runs its own.
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    // `cargo clippy` runs rustc through clippy-driver with its own lint flags.
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CLIPPY_ARGS",
    "CLIPPY_CONF_DIR",
    // What cargo tells one build script about its package and target.
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "OUT_DIR",
    "TARGET",
    "HOST",
    "NUM_JOBS",
    "OPT_LEVEL",
    "DEBUG",
    "PROFILE",
    "RUSTC_LINKER",
];

/// Prefixes of variables removed from the nested cargo's environment: the
/// calling package's features, metadata and `cfg`s, its dependencies'
/// `links` outputs, and cargo-internal settings.
pub const SCRUBBED_PREFIXES: &[&str] = &[
    "CARGO_FEATURE_",
    "CARGO_PKG_",
    "CARGO_CFG_",
    "DEP_",
    "__CARGO_",
];

/// Most of the nested cargo's error output kept in a [`BuildError`], bytes;
/// enough for every diagnostic of a failed guest, and a bound on the panic
/// message a build script prints.
pub const MAX_STDERR_BYTES: usize = 64 * 1024;

/// The workspace, as `cargo metadata` describes it.
#[derive(Clone, Debug)]
pub struct Workspace {
    /// The workspace's root directory.
    pub root: PathBuf,
    /// The workspace's target directory.
    pub target_dir: PathBuf,
    /// Each member package's directory, by package name.
    pub packages: HashMap<String, PathBuf>,
}

impl Workspace {
    /// Reads the workspace that contains `dir`. The environment is kept:
    /// `cargo metadata` compiles nothing, and a `CARGO_TARGET_DIR` the user
    /// set should place the guests too.
    pub fn read(cargo: &Path, dir: &Path) -> Result<Self, BuildError> {
        let mut command = Command::new(cargo);
        command
            .args(["metadata", "--format-version", "1", "--no-deps"])
            .current_dir(dir);
        let stdout = run(&mut command, |_, stderr| BuildError::Metadata(stderr))?;
        let metadata: serde_json::Value = serde_json::from_slice(&stdout)
            .map_err(|error| BuildError::Metadata(error.to_string()))?;
        let path = |key: &str| {
            metadata[key]
                .as_str()
                .map(PathBuf::from)
                .ok_or_else(|| BuildError::Metadata(format!("no `{key}` in its output")))
        };
        let packages = metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|package| {
                let name = package["name"].as_str()?;
                let manifest = Path::new(package["manifest_path"].as_str()?);
                Some((name.to_owned(), manifest.parent()?.to_owned()))
            })
            .collect();
        Ok(Workspace {
            root: path("workspace_root")?,
            target_dir: path("target_directory")?,
            packages,
        })
    }

    /// The directory of member package `name`.
    pub fn package_dir(&self, name: &str) -> Option<PathBuf> {
        self.packages.get(name).cloned()
    }

    /// The sources the `components` were built from (see [`sources_of`])
    /// plus the manifest of every workspace package they lie in, since a
    /// changed manifest (a new dependency, a feature) changes the build too.
    pub fn sources_and_manifests<'c>(
        &self,
        components: impl IntoIterator<Item = &'c PathBuf>,
        target_dir: &Path,
    ) -> Vec<PathBuf> {
        let mut sources: Vec<PathBuf> = components
            .into_iter()
            .flat_map(|component| sources_of(component, target_dir))
            .collect();
        let manifests: Vec<PathBuf> = self
            .packages
            .values()
            .filter(|dir| sources.iter().any(|source| source.starts_with(dir)))
            .map(|dir| dir.join("Cargo.toml"))
            .collect();
        sources.extend(manifests);
        sources.sort();
        sources.dedup();
        sources
    }

    /// What every guest is built from besides its own crate: the WIT
    /// contract, and the source and manifest of the guest SDK and of the
    /// model crate it re-exports.
    pub fn sources_every_guest_uses(&self) -> Vec<PathBuf> {
        let mut sources = vec![self.root.join("wit")];
        for package in ["sandpiper-guest", "sandpiper-model"] {
            if let Some(dir) = self.package_dir(package) {
                sources.push(dir.join("src"));
                sources.push(dir.join("Cargo.toml"));
            }
        }
        sources
    }
}

/// Removes the outer build's settings (see the module doc) from `command`.
pub fn scrub(command: &mut Command) {
    for var in SCRUBBED_VARS {
        command.env_remove(var);
    }
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if SCRUBBED_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
        {
            command.env_remove(name);
        }
    }
}

/// Builds `packages` for [`TARGET`] with profile [`PROFILE`] in
/// `target_dir`, returning each package's component.
pub fn cargo_build(
    cargo: &Path,
    workspace_root: &Path,
    target_dir: &Path,
    packages: &[&str],
) -> Result<HashMap<String, PathBuf>, BuildError> {
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .args(["--target", TARGET, "--profile", PROFILE])
        .arg("--target-dir")
        .arg(target_dir)
        // Artifacts as JSON on stdout, diagnostics rendered on stderr.
        .arg("--message-format=json-render-diagnostics")
        .current_dir(workspace_root);
    for package in packages {
        command.args(["--package", package]);
    }
    scrub(&mut command);
    // Set after scrubbing: the guests' only flags, whatever the outer
    // build uses.
    command.env(
        format!(
            "CARGO_TARGET_{}_RUSTFLAGS",
            TARGET.to_uppercase().replace('-', "_")
        ),
        format!(
            "-Clink-arg=--initial-memory={INITIAL_MEMORY_BYTES} \
             -Cllvm-args=-unroll-partial-threshold={UNROLL_PARTIAL_THRESHOLD}"
        ),
    );
    let stdout = run(&mut command, |status, stderr| BuildError::Cargo {
        status,
        stderr,
    })?;
    Ok(components(&String::from_utf8_lossy(&stdout), packages))
}

/// The `.wasm` files among cargo's `compiler-artifact` messages, by package.
fn components(messages: &str, packages: &[&str]) -> HashMap<String, PathBuf> {
    let mut found = HashMap::new();
    for line in messages.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(package) = artifact_package(&message, packages) else {
            continue;
        };
        let wasm = message["filenames"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|name| name.as_str())
            .find(|name| name.ends_with(".wasm"));
        if let Some(wasm) = wasm {
            found.insert(package.to_owned(), PathBuf::from(wasm));
        }
    }
    found
}

/// Which of `packages` an artifact message is about. Cargo spells package
/// ids `path+file:///dir#name@version`, or `path+file:///name#version` when
/// the directory is named after the package.
fn artifact_package<'p>(message: &serde_json::Value, packages: &[&'p str]) -> Option<&'p str> {
    let id = message["package_id"].as_str()?;
    let (source, fragment) = id.rsplit_once('#')?;
    let name = match fragment.split_once('@') {
        Some((name, _version)) => name,
        None => source.rsplit('/').next()?,
    };
    packages.iter().copied().find(|&package| package == name)
}

/// Every local source file a component was built from, read from the
/// dep-info file cargo writes next to it (`<artifact>.d`, make syntax:
/// `target: source source ...`, spaces in paths escaped). Empty when there
/// is none. The artifacts themselves (under `target_dir`) are left out.
pub fn sources_of(component: &Path, target_dir: &Path) -> Vec<PathBuf> {
    let Ok(dep_info) = std::fs::read_to_string(component.with_extension("d")) else {
        return Vec::new();
    };
    let mut sources = Vec::new();
    for line in dep_info.lines() {
        let Some((_target, deps)) = line.split_once(": ") else {
            continue;
        };
        let mut path = String::new();
        let mut chars = deps.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    path.push(' ');
                    chars.next();
                }
                ' ' => push_source(&mut sources, &mut path, target_dir),
                _ => path.push(c),
            }
        }
        push_source(&mut sources, &mut path, target_dir);
    }
    sources.sort();
    sources.dedup();
    sources
}

fn push_source(sources: &mut Vec<PathBuf>, path: &mut String, target_dir: &Path) {
    let source = PathBuf::from(std::mem::take(path));
    if !source.as_os_str().is_empty() && !source.starts_with(target_dir) {
        sources.push(source);
    }
}

/// The end of a process's error output, lossily decoded.
/// Runs `command` and returns its standard output: a failure to start it
/// is [`BuildError::Spawn`], a failed exit `failed(status, the end of its
/// standard error)`.
pub(crate) fn run(
    command: &mut Command,
    failed: impl FnOnce(std::process::ExitStatus, String) -> BuildError,
) -> Result<Vec<u8>, BuildError> {
    let output = command.output().map_err(|source| BuildError::Spawn {
        command: format!("{command:?}"),
        source,
    })?;
    if !output.status.success() {
        return Err(failed(output.status, tail(&output.stderr)));
    }
    Ok(output.stdout)
}

fn tail(stderr: &[u8]) -> String {
    let start = stderr.len().saturating_sub(MAX_STDERR_BYTES);
    String::from_utf8_lossy(&stderr[start..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_components_in_cargo_messages() {
        let messages = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/policies/memory#sandpiper-policy-memory@0.1.0","filenames":["/t/sandpiper_policy_memory.wasm","/t/libsandpiper_policy_memory.rlib"]}
{"reason":"compiler-artifact","package_id":"path+file:///w/sandpiper-test-hostile#0.1.0","filenames":["/t/sandpiper_test_hostile.wasm"]}
{"reason":"compiler-artifact","package_id":"registry+https://github.com/rust-lang/crates.io-index#wit-bindgen@0.63.0","filenames":["/t/libwit_bindgen.rlib"]}
not json
{"reason":"build-finished","success":true}"#;
        let found = components(
            messages,
            &["sandpiper-policy-memory", "sandpiper-test-hostile"],
        );
        assert_eq!(
            found.get("sandpiper-policy-memory"),
            Some(&PathBuf::from("/t/sandpiper_policy_memory.wasm"))
        );
        assert_eq!(
            found.get("sandpiper-test-hostile"),
            Some(&PathBuf::from("/t/sandpiper_test_hostile.wasm"))
        );
        assert_eq!(found.len(), 2);
    }

    #[test]
    fn reads_the_sources_a_component_was_built_from() {
        let dir = std::env::temp_dir().join(format!("sandpiper-dep-info-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let component = dir.join("unit.wasm");
        std::fs::write(
            component.with_extension("d"),
            format!(
                "{out}: /w/policies/cpu/src/lib.rs /w/my\\ dir/x.rs /w/wit/policy.wit {out}\n\n\
                 /w/policies/cpu/src/lib.rs:\n",
                out = component.display()
            ),
        )
        .expect("a dep-info file");
        let sources = sources_of(&component, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            sources,
            [
                PathBuf::from("/w/my dir/x.rs"),
                PathBuf::from("/w/policies/cpu/src/lib.rs"),
                PathBuf::from("/w/wit/policy.wit"),
            ]
        );
    }

    #[test]
    fn keeps_the_end_of_long_error_output() {
        let long = vec![b'x'; MAX_STDERR_BYTES + 10];
        assert_eq!(tail(&long).len(), MAX_STDERR_BYTES);
    }
}
