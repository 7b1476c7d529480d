//! The store's schema migrations: `host/migrations/` for SQLite and its
//! PostgreSQL twin `host/migrations/postgres/` (one schema written in each
//! dialect; every change goes into both folders), embedded in the binary.
//!
//! `build.rs` lists the folders; this module turns the list into sqlx's
//! `Migrator`, computing each checksum from the file as sqlx's `migrate!`
//! macro does, so databases migrated by a build that used the macro are
//! recognised. (The macro is not used: see `build.rs` for why.)

use std::borrow::Cow;
use std::sync::LazyLock;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// One migration file, as `build.rs` found it.
pub(crate) struct EmbeddedMigration {
    pub version: i64,
    pub description: &'static str,
    pub sql: &'static str,
}

mod listing {
    use super::EmbeddedMigration;
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
}

/// The SQLite migrations.
pub(crate) static SQLITE: LazyLock<Migrator> = LazyLock::new(sqlite);

/// The PostgreSQL migrations.
pub(crate) static POSTGRES: LazyLock<Migrator> = LazyLock::new(postgres);

/// A migrator of its own over the SQLite migrations (a test may cut it
/// short to build an old database).
pub(crate) fn sqlite() -> Migrator {
    migrator(listing::SQLITE)
}

/// A migrator of its own over the PostgreSQL migrations.
pub(crate) fn postgres() -> Migrator {
    migrator(listing::POSTGRES)
}

/// sqlx's migrator over `files`, as `migrate!` would make it: simple
/// (not reversible) migrations, each in a transaction unless its first
/// line is sqlx's `-- no-transaction`.
fn migrator(files: &'static [EmbeddedMigration]) -> Migrator {
    Migrator::with_migrations(files.iter().map(migration).collect())
}

fn migration(file: &'static EmbeddedMigration) -> Migration {
    Migration::new(
        file.version,
        Cow::Borrowed(file.description),
        MigrationType::Simple,
        file.sql.into_sql_str(),
        file.sql.starts_with("-- no-transaction"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of each folder is listed, in order, with a distinct
    /// version, and SQLite's numbering has no gaps.
    #[test]
    fn the_folders_are_listed_in_version_order() {
        for (files, folder) in [
            (listing::SQLITE, "migrations"),
            (listing::POSTGRES, "migrations/postgres"),
        ] {
            let on_disk = std::fs::read_dir(folder)
                .expect("run from host/")
                .filter(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sql"))
                })
                .count();
            assert_eq!(files.len(), on_disk, "{folder}");
            assert!(
                files.windows(2).all(|w| w[0].version < w[1].version),
                "{folder}"
            );
        }
        let versions: Vec<i64> = listing::SQLITE.iter().map(|m| m.version).collect();
        assert_eq!(versions, (1..=versions.len() as i64).collect::<Vec<_>>());
        assert_eq!(listing::SQLITE[0].description, "store");
    }
}
