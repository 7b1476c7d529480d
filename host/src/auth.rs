//! Bearer tokens and roles: who may call what, how tokens are made and
//! stored, and where the first admin token comes from.
//!
//! Roles ([`Role`], defined in `crate::role` so that the store, which keeps
//! them, needs nothing from here) are ordered: a reader may only read; an
//! engine may also ask for decisions; an admin may do everything. Each
//! route declares the least role it needs (`api::access::ROUTES`).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};
use uuid::Uuid;

pub use crate::role::Role;
use crate::store::{Store, StoreError};

/// Environment variable that supplies the first admin token.
pub const ADMIN_TOKEN_ENV: &str = "SANDPIPER_ADMIN_TOKEN";

/// Random bytes in a generated token: 256 bits, so guessing one is hopeless
/// and a plain hash is a safe way to store it (see [`hash_token`]).
pub const TOKEN_BYTES: usize = 32;

/// Prefix of generated tokens, so a leaked one is recognisable in logs and
/// by secret scanners.
pub const TOKEN_PREFIX: &str = "sp_";

/// Shortest token accepted from `SANDPIPER_ADMIN_TOKEN`: tokens are stored
/// with an unsalted hash, which is only safe for secrets too long to guess.
pub const MIN_SUPPLIED_TOKEN_CHARS: usize = 32;

/// The caller of a request, once its token is verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub token_id: Uuid,
    pub name: String,
    pub role: Role,
}

/// The verified tokens of recent requests, by the sha256 of their secret,
/// so a request with a known token costs no store query.
///
/// Only unrevoked tokens found in the store are cached, so it holds at most
/// one entry per live token. Every change that can end a token's access
/// (revoking it) calls [`TokenCache::invalidate`] after its transaction
/// commits and before it answers, so a revoked token is refused from the
/// very next request. A lookup that raced with the revocation (read the
/// token from the store just before the commit) cannot put it back: entries
/// are only added while the epoch read before the store query is current.
#[derive(Default)]
pub struct TokenCache {
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    epoch: u64,
    entries: HashMap<String, Principal>,
}

impl TokenCache {
    /// The principal of a token, when a recent request verified it.
    pub fn get(&self, token_sha256: &str) -> Option<Principal> {
        self.lock().entries.get(token_sha256).cloned()
    }

    /// The current epoch; read it before querying the store and give it to
    /// [`TokenCache::insert`].
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Remembers a token verified in the store, unless the cache was
    /// invalidated since `epoch` was read.
    pub fn insert(&self, epoch: u64, token_sha256: String, principal: Principal) {
        let mut inner = self.lock();
        if inner.epoch == epoch {
            inner.entries.insert(token_sha256, principal);
        }
    }

    /// Forgets every token: one was revoked.
    pub fn invalidate(&self) {
        let mut inner = self.lock();
        inner.epoch = inner.epoch.wrapping_add(1);
        inner.entries.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A new random token.
pub fn generate_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes)?;
    let mut token = String::with_capacity(TOKEN_PREFIX.len() + 2 * TOKEN_BYTES);
    token.push_str(TOKEN_PREFIX);
    for b in bytes {
        token.push_str(&format!("{b:02x}"));
    }
    Ok(token)
}

/// The stored form of a token: its sha256, hex. A slow, salted password
/// hash is not needed because tokens are 256 random bits, not
/// human-chosen passwords: nobody can search that space, hashed or not,
/// and a fast hash keeps the per-request check cheap.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first admin token could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("could not generate a random token: {0}")]
    Random(getrandom::Error),
    #[error("could not write the admin token to {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{ADMIN_TOKEN_ENV} is too short: {chars} characters, at least {MIN_SUPPLIED_TOKEN_CHARS} needed"
    )]
    TooShort { chars: usize },
}

/// What [`bootstrap_admin`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Bootstrap {
    /// Tokens existed already and none was supplied: nothing to do.
    Existing,
    /// The supplied token was registered as an admin token (or already was).
    Supplied,
    /// A token was generated and written to this file.
    Generated(PathBuf),
}

/// Where a generated admin token is written: beside the database, named
/// after it.
pub fn admin_token_path(db_path: &Path) -> PathBuf {
    let stem = db_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sandpiper".to_owned());
    db_path.with_file_name(format!("{stem}.admin-token"))
}

/// Makes sure an admin can get in. A token from `supplied` (the
/// `SANDPIPER_ADMIN_TOKEN` variable) is registered unless it is already
/// known; otherwise, when the database has no tokens at all (a first start),
/// one is generated and written once, readable only by the owner, to
/// [`admin_token_path`].
pub async fn bootstrap_admin(
    store: &Store,
    token_path: &Path,
    supplied: Option<&str>,
) -> Result<Bootstrap, BootstrapError> {
    let mut tx = store.write().await?;
    if let Some(token) = supplied {
        let chars = token.chars().count();
        if chars < MIN_SUPPLIED_TOKEN_CHARS {
            return Err(BootstrapError::TooShort { chars });
        }
        let hash = hash_token(token);
        // A supplied token that was revoked stays revoked: the variable
        // must not undo an admin's decision on every restart.
        if !tx.token_hash_known(&hash).await? {
            tx.insert_token(Uuid::new_v4(), "bootstrap-admin", Role::Admin, &hash)
                .await?;
        }
        tx.commit().await?;
        return Ok(Bootstrap::Supplied);
    }
    if tx.count_tokens().await? > 0 {
        return Ok(Bootstrap::Existing);
    }
    let token = generate_token().map_err(BootstrapError::Random)?;
    let path = token_path.to_owned();
    write_secret(&path, &token).map_err(|source| BootstrapError::Write {
        path: path.clone(),
        source,
    })?;
    tx.insert_token(
        Uuid::new_v4(),
        "bootstrap-admin",
        Role::Admin,
        &hash_token(&token),
    )
    .await?;
    tx.commit().await?;
    Ok(Bootstrap::Generated(path))
}

/// Writes `secret` to `path` with mode 0600: to a fresh temporary file in the
/// same directory, then renamed over `path`, so the secret is never readable
/// by others, not even for a moment.
pub(crate) fn write_secret(path: &Path, secret: &str) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // 0700: the directory holds the admin token.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let tmp = path.with_extension("tmp");
    // A leftover from a crash between create and rename.
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(secret.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_long_random_and_prefixed() {
        let a = generate_token().expect("random");
        let b = generate_token().expect("random");
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 2 * TOKEN_BYTES);
    }

    #[test]
    fn roles_are_ordered_reader_engine_admin() {
        assert!(Role::Admin.allows(Role::Engine));
        assert!(Role::Engine.allows(Role::Reader));
        assert!(!Role::Reader.allows(Role::Engine));
        assert!(!Role::Engine.allows(Role::Admin));
    }

    fn principal(name: &str) -> Principal {
        Principal {
            token_id: Uuid::new_v4(),
            name: name.to_owned(),
            role: Role::Engine,
        }
    }

    #[test]
    fn the_token_cache_forgets_on_invalidation_and_refuses_stale_inserts() {
        let cache = TokenCache::default();
        let epoch = cache.epoch();
        cache.insert(epoch, "h1".to_owned(), principal("a"));
        assert_eq!(cache.get("h1").map(|p| p.name), Some("a".to_owned()));
        // A lookup that read the store before a revocation committed...
        let raced = cache.epoch();
        cache.invalidate();
        assert_eq!(cache.get("h1"), None);
        // ...cannot put the revoked token back.
        cache.insert(raced, "h1".to_owned(), principal("a"));
        assert_eq!(cache.get("h1"), None);
        cache.insert(cache.epoch(), "h2".to_owned(), principal("b"));
        assert!(cache.get("h2").is_some());
    }

    #[test]
    fn the_token_file_sits_beside_the_database() {
        assert_eq!(
            admin_token_path(Path::new("/var/lib/sandpiper/sandpiper.db")),
            Path::new("/var/lib/sandpiper/sandpiper.admin-token")
        );
    }
}
