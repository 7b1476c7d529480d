//! Builds policy units from source in every supported language, for the
//! cross-language tests and the `languages` benchmark: Rust through
//! `sandpiper-guest-build` (as the server's own units are built), Python,
//! JavaScript and C through `scripts/build-unit.sh` (as authors build them).
//!
//! Each component is built once per process and kept on disk under
//! `<target>/test-guests/`, named by a hash of everything it is built from,
//! so a second run reuses it and a changed source rebuilds it. A missing
//! toolchain fails with the command that installs it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

/// The languages units can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    Rust,
    Python,
    Js,
    C,
}

impl Language {
    pub const ALL: [Language; 4] = [Language::Rust, Language::Python, Language::Js, Language::C];

    /// The name `scripts/build-unit.sh` takes, also used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::Js => "js",
            Language::C => "c",
        }
    }

    /// The HeadroomAffinity example's source, relative to the repository.
    fn example_source(self) -> &'static str {
        match self {
            Language::Rust => "policies/examples/rust",
            Language::Python => "policies/examples/python/headroom_affinity.py",
            Language::Js => "policies/examples/js/headroom_affinity.js",
            Language::C => "policies/examples/c/headroom_affinity.c",
        }
    }

    /// Besides the unit's own source, what its component is built from
    /// (relative to the repository): the contract, the build scripts and
    /// the language's helper layer and toolchain pins.
    fn shared_inputs(self) -> &'static [&'static str] {
        match self {
            Language::Rust => &[],
            Language::Python => &["wit", "scripts", "guest-sdk/python"],
            Language::Js => &["wit", "scripts", "guest-sdk/js"],
            Language::C => &["wit", "scripts", "guest-sdk/c"],
        }
    }
}

/// The Rust example's package.
pub const RUST_EXAMPLE_PACKAGE: &str = "sandpiper-example-headroom-affinity";

/// The world every example implements.
pub const EXAMPLE_WORLD: &str = "filter-score-unit";

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate sits in the repository")
        .to_owned()
}

/// The target directory of the running test or benchmark
/// (`<target>/<profile>/deps/<exe>`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.ancestors()
        .nth(3)
        .expect("tests run from <target>/<profile>/deps")
        .to_owned()
}

/// Where built components are kept between runs.
fn cache_dir() -> PathBuf {
    target_dir().join("test-guests")
}

/// The HeadroomAffinity example in `language`, built from source.
pub fn example(language: Language) -> Arc<[u8]> {
    static BUILT: OnceLock<Mutex<HashMap<Language, Arc<[u8]>>>> = OnceLock::new();
    // One build at a time: they compete for two cores anyway, and the
    // nested cargo builds share target directories.
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Arc::clone(built.entry(language).or_insert_with(|| {
        let bytes = match language {
            Language::Rust => build_rust_example(),
            _ => build_unit(
                language,
                EXAMPLE_WORLD,
                &repo().join(language.example_source()),
            ),
        };
        bytes.into()
    }))
}

/// Builds the Rust example crate as the server's build script builds the
/// built-in units.
fn build_rust_example() -> Vec<u8> {
    let builder = sandpiper_guest_build::Builder {
        manifest_dir: repo(),
        out_dir: cache_dir().join("rust"),
        target_dir: None,
        cargo: std::env::var_os("CARGO").map_or_else(|| "cargo".into(), PathBuf::from),
        emit_rerun_if_changed: false,
    };
    let built = builder
        .build(&[RUST_EXAMPLE_PACKAGE])
        .unwrap_or_else(|error| panic!("building the Rust example: {error}"));
    std::fs::read(&built[0].path).expect("the built Rust example")
}

/// Builds the non-Rust unit at `source` (a file) for `world` with
/// `scripts/build-unit.sh`, or reuses the component a previous run built
/// from the same inputs.
pub fn build_unit(language: Language, world: &str, source: &Path) -> Vec<u8> {
    assert_ne!(
        language,
        Language::Rust,
        "Rust units are crates, built by cargo"
    );
    let repo = repo();
    let mut hash = Sha256::new();
    hash.update(language.name());
    hash.update(world);
    // The unit's own file by name (looping units live in fresh temporary
    // directories), the shared inputs by their place in the repository.
    hash_path(&mut hash, source, source.parent().unwrap_or(Path::new("")));
    for input in language.shared_inputs() {
        hash_path(&mut hash, &repo.join(input), &repo);
    }
    let digest = hash.finalize();
    let stem = source
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("unit");
    let prefix = format!("{}-{stem}-{world}-", language.name());
    let out = cache_dir().join(format!(
        "{prefix}{}.wasm",
        &sandpiper::sandbox::hex(&digest)[..16]
    ));
    if let Ok(bytes) = std::fs::read(&out) {
        return bytes;
    }

    let partial = out.with_extension("partial.wasm");
    let mut command = Command::new("bash");
    command
        .arg(repo.join("scripts/build-unit.sh"))
        .arg(language.name())
        .arg(world)
        .arg(&partial)
        .arg(source)
        .current_dir(&repo);
    // The script may run cargo (for the C tool): give it a clean slate.
    sandpiper_guest_build::nested::scrub(&mut command);
    let output = command.output().expect("run scripts/build-unit.sh");
    match output.status.code() {
        Some(0) => {}
        // The script's "toolchain missing" status.
        Some(3) => panic!(
            "cannot build the {} unit {}: {}Install the guest toolchains once with \
             `scripts/install-guest-toolchains.sh` (docs/authoring.md).",
            language.name(),
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        ),
        _ => panic!(
            "scripts/build-unit.sh {} failed for {} ({}):\n{}{}",
            language.name(),
            source.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    }
    // Components built from older inputs are never read again.
    remove_stale(&prefix, &partial);
    // Renamed into place so a run interrupted mid-build leaves no truncated
    // component behind under the final name.
    std::fs::rename(&partial, &out).expect("keep the built component");
    std::fs::read(&out).expect("the built component")
}

/// Removes the cached components named `<prefix>*` other than `keep`.
fn remove_stale(prefix: &str, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(cache_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let stale = path != keep
            && path
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(prefix));
        if stale {
            // Another process may have removed it first; either way it is gone.
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Feeds a file, or every file under a directory in name order, into `hash`,
/// each named by its path relative to `base` (so a rename counts as a
/// change, but where the tree sits does not).
fn hash_path(hash: &mut Sha256, path: &Path, base: &Path) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        entries.sort();
        // Python's byte-code cache is derived from the sources beside it.
        for entry in entries.iter().filter(|e| !e.ends_with("__pycache__")) {
            hash_path(hash, entry, base);
        }
    } else {
        let name = path.strip_prefix(base).unwrap_or(path);
        hash.update(name.to_string_lossy().as_bytes());
        hash.update(
            std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display())),
        );
    }
}
