//! Compiles guest crates of this workspace to WebAssembly components from a
//! build script, so crates that embed or test units always use ones built
//! from the current source.
//!
//! ```no_run
//! // build.rs
//! let guests = sandpiper_guest_build::build(&["sandpiper-policy-memory"]);
//! sandpiper_guest_build::write_listing("guests.rs", &guests);
//! // then, in the crate: mod guests { include!(concat!(env!("OUT_DIR"), "/guests.rs")); }
//! ```
//!
//! The guests are built by a nested `cargo build --target wasm32-wasip2
//! --profile guest` into `<target>/guests`, a target directory of its own so
//! the nested cargo never waits for the lock the outer build holds, with the
//! environment variables that would leak the outer build's settings into it
//! removed (see [`nested`]). Each component is then copied into the calling
//! crate's `OUT_DIR`, so a later build of the same guest for another crate
//! cannot change a file this crate is reading.

mod listing;
pub mod nested;
pub mod precompile;

use std::path::{Path, PathBuf};

pub use listing::{render_listing, try_write_listing, write_listing};

/// The target guests are built for.
pub const TARGET: &str = "wasm32-wasip2";
/// The Cargo profile guests are built with (defined in the workspace's
/// `Cargo.toml`: size- and speed-optimised, LTO, `panic = "abort"`).
pub const PROFILE: &str = "guest";
/// Bytes of linear memory a guest starts with (wasm-ld's
/// `--initial-memory`; Rust's default is its 1 MiB stack plus static data).
///
/// Memory a unit grows into costs two `mprotect`s per call with wasmtime's
/// pooling allocator (one when the unit grows, one when the next instance in
/// the slot is shrunk back to the initial size), and at 10,000 hosts almost
/// every unit grows: measured on Nova's one-column `RAMWeigher` over 10,000
/// hosts, 45 µs a call with the default and 32 µs with 4 MiB. Pages a unit
/// never touches cost nothing (they stay unmapped zero pages), and the
/// initial memory counts against the unit's memory limit like any other.
/// Matches the sandbox's `KEEP_RESIDENT_WITHOUT_SCAN_BYTES`.
pub const INITIAL_MEMORY_BYTES: u64 = 4 << 20;
/// How large (in LLVM's cost units) a loop may grow when LLVM unrolls it
/// partially for the guests. WebAssembly's default, 30, leaves nearly every
/// per-host loop rolled, and wasmtime keeps a fuel check and an epoch check
/// at every loop header, so each host paid both; at 150 the gather loops
/// unroll and pay them once every few hosts. Measured (session 54,
/// docs/performance.md "Guest loops unrolled further"): most score units
/// 7-22 % faster sandboxed, `CPU-Level` 13 %, a few units 5-12 % slower
/// from code layout. Loops that call a function (a `Vec` push, a bounds
/// panic) are never unrolled, whatever the threshold.
pub const UNROLL_PARTIAL_THRESHOLD: u32 = 150;

/// The guests' target directory, inside the workspace's target directory.
pub const TARGET_SUBDIR: &str = "guests";
/// Where in `OUT_DIR` the components are copied.
pub const OUT_SUBDIR: &str = "guests";

/// A component built from one package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltGuest {
    /// The Cargo package, e.g. `sandpiper-policy-memory`.
    pub package: String,
    /// The component file, in the calling crate's `OUT_DIR`.
    pub path: PathBuf,
}

/// Why guests could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("`{0}` is not set; sandpiper-guest-build runs from build scripts")]
    NotInBuildScript(&'static str),
    #[error("could not run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`cargo metadata` failed: {0}")]
    Metadata(String),
    #[error("no package `{0}` in the workspace")]
    UnknownPackage(String),
    #[error("building guests failed ({status}):\n{stderr}")]
    Cargo {
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("compiling the built components ahead of time failed ({status}):\n{stderr}")]
    Precompile {
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("cargo built no executable `{0}`")]
    MissingExecutable(&'static str),
    #[error("cargo built no component for `{0}`; is it a `cdylib`?")]
    MissingComponent(String),
    #[error("could not write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Builds `packages` and returns their components, for a build script:
/// on failure it stops the build, printing the nested cargo's errors.
pub fn build(packages: &[&str]) -> Vec<BuiltGuest> {
    match Builder::from_build_script().and_then(|builder| builder.build(packages)) {
        Ok(guests) => guests,
        // Panicking is how a build script fails; cargo shows the message.
        Err(error) => panic!("{error}"),
    }
}

/// Builds guests for one crate. [`build`] configures it from a build
/// script's environment; tests configure it by hand.
#[derive(Clone, Debug)]
pub struct Builder {
    /// Any directory inside the workspace (a build script's
    /// `CARGO_MANIFEST_DIR`).
    pub manifest_dir: PathBuf,
    /// Where components are copied (a build script's `OUT_DIR`).
    pub out_dir: PathBuf,
    /// The nested build's target directory; `None` for `<target>/guests`.
    pub target_dir: Option<PathBuf>,
    /// The cargo to run (a build script's `CARGO`).
    pub cargo: PathBuf,
    /// Whether to print `cargo::rerun-if-changed` lines (only build scripts
    /// should).
    pub emit_rerun_if_changed: bool,
}

impl Builder {
    /// Configures a builder from the variables cargo gives build scripts.
    pub fn from_build_script() -> Result<Self, BuildError> {
        let var = |name: &'static str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .ok_or(BuildError::NotInBuildScript(name))
        };
        Ok(Builder {
            manifest_dir: var("CARGO_MANIFEST_DIR")?,
            out_dir: var("OUT_DIR")?,
            target_dir: None,
            cargo: var("CARGO").unwrap_or_else(|_| PathBuf::from("cargo")),
            emit_rerun_if_changed: true,
        })
    }

    /// Builds `packages` into components and copies them to `out_dir`.
    pub fn build(&self, packages: &[&str]) -> Result<Vec<BuiltGuest>, BuildError> {
        let workspace = nested::Workspace::read(&self.cargo, &self.manifest_dir)?;
        let mut package_dirs = Vec::with_capacity(packages.len());
        for &package in packages {
            package_dirs.push(
                workspace
                    .package_dir(package)
                    .ok_or_else(|| BuildError::UnknownPackage(package.to_owned()))?,
            );
        }
        if self.emit_rerun_if_changed {
            for dir in workspace
                .sources_every_guest_uses()
                .iter()
                .chain(&package_dirs)
            {
                println!("cargo::rerun-if-changed={}", dir.display());
            }
        }
        let target_dir = self
            .target_dir
            .clone()
            .unwrap_or_else(|| workspace.target_dir.join(TARGET_SUBDIR));
        let built = nested::cargo_build(&self.cargo, &workspace.root, &target_dir, packages)?;
        if self.emit_rerun_if_changed {
            // Everything each component was really built from, including
            // shared crates the directories above do not cover.
            for source in workspace.sources_and_manifests(built.values(), &target_dir) {
                println!("cargo::rerun-if-changed={}", source.display());
            }
        }

        let out_dir = self.out_dir.join(OUT_SUBDIR);
        create_dir(&out_dir)?;
        packages
            .iter()
            .map(|&package| {
                let component = built
                    .get(package)
                    .ok_or_else(|| BuildError::MissingComponent(package.to_owned()))?;
                let path = out_dir.join(format!("{package}.wasm"));
                copy(component, &path)?;
                Ok(BuiltGuest {
                    package: package.to_owned(),
                    path,
                })
            })
            .collect()
    }
}

fn create_dir(path: &Path) -> Result<(), BuildError> {
    std::fs::create_dir_all(path).map_err(|source| BuildError::Write {
        path: path.to_owned(),
        source,
    })
}

fn copy(from: &Path, to: &Path) -> Result<(), BuildError> {
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|source| BuildError::Write {
            path: to.to_owned(),
            source,
        })
}
