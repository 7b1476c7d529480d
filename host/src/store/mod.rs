//! The SQLite store: policy units and their module blobs, scheduling
//! policies, clusters, bearer tokens and the decisions log, through sqlx.
//!
//! The store is deliberately dumb: each submodule reads and writes one group
//! of tables and checks nothing beyond what the schema enforces. The rules
//! (a unit at most once per policy, parameter keys declared, locked policies
//! read-only, ...) live with the code that composes a change, which runs the
//! whole read-check-write inside one [`Store::write`] transaction so that a
//! change is applied entirely or not at all.

pub mod clusters;
pub mod decisions;
pub mod files;
pub mod modules;
pub mod policies;
pub mod tokens;
pub mod units;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};
use uuid::Uuid;

pub use sqlx::SqliteConnection;

/// How long a statement waits for another connection's write lock before it
/// fails. Writes are short (a handful of rows, or one module blob of at most
/// the upload cap), so five seconds is only reached when something is wrong.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections in the pool. SQLite runs one writer at a time anyway; a few
/// readers let GETs and decisions proceed while an upload commits, and the
/// number stays small because each connection holds its own page cache.
pub const MAX_CONNECTIONS: u32 = 8;

/// The store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The database file could not be created or made private
    /// (`files::make_private`).
    #[error("database file: {0}")]
    File(#[from] std::io::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored value does not parse (an id that is not a UUID, a role the
    /// code does not know): the database was edited by hand or by a newer
    /// version.
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Whether the error is a uniqueness or foreign-key violation, which the
    /// callers' own checks should have prevented; the API reports it as a
    /// conflict rather than an internal error.
    pub fn is_constraint_violation(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(e)) => matches!(
                e.kind(),
                sqlx::error::ErrorKind::UniqueViolation
                    | sqlx::error::ErrorKind::ForeignKeyViolation
                    | sqlx::error::ErrorKind::CheckViolation
            ),
            _ => false,
        }
    }
}

/// The database: a pool of connections to one SQLite file in WAL mode with
/// foreign keys enforced.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
}

/// A write transaction. It takes SQLite's write lock when it begins
/// (`BEGIN IMMEDIATE`), so a read-check-write sequence inside it cannot be
/// overtaken by another writer. Dropped without [`Tx::commit`], it rolls back.
pub struct Tx {
    inner: Transaction<'static, Sqlite>,
}

impl Tx {
    pub async fn commit(self) -> Result<(), StoreError> {
        self.inner.commit().await?;
        Ok(())
    }
}

impl std::ops::Deref for Tx {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        &self.inner
    }
}

impl std::ops::DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.inner
    }
}

/// A pooled connection for reads.
pub type Conn = PoolConnection<Sqlite>;

impl Store {
    /// Opens (creating if needed) the database at `path` and applies every
    /// pending migration.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        files::make_private(path)?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL with NORMAL is durable against application crashes and
            // loses at most the last commits on power loss, which the engine
            // tolerates: it retries a decision it did not get an answer to.
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Store { pool })
    }

    /// A connection for reads.
    pub async fn read(&self) -> Result<Conn, StoreError> {
        Ok(self.pool.acquire().await?)
    }

    /// Begins a write transaction.
    pub async fn write(&self) -> Result<Tx, StoreError> {
        Ok(Tx {
            inner: self.pool.begin_with("BEGIN IMMEDIATE").await?,
        })
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Waits for every connection to be returned, checkpoints the WAL and
    /// closes the file, so a stopped server leaves a self-contained database.
    pub async fn close(&self) {
        // A failed checkpoint only leaves the WAL file beside the database,
        // which SQLite replays on the next open.
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await
        {
            tracing::warn!(error = %e, "could not checkpoint the write-ahead log");
        }
        self.pool.close().await;
    }
}

/// Parses a stored UUID.
pub(crate) fn parse_id(text: &str) -> Result<Uuid, StoreError> {
    Uuid::from_str(text).map_err(|_| StoreError::Corrupt(format!("`{text}` is not a UUID")))
}

/// Converts a stored 0/1 integer.
pub(crate) fn flag(value: i64) -> bool {
    value != 0
}
