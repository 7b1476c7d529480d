//! The per-user cache of compiled units on disk, shared by every process of
//! one build run by one user: the offline commands (`sandpiper iallocator`,
//! `sandpiper simulate`) and a server's first start on a new database, when
//! its binary embeds no compiled code (debug builds) or its embedded code
//! was refused. Compiling a component takes far longer than anything else
//! either does, and the built-in units are the same bytes every time.
//!
//! A unit's code is `<dir>/units/<sha256>-<engine>.cwasm`: the sha256 of
//! the component and wasmtime's compatibility hash of this build's engine
//! (the keys the server stores its artifacts under), made by
//! [`Runtime::precompile`] and read back by [`Runtime::load_precompiled`].
//! Loading native code from a file is only safe for files this user wrote:
//! the directory is created `0700`, and a file is only read when it and its
//! directory belong to this user and nobody else may write them; anything
//! else is not read, and the unit is compiled again. Files are written
//! whole or not at all (a temporary file renamed), so processes sharing the
//! directory never read half of one. Every failure to use the cache only
//! means compiling again.
//!
//! The directory is `$SANDPIPER_CACHE_DIR`, else `$XDG_CACHE_HOME/sandpiper`,
//! else `~/.cache/sandpiper` ([`default_dir`]).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{LoadError, Runtime, WasmUnit, hex, sha256};

/// The environment variable naming the cache directory.
pub const CACHE_DIR_ENV: &str = "SANDPIPER_CACHE_DIR";

/// Where the cache lives by default, if anywhere: `$SANDPIPER_CACHE_DIR`,
/// else `$XDG_CACHE_HOME/sandpiper`, else `~/.cache/sandpiper`.
pub fn default_dir() -> Option<PathBuf> {
    let env = |key: &str| {
        std::env::var_os(key)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env(CACHE_DIR_ENV)
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("sandpiper")))
        .or_else(|| env("HOME").map(|d| d.join(".cache").join("sandpiper")))
}

/// The cache of one runtime's engine in one directory.
pub struct CodeCache {
    /// `<dir>/units`, when it exists (or was made) and is this user's alone.
    units: Option<PathBuf>,
    /// The engine's compatibility hash, part of every file's name.
    engine: String,
}

/// Where a unit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Its code was read from the cache.
    Cached,
    /// It was compiled now (and its code cached, if the cache is usable).
    Compiled,
}

impl CodeCache {
    /// The cache in `dir` for `runtime`'s engine (none: a cache that holds
    /// nothing and keeps nothing).
    pub fn open(runtime: &Runtime, dir: Option<&Path>) -> CodeCache {
        let units = dir.and_then(|dir| {
            let units = dir.join("units");
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&units)
                .ok()?;
            ours(&units).then_some(units)
        });
        CodeCache {
            units,
            engine: runtime.compatibility_hash(),
        }
    }

    /// The compiled code of `wasm` and the unit loaded from it into
    /// `runtime`: read from the cache when a file there loads, else
    /// compiled now and written to the cache.
    pub fn code(
        &self,
        runtime: &Runtime,
        wasm: &[u8],
    ) -> Result<(Vec<u8>, Arc<WasmUnit>, Origin), LoadError> {
        let digest = sha256(wasm);
        let path = self.path(&format!("{}-{}.cwasm", hex(&digest), self.engine));
        if let Some(code) = path.as_deref().and_then(read_ours) {
            // SAFETY: the file is in a directory only this user can write,
            // belongs to this user, and was written below from
            // `Runtime::precompile`'s output (code of another build is
            // refused by wasmtime, and then compiled again).
            if let Ok(unit) = unsafe { runtime.load_precompiled(digest, &code) } {
                return Ok((code, unit, Origin::Cached));
            }
        }
        let code = runtime.precompile(wasm)?;
        if let Some(path) = path {
            write_whole(&path, &code);
        }
        let unit = runtime.load(wasm)?;
        Ok((code, unit, Origin::Compiled))
    }

    /// A file of this engine's beside the units (`name` gets the engine's
    /// hash inserted before its extension), if it is there and ours.
    pub fn read_file(&self, name: &str) -> Option<Vec<u8>> {
        read_ours(&self.path(&self.engine_name(name))?)
    }

    /// Writes the file [`CodeCache::read_file`] reads, whole or not at all.
    pub fn write_file(&self, name: &str, bytes: &[u8]) {
        if let Some(path) = self.path(&self.engine_name(name)) {
            write_whole(&path, bytes);
        }
    }

    fn engine_name(&self, name: &str) -> String {
        match name.rsplit_once('.') {
            Some((stem, ext)) => format!("{stem}-{}.{ext}", self.engine),
            None => format!("{name}-{}", self.engine),
        }
    }

    fn path(&self, file: &str) -> Option<PathBuf> {
        self.units.as_ref().map(|units| units.join(file))
    }
}

/// The file at `path`, if it and its directory belong to this user and
/// nobody else may write them.
fn read_ours(path: &Path) -> Option<Vec<u8>> {
    ours(path).then(|| std::fs::read(path).ok()).flatten()
}

/// Whether `path` and its directory belong to this user and nobody else
/// may write them.
fn ours(path: &Path) -> bool {
    let uid = rustix::process::getuid().as_raw();
    let private = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.uid() == uid && m.mode() & 0o022 == 0)
    };
    private(path) && path.parent().is_none_or(private)
}

/// Writes a cache file whole or not at all (a temporary file renamed).
fn write_whole(path: &Path, bytes: &[u8]) {
    let Some(dir) = path.parent() else {
        return;
    };
    let written = tempfile::NamedTempFile::new_in(dir).and_then(|mut file| {
        file.write_all(bytes)?;
        file.persist(path).map_err(|e| e.error)?;
        Ok(())
    });
    if let Err(e) = written {
        tracing::debug!(path = %path.display(), error = %e, "could not cache a compiled unit");
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::sandbox::Limits;

    fn component() -> &'static [u8] {
        crate::builtin::UNITS[0].wasm
    }

    /// A fresh runtime (an empty in-memory cache of units), as a new
    /// process has.
    fn runtime() -> Runtime {
        Runtime::new(Limits::default()).unwrap()
    }

    fn origin(cache_dir: Option<&Path>) -> (Vec<u8>, Origin) {
        let runtime = runtime();
        let cache = CodeCache::open(&runtime, cache_dir);
        let (code, _, origin) = cache.code(&runtime, component()).unwrap();
        (code, origin)
    }

    #[test]
    fn a_second_process_reads_the_code_the_first_compiled() {
        let dir = tempfile::tempdir().unwrap();
        let (compiled, first) = origin(Some(dir.path()));
        assert_eq!(first, Origin::Compiled);
        let units = dir.path().join("units");
        let mode = std::fs::metadata(&units).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "the directory is the user's alone");
        let (read, second) = origin(Some(dir.path()));
        assert_eq!(second, Origin::Cached);
        assert_eq!(read, compiled);
    }

    #[test]
    fn code_anyone_else_may_write_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        origin(Some(dir.path()));
        let units = dir.path().join("units");
        let file = std::fs::read_dir(&units)
            .unwrap()
            .flatten()
            .find(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
            .expect("the cached code")
            .path();
        let set = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };

        set(&file, 0o666);
        assert_eq!(origin(Some(dir.path())).1, Origin::Compiled);
        // Compiling wrote it again, private.
        assert_eq!(origin(Some(dir.path())).1, Origin::Cached);

        set(&units, 0o777);
        assert_eq!(origin(Some(dir.path())).1, Origin::Compiled);
        set(&units, 0o700);
        assert_eq!(origin(Some(dir.path())).1, Origin::Cached);
    }

    #[test]
    fn without_a_directory_every_process_compiles() {
        assert_eq!(origin(None).1, Origin::Compiled);
        assert_eq!(origin(None).1, Origin::Compiled);
    }

    #[test]
    fn files_beside_the_units_are_named_after_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = runtime();
        let cache = CodeCache::open(&runtime, Some(dir.path()));
        cache.write_file("names.json", b"{}");
        assert_eq!(cache.read_file("names.json").as_deref(), Some(&b"{}"[..]));
        let engine = runtime.compatibility_hash();
        assert!(
            dir.path()
                .join(format!("units/names-{engine}.json"))
                .exists()
        );
    }
}
