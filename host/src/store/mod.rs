//! The SQLite store: policy units and their module blobs, scheduling
//! policies, clusters, bearer tokens, the placement state (held
//! inventories and claims) and the decisions log, through sqlx.
//!
//! Every SQL statement of the host lives under this module, and the rest of
//! the host reaches the database only through the [`Store`] handle: a
//! cheap, cloneable value that [`Store::read`]s (a [`Conn`]), [`Store::write`]s
//! (a [`Tx`]) and queues writes to the placement state and the decisions log
//! ([`Store::submit`], [`Store::log_decision`]) for its one background writer
//! ([`writer`]). The operations themselves are methods of [`Db`], the session
//! both a `Conn` and a `Tx` dereference to, spread over one `impl Db` block
//! per group of tables (`units.rs`, `policies.rs`, `inventory.rs`, ...).
//!
//! The store is deliberately dumb: each submodule reads and writes one group
//! of tables and checks nothing beyond what the schema enforces. The rules
//! (a unit at most once per policy, parameter keys declared, locked policies
//! read-only, ...) live with the code that composes a change, which runs the
//! whole read-check-write inside one [`Store::write`] transaction so that a
//! change is applied entirely or not at all.
//!
//! **A second backend** (PostgreSQL: `sandpiper serve --db postgres://...`)
//! implements this same interface: the method signatures name only the
//! store's own types ([`StoreError`], the `*Record` and `*Row` structs, ids),
//! never a sqlx or SQLite type, so no caller changes. It adds a variant to
//! the pool inside [`Store`] and to the session inside [`Db`], a
//! `migrations/postgres/` folder beside the SQLite one, and for each method
//! the PostgreSQL statement beside the SQLite one (`$1` placeholders,
//! `ON CONFLICT` is shared, `rowid` becomes an identity column). The
//! background writer, the batching of placement writes and the retention
//! rule are backend-neutral and stay as they are.

pub mod audit;
mod checkpoint;
pub mod claims;
pub mod clusters;
pub mod decisions;
pub mod files;
pub mod fleet;
pub mod inventory;
mod migrations;
pub mod modules;
pub mod operations;
pub mod packed;
pub mod policies;
mod rows;
#[cfg(test)]
pub(crate) mod test_support;
pub mod tokens;
pub mod units;
pub mod vm_pools;
pub mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, ConnectOptions as _, Executor as _, Transaction};
use uuid::Uuid;

pub use writer::{Ack, Expected, Fence, PersistError, Rows};

/// How long a statement waits for another connection's write lock before it
/// fails. Writes are short (a handful of rows, or one module blob of at most
/// the upload cap), so five seconds is only reached when something is wrong.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections for reads and the API's write transactions, when not
/// configured. SQLite runs one writer at a time anyway; a few readers let
/// GETs proceed while an upload commits, and the number stays small
/// because each connection holds its own page cache. With the background
/// writer's own connection ([`WRITER_CONNECTIONS`]) that makes eight.
pub const DEFAULT_READ_CONNECTIONS: u32 = 7;

/// Connections of the background writer, which stores every decision and
/// claim: its own pool, so that requests holding or queueing for the
/// other connections (a flood of reads, a slow upload commit) can never
/// make a decision wait for one (issue #11: waits of up to 33 s). One is
/// enough: the writer applies one batch at a time.
pub const WRITER_CONNECTIONS: u32 = 1;

/// How long a request waits for a free connection before it gives up,
/// when not configured. A read or a transaction holds its connection for
/// milliseconds, so a wait of seconds means the pool is saturated; the
/// request is then answered 503 `database_busy` with `Retry-After`
/// ([`StoreError::Busy`]), which an engine retries, instead of hanging
/// for sqlx's default of 30 s.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// The store's connection settings (see `config` for the flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Connections for reads and the API's write transactions.
    pub read_connections: u32,
    /// How long a request waits for one of them.
    pub acquire_timeout: Duration,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            read_connections: DEFAULT_READ_CONNECTIONS,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
        }
    }
}

/// The store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// No connection came free within the acquire timeout: the database
    /// is saturated for now, and the request may be retried.
    #[error(
        "the database is busy: no connection came free within {} ms; retry shortly",
        waited.as_millis()
    )]
    Busy { waited: Duration },
    /// No connection could be opened within the acquire timeout, though
    /// the pool had room for one: the database is down or unreachable.
    #[error(
        "the database cannot be reached: no connection could be opened in {} ms",
        waited.as_millis()
    )]
    Unreachable { waited: Duration },
    /// The database file could not be created or made private
    /// (`files::make_private`).
    #[error("database file: {0}")]
    File(#[from] std::io::Error),
    /// The bytes to store (a module read from its upload's temporary
    /// file) could not be read, or were not as long as announced.
    #[error("reading the bytes to store: {0}")]
    Source(std::io::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database was migrated by a newer Sandpiper (it has migration
    /// `version`, which this build does not know): starting against it
    /// could misread or damage what the newer one stored.
    #[error(
        "the database was migrated by a newer Sandpiper (migration {version} is unknown to this \
         build); upgrade this replica, or point it at another database"
    )]
    NewerSchema { version: i64 },
    /// This replica no longer owns the cluster whose placement rows it
    /// was about to store (its lease ran out and another replica may have
    /// taken it over): nothing was stored.
    #[error("this replica no longer owns cluster {cluster_id}; retry the request")]
    NotOwner { cluster_id: Uuid },
    /// A stored value does not parse (an id that is not a UUID, a role the
    /// code does not know): the database was edited by hand or by a newer
    /// version.
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Whether the database could not be reached at all (refused or lost
    /// connection, a pool closed or timed out connecting): the request may
    /// succeed once it is back.
    pub fn is_unreachable(&self) -> bool {
        match self {
            StoreError::Unreachable { .. } => true,
            // The writer's own pool timing out: it has one connection and
            // is its only user, so it could not open one. A connection cut
            // during its handshake (a proxy in front of a database that is
            // down accepts and closes) reads as a protocol error.
            StoreError::Database(
                sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::PoolClosed
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::WorkerCrashed,
            ) => true,
            // PostgreSQL's connection exceptions (class 08) and its
            // shutting down or restarting (57P01 to 57P03).
            StoreError::Database(sqlx::Error::Database(e)) => e.code().is_some_and(|code| {
                code.starts_with("08") || matches!(code.as_ref(), "57P01" | "57P02" | "57P03")
            }),
            _ => false,
        }
    }

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

/// Where the database lives: an SQLite file (the embedded default) or a
/// PostgreSQL server, which several replicas can share (docs/fleet.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` URL.
    Postgres(String),
}

impl Location {
    /// Reads `--db`: a PostgreSQL URL, or else an SQLite file's path.
    pub fn parse(value: &str) -> Location {
        if value.starts_with("postgres://") || value.starts_with("postgresql://") {
            Location::Postgres(value.to_owned())
        } else {
            Location::Sqlite(PathBuf::from(value))
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            Location::Sqlite(_) => Backend::Sqlite,
            Location::Postgres(_) => Backend::Postgres,
        }
    }
}

impl FromStr for Location {
    type Err = std::convert::Infallible;
    fn from_str(value: &str) -> Result<Location, Self::Err> {
        Ok(Location::parse(value))
    }
}

/// Shown in logs and errors: a PostgreSQL URL without its password.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => f.write_str(&redact_password(url)),
        }
    }
}

/// `postgres://user:secret@host/db` as `postgres://user:***@host/db`.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// The SQL dialect behind a [`Store`]. Statements are written once, with
/// `$1` placeholders, in the SQL both understand; the few that differ
/// (case-insensitive names, the write lock, the WAL checkpoint) ask
/// [`Db::backend`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The advisory lock every PostgreSQL write transaction takes, the fleet's
/// twin of SQLite's one write lock: API transactions take it exclusively,
/// so a read-check-write sequence is never overtaken by another replica;
/// the background writers take it shared (`Tx` vs `writer`), so replicas
/// store decisions of their own clusters side by side. The number is
/// arbitrary, only fixed ("SNDP" in ASCII).
pub(crate) const WRITE_LOCK_KEY: i64 = 0x534E_4450;

/// The database: an SQLite file in WAL mode with foreign keys enforced, or
/// a PostgreSQL database; a pool of connections for reads and the API's
/// write transactions, and the queue to its one background writer, which
/// has a connection of its own ([`WRITER_CONNECTIONS`]).
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// How long [`Store::read`] and [`Store::write`] wait for `pool`.
    acquire_timeout: Duration,
    /// The writer's own pool, kept here only to close it.
    writer_pool: AnyPool,
    /// SQLite's background checkpointer's pool ([`checkpoint`]), kept
    /// here only to close it.
    checkpoint_pool: Option<AnyPool>,
    writer: writer::Queue,
}

/// A session with the database, read-only ([`Conn`]) or inside a write
/// transaction ([`Tx`]): every operation of the store is a method of it.
pub struct Db {
    session: Session,
    backend: Backend,
}

enum Session {
    Read(PoolConnection<Any>),
    Write(Transaction<'static, Any>),
}

impl Db {
    /// The connection underneath, for the store's own statements.
    fn conn(&mut self) -> &mut AnyConnection {
        match &mut self.session {
            Session::Read(conn) => conn,
            Session::Write(tx) => tx,
        }
    }

    /// Which dialect the statements run on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The current time as the store writes timestamps (text like
    /// `2026-11-27T05:02:44.123Z`, UTC, milliseconds), as SQL.
    pub(crate) fn now(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            Backend::Postgres => {
                "to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
            }
        }
    }

    /// `column` to `ORDER BY`, compared byte by byte (code point order, as
    /// UTF-8 is), which is SQLite's `BINARY` collation. PostgreSQL sorts
    /// text by the database's collation, which on any locale but `C`
    /// orders `B`, `_x`, `a` as `_x`, `a`, `B`: lists by name would come
    /// out in another order than on SQLite, so the statements that order
    /// by a name ask for `COLLATE "C"`, which every PostgreSQL has.
    /// (Fixed-format text, timestamps and UUIDs, sorts alike in every
    /// collation and keeps its index: it is not wrapped.)
    pub(crate) fn by_bytes(&self, column: &str) -> String {
        match self.backend {
            Backend::Sqlite => column.to_owned(),
            Backend::Postgres => format!("{column} COLLATE \"C\""),
        }
    }

    /// The id of the row of `table` (one of the store's own tables with
    /// an `id` and a case-insensitively unique `name`) called `name`.
    pub(crate) async fn id_by_name(
        &mut self,
        table: &'static str,
        name: &str,
    ) -> Result<Option<Uuid>, StoreError> {
        let sql = format!(
            "SELECT id FROM {table} WHERE {}",
            self.name_equals("name", 1)
        );
        sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .fetch_optional(self.conn())
            .await?
            .map(|id| parse_id(&id))
            .transpose()
    }

    /// `column = $n`, compared without regard to ASCII case: names are
    /// unique that way (`names.rs`), SQLite's `NOCASE` collation, an index
    /// on `lower(column)` on PostgreSQL.
    pub(crate) fn name_equals(&self, column: &str, n: usize) -> String {
        match self.backend {
            Backend::Sqlite => format!("{column} = ${n} COLLATE NOCASE"),
            Backend::Postgres => format!("lower({column}) = lower(${n})"),
        }
    }
}

/// A write transaction. It takes the database's write lock when it begins
/// (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: the `WRITE_LOCK_KEY` advisory
/// lock), so a read-check-write sequence inside it cannot be overtaken by
/// another writer, in this process or another replica. Dropped without
/// [`Tx::commit`], it rolls back.
pub struct Tx {
    db: Db,
}

impl Tx {
    pub async fn commit(self) -> Result<(), StoreError> {
        // Always a write session: only `begin` makes a `Tx`.
        if let Session::Write(tx) = self.db.session {
            tx.commit().await?;
        }
        Ok(())
    }
}

impl std::ops::Deref for Tx {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.db
    }
}

impl std::ops::DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut Db {
        &mut self.db
    }
}

/// A pooled connection for reads.
pub struct Conn {
    db: Db,
}

impl std::ops::Deref for Conn {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.db
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Db {
        &mut self.db
    }
}

/// SQLite's settings for every connection: WAL with NORMAL is durable
/// against application crashes and loses at most the last commits on
/// power loss, which the engine tolerates (it retries a decision it did
/// not get an answer to).
const SQLITE_PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
     PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;";

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` with the
    /// default [`StoreLimits`] and applies every pending migration.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_with(path, StoreLimits::default()).await
    }

    /// Opens (creating if needed) the SQLite database at `path` and
    /// applies every pending migration.
    pub async fn open_with(path: &Path, limits: StoreLimits) -> Result<Store, StoreError> {
        Store::connect(&Location::Sqlite(path.to_owned()), limits).await
    }

    /// Opens the database at `location` (an SQLite file is created if
    /// missing) and applies every pending migration. A database migrated
    /// by a newer Sandpiper is refused ([`StoreError::NewerSchema`]), and
    /// so are two replicas migrating at once: sqlx holds a PostgreSQL
    /// advisory lock while it migrates, so the second waits and then finds
    /// nothing left to do.
    pub async fn connect(location: &Location, limits: StoreLimits) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = location.backend();
        let options = match location {
            Location::Sqlite(path) => {
                files::make_private(path)?;
                AnyConnectOptions::from_str(&sqlite_url(path))?
            }
            Location::Postgres(url) => AnyConnectOptions::from_str(url)?,
        }
        .disable_statement_logging();
        let pool = pool_options(backend, None)
            .max_connections(limits.read_connections.max(1))
            .acquire_timeout(limits.acquire_timeout)
            .connect_with(options.clone())
            .await?;
        let migrator = match backend {
            Backend::Sqlite => &*migrations::SQLITE,
            Backend::Postgres => &*migrations::POSTGRES,
        };
        migrator.run(&pool).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::VersionMissing(version) => {
                StoreError::NewerSchema { version }
            }
            e => StoreError::Migrate(e),
        })?;
        // Opened after the migrations, so it never sees an old schema; and
        // kept open (`min_connections`), so the writer never waits to
        // connect while decisions wait for it.
        let writer_pool = pool_options(backend, Some(checkpoint::WRITER_AUTOCHECKPOINT_PAGES))
            .max_connections(WRITER_CONNECTIONS)
            .min_connections(WRITER_CONNECTIONS)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await?;
        let checkpoint_pool = match backend {
            Backend::Sqlite => Some(
                pool_options(backend, None)
                    .max_connections(1)
                    .connect_with(options)
                    .await?,
            ),
            Backend::Postgres => None,
        };
        let checkpointer = checkpoint_pool.clone().map(checkpoint::Checkpointer::start);
        let writer = writer::Queue::start(writer_pool.clone(), backend, checkpointer);
        Ok(Store {
            pool,
            backend,
            acquire_timeout: limits.acquire_timeout,
            writer_pool,
            checkpoint_pool,
            writer,
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A pool error, with a timed-out acquire as [`StoreError::Busy`] when
    /// every connection was in use, or [`StoreError::Unreachable`] when the
    /// pool could not even open one (the database is down).
    fn acquire_error(&self, e: sqlx::Error) -> StoreError {
        match e {
            sqlx::Error::PoolTimedOut
                if self.pool.size() < self.pool.options().get_max_connections() =>
            {
                StoreError::Unreachable {
                    waited: self.acquire_timeout,
                }
            }
            sqlx::Error::PoolTimedOut => StoreError::Busy {
                waited: self.acquire_timeout,
            },
            e => StoreError::Database(e),
        }
    }

    /// A connection for reads.
    pub async fn read(&self) -> Result<Conn, StoreError> {
        Ok(Conn {
            db: Db {
                session: Session::Read(
                    self.pool
                        .acquire()
                        .await
                        .map_err(|e| self.acquire_error(e))?,
                ),
                backend: self.backend,
            },
        })
    }

    /// Begins a write transaction.
    pub async fn write(&self) -> Result<Tx, StoreError> {
        begin(&self.pool, self.backend, LockMode::Exclusive)
            .await
            .map_err(|e| match e {
                StoreError::Database(e) => self.acquire_error(e),
                e => e,
            })
    }

    /// Begins a write transaction that changes one cluster's state kept
    /// in memory by its owner (its operations): with several replicas,
    /// it holds the cluster's lease row under this replica's epoch for
    /// its length, or fails with [`StoreError::NotOwner`], as the writer
    /// does for placement rows ([`writer::Fence`]).
    pub async fn write_for(&self, cluster_id: Uuid) -> Result<Tx, StoreError> {
        let mut tx = self.write().await?;
        let Some(fence) = self.writer.fence() else {
            return Ok(tx);
        };
        let held = match fence.epoch(cluster_id) {
            Some(epoch) => {
                tx.holds_cluster(cluster_id, fence.replica_id(), epoch)
                    .await?
            }
            None => false,
        };
        // A cluster that does not exist is the caller's to report.
        if held || tx.cluster(cluster_id).await?.is_none() {
            Ok(tx)
        } else {
            Err(StoreError::NotOwner { cluster_id })
        }
    }

    /// Queues `rows` for the background writer, which stores them (with
    /// whatever else is queued) in one transaction, in the order queued.
    pub fn submit(&self, rows: impl Rows) -> Ack {
        self.writer.submit(Box::new(rows))
    }

    /// Says a job is on its way to [`Store::submit`]: a batch the writer
    /// takes meanwhile waits for it (up to [`writer::COMMIT_DELAY`]) and
    /// commits both together. Drop the guard once the job is queued, or
    /// when none will be.
    pub fn expect(&self) -> Expected {
        self.writer.expect()
    }

    /// Waits until every job queued before this call is stored (or has
    /// failed): the writer applies jobs in the order queued.
    pub async fn flush(&self) -> Result<(), PersistError> {
        self.submit(writer::Nothing).wait().await
    }

    /// Logs one decision through the background writer, its cluster's log
    /// kept to `retention`, and waits until it is stored.
    pub async fn log_decision(
        &self,
        decision: decisions::LoggedDecision,
        retention: decisions::Retention,
    ) -> Result<(), PersistError> {
        self.submit((decision, retention)).wait().await
    }

    /// Sets the decisions log's byte budget (the whole log, every
    /// cluster's; `decisions::DEFAULT_LOG_MAX_BYTES` until set): the
    /// store's writer keeps the log within it from its next decision on.
    pub fn set_decision_log_budget(&self, max_bytes: u64) {
        self.writer.set_max_log_bytes(max_bytes);
    }

    /// Makes the background writer store a cluster's placement rows only
    /// while `fence` says this replica owns it ([`writer::Fence`]).
    pub fn set_fence(&self, fence: std::sync::Arc<dyn writer::Fence>) {
        self.writer.set_fence(fence);
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(|e| self.acquire_error(e))?;
        Ok(())
    }

    /// Waits for every connection to be returned, checkpoints SQLite's
    /// WAL and closes the database, so a stopped server leaves a
    /// self-contained file.
    pub async fn close(&self) {
        // First, so no background checkpoint runs beside the last one.
        if let Some(pool) = &self.checkpoint_pool {
            pool.close().await;
        }
        // A failed checkpoint only leaves the WAL file beside the database,
        // which SQLite replays on the next open.
        if self.backend == Backend::Sqlite
            && let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&self.pool)
                .await
        {
            tracing::warn!(error = %e, "could not checkpoint the write-ahead log");
        }
        self.pool.close().await;
        // The writer's connection last: by now the requests that queued to
        // it have answered (or the shutdown grace period ran out, as for
        // every other connection).
        self.writer_pool.close().await;
    }
}

/// Pool settings per dialect: SQLite's pragmas on every new connection,
/// with `autocheckpoint` as its `wal_autocheckpoint` if given. An SQLite
/// connection is a file opened in this process, which cannot go stale
/// while pooled, so it is not pinged before each use (a round trip to
/// SQLite's thread: ~50 µs of every decision's acknowledgement).
fn pool_options(backend: Backend, autocheckpoint: Option<u32>) -> AnyPoolOptions {
    let options = AnyPoolOptions::new();
    match backend {
        Backend::Sqlite => options
            .test_before_acquire(false)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    conn.execute(SQLITE_PRAGMAS).await?;
                    if let Some(pages) = autocheckpoint {
                        conn.execute(sqlx::AssertSqlSafe(format!(
                            "PRAGMA wal_autocheckpoint = {pages}"
                        )))
                        .await?;
                    }
                    Ok(())
                })
            }),
        Backend::Postgres => options,
    }
}

/// `sqlite://PATH?mode=rwc`, the path percent-encoded (sqlx decodes it).
fn sqlite_url(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut url = String::from("sqlite://");
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/._-".contains(&byte) {
            url.push(char::from(byte));
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url.push_str("?mode=rwc");
    url
}

/// How a write transaction holds the write lock on PostgreSQL (SQLite has
/// one mode: `BEGIN IMMEDIATE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockMode {
    /// The API's read-check-write transactions: one at a time, fleet-wide.
    Exclusive,
    /// The background writers' batches: side by side, but never beside an
    /// exclusive one.
    Shared,
}

/// Begins a write transaction (see [`Tx`]).
async fn begin(pool: &AnyPool, backend: Backend, mode: LockMode) -> Result<Tx, StoreError> {
    let mut tx = match backend {
        Backend::Sqlite => pool.begin_with("BEGIN IMMEDIATE").await?,
        Backend::Postgres => pool.begin().await?,
    };
    if backend == Backend::Postgres {
        let lock = match mode {
            LockMode::Exclusive => "SELECT pg_advisory_xact_lock($1)",
            LockMode::Shared => "SELECT pg_advisory_xact_lock_shared($1)",
        };
        sqlx::query(lock)
            .bind(WRITE_LOCK_KEY)
            .execute(&mut *tx)
            .await?;
    }
    Ok(Tx {
        db: Db {
            session: Session::Write(tx),
            backend,
        },
    })
}

/// Rows per multi-row statement: one statement per kind of row per batch
/// instead of one per row (each is a round trip to SQLite's thread), while
/// staying far under SQLite's 32,766-variable limit.
pub(crate) const ROWS_PER_STATEMENT: usize = 200;

/// `($f, $f+1, ...), (...)` with `columns` numbered placeholders per row,
/// `rows` times, comma-separated, numbered from `first` on (the statement's
/// placeholders before them are `$1` to `$first-1`).
pub(crate) fn placeholders(first: usize, rows: usize, columns: usize) -> String {
    (0..rows)
        .map(|row| {
            let cells: Vec<String> = (0..columns)
                .map(|column| format!("${}", first + row * columns + column))
                .collect();
            format!("({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `$first, $first+1, ...`: `count` numbered placeholders for an `IN (...)`
/// list.
pub(crate) fn list(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A stored generation, which SQLite keeps as a signed integer.
pub(crate) fn generation(value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Corrupt(format!("generation {value} too large")))
}

/// A stored unsigned number (generation, milliseconds) read back; a
/// negative one (never written) reads as 0.
pub(crate) fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Parses a stored UUID.
pub(crate) fn parse_id(text: &str) -> Result<Uuid, StoreError> {
    Uuid::from_str(text).map_err(|_| StoreError::Corrupt(format!("`{text}` is not a UUID")))
}

/// Converts a stored 0/1 integer.
pub(crate) fn flag(value: i64) -> bool {
    value != 0
}

#[cfg(test)]
mod tests {
    use super::writer::Batch;
    use super::*;

    /// Two connections for reads, given up on after a short wait.
    const LIMITS: StoreLimits = StoreLimits {
        read_connections: 2,
        acquire_timeout: Duration::from_millis(300),
    };

    /// A placement-state write, as a decision queues one.
    struct Generations(Uuid);

    impl Rows for Generations {
        fn add_to(&self, batch: &mut Batch) -> Result<(), StoreError> {
            batch.set_generations(self.0, 1, 1);
            Ok(())
        }
    }

    #[tokio::test]
    async fn decisions_are_stored_while_every_read_connection_is_held() {
        for db in test_support::backends().await {
            let (store, cluster) = test_support::store_with_cluster_limited(&db, LIMITS).await;
            let held = [
                store.read().await.expect("first read"),
                store.read().await.expect("second read"),
            ];
            // Bounded only so that a regression fails instead of hanging: with
            // one shared pool the writer waits for a read connection and gives
            // up after the acquire timeout.
            let stored = tokio::time::timeout(
                Duration::from_secs(30),
                store.submit(Generations(cluster)).wait(),
            )
            .await;
            assert!(matches!(stored, Ok(Ok(()))), "{stored:?}");
            drop(held);
        }
    }

    #[tokio::test]
    async fn a_database_migrated_by_a_newer_sandpiper_is_refused() {
        for db in test_support::backends().await {
            let store = db.open().await;
            sqlx::query(
                "INSERT INTO _sqlx_migrations \
                 (version, description, success, checksum, execution_time) \
                 VALUES (9999, 'from a newer sandpiper', TRUE, $1, 0)",
            )
            .bind(vec![0u8])
            .execute(store.read().await.expect("read").conn())
            .await
            .expect("a migration this build does not have");
            store.close().await;
            let refused = Store::connect(&db.location, StoreLimits::default())
                .await
                .err();
            assert!(
                matches!(refused, Some(StoreError::NewerSchema { version: 9999 })),
                "{refused:?}"
            );
        }
    }

    /// Connections to PostgreSQL are encrypted, and the server verified,
    /// when the URL asks (`sslmode=verify-full` with `sslrootcert`): here
    /// the test server's own certificate (scripts/postgres-test-server.sh).
    /// Without that root, the same server is refused.
    #[tokio::test]
    async fn a_postgres_store_connects_over_verified_tls() {
        let db = test_support::TestDb::postgres().await;
        let Location::Postgres(url) = &db.location else {
            unreachable!("a PostgreSQL database");
        };
        let ca = std::env::var("SANDPIPER_TEST_POSTGRES_CA").expect(
            "SANDPIPER_TEST_POSTGRES_CA names the test server's TLS certificate \
             (scripts/test.sh sets it with the server it starts)",
        );
        let with = |params: &str| {
            let separator = if url.contains('?') { '&' } else { '?' };
            Location::Postgres(format!("{url}{separator}{params}"))
        };
        let verified = with(&format!("sslmode=verify-full&sslrootcert={ca}"));
        let store = Store::connect(&verified, StoreLimits::default())
            .await
            .expect("connects over verified TLS");
        let ssl: bool =
            sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                .fetch_one(store.read().await.expect("read").conn())
                .await
                .expect("pg_stat_ssl");
        assert!(ssl, "the connection is encrypted");
        let unverified = Store::connect(&with("sslmode=verify-full"), StoreLimits::default()).await;
        assert!(
            unverified.is_err(),
            "a certificate no root vouches for is refused"
        );
    }

    /// Replicas started at once on an empty PostgreSQL database: one
    /// migrates while the others wait (sqlx's advisory lock), then find
    /// nothing left to do.
    #[tokio::test]
    async fn replicas_migrating_at_once_all_start_on_one_schema() {
        let db = test_support::TestDb::postgres().await;
        let opened = futures_join_all((0..4).map(|_| {
            let location = db.location.clone();
            async move { Store::connect(&location, StoreLimits::default()).await }
        }))
        .await;
        for store in &opened {
            assert!(store.is_ok(), "{:?}", store.as_ref().err());
        }
        let store = opened.into_iter().next().expect("a store").expect("opened");
        let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
            .fetch_one(store.read().await.expect("read").conn())
            .await
            .expect("count");
        assert_eq!(applied as usize, migrations::POSTGRES.iter().count());
    }

    /// Awaits every future, side by side.
    async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handles: Vec<_> = futures.map(tokio::spawn).collect();
        let mut out = Vec::new();
        for handle in handles {
            out.push(handle.await.expect("task"));
        }
        out
    }

    #[tokio::test]
    async fn a_request_finding_no_free_connection_gives_up_busy() {
        for db in test_support::backends().await {
            let (store, _) = test_support::store_with_cluster_limited(&db, LIMITS).await;
            let held = [
                store.read().await.expect("first read"),
                store.read().await.expect("second read"),
            ];
            let busy = |e: Option<StoreError>| matches!(e, Some(StoreError::Busy { waited }) if waited == LIMITS.acquire_timeout);
            assert!(busy(store.read().await.err()), "a read");
            assert!(busy(store.write().await.err()), "a write transaction");
            drop(held);
            store.read().await.expect("a connection came free");
        }
    }
}
