//! The database's files on disk are private to the server's user: the
//! database holds token hashes and every decision, so it is created 0600
//! (like the admin-token file) before SQLite opens it, and an existing one
//! from an older version is tightened to 0600.
//!
//! SQLite creates the `-wal`, `-shm` and `-journal` files with the
//! permissions of the database file itself (`robust_open` copies the main
//! file's mode), so creating the database 0600 makes them 0600 too; any
//! that already exist are tightened here all the same.

use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of the database and its companion files: read and write for the
/// owner only.
pub const DB_FILE_MODE: u32 = 0o600;

/// The companion files SQLite keeps beside the database.
const COMPANIONS: &[&str] = &["-wal", "-shm", "-journal"];

/// Creates the database file at `path` with [`DB_FILE_MODE`] if it does not
/// exist, and tightens it and any companion file that does to that mode.
pub fn make_private(path: &Path) -> io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(DB_FILE_MODE)
        .open(path)
    {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    for file in
        std::iter::once(path.to_owned()).chain(COMPANIONS.iter().map(|s| companion(path, s)))
    {
        tighten(&file)?;
    }
    Ok(())
}

fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Sets `file` to [`DB_FILE_MODE`] when it exists and allows more.
fn tighten(file: &Path) -> io::Result<()> {
    let meta = match std::fs::metadata(file) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & !DB_FILE_MODE != 0 {
        tracing::warn!(file = %file.display(), mode = format!("{mode:o}"), "database file was readable by others; setting it to 0600");
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(DB_FILE_MODE))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("exists")
            .permissions()
            .mode()
            & 0o777
    }

    // SQLite only, as this module: a PostgreSQL database has no files of
    // ours to make private (the server owns them).
    #[tokio::test]
    async fn the_database_and_its_companions_are_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("s.db");
        let store = super::super::Store::open(&db).await.expect("opens");
        // A write makes SQLite create the WAL and shared-memory files.
        store.ping().await.expect("answers");
        assert_eq!(mode(&db), DB_FILE_MODE);
        for suffix in ["-wal", "-shm"] {
            let file = companion(&db, suffix);
            assert!(file.exists(), "{} missing", file.display());
            assert_eq!(mode(&file), DB_FILE_MODE, "{}", file.display());
        }
        store.close().await;
    }

    #[test]
    fn an_existing_readable_database_is_tightened() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("old.db");
        std::fs::write(&db, b"").expect("write");
        std::fs::write(companion(&db, "-journal"), b"").expect("write");
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        std::fs::set_permissions(
            companion(&db, "-journal"),
            std::fs::Permissions::from_mode(0o664),
        )
        .expect("chmod");
        make_private(&db).expect("tightens");
        assert_eq!(mode(&db), DB_FILE_MODE);
        assert_eq!(mode(&companion(&db, "-journal")), DB_FILE_MODE);
    }
}
