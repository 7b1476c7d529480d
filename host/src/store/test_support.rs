//! For tests of the store and of placement: a database of the test's own
//! on each backend ([`backends`]: an SQLite file in a temporary directory,
//! then a fresh PostgreSQL database on the server of
//! `SANDPIPER_TEST_POSTGRES`), and a real store over it holding one
//! cluster (and the policy it must name), as placement rows refer to it.
//!
//! A test runs its body once per backend, so one test suite checks both
//! implementations of the store:
//!
//! ```ignore
//! for db in test_support::backends().await {
//!     let (store, cluster) = store_with_cluster(&db).await;
//!     ...
//! }
//! ```
//!
//! A failure names the backend it happened on (see [`TestDb`]'s `Drop`).

use uuid::Uuid;

use super::clusters::ClusterRecord;
use super::policies::PolicyRecord;
use super::{Backend, Location, Store, StoreLimits};
use crate::pipeline::{Combination, ParamValues};

/// The PostgreSQL test databases, one file shared with the HTTP test
/// suites (`tests/common/`), which use a part this one does not.
#[path = "../../../tests/common/postgres.rs"]
#[allow(dead_code)]
pub(crate) mod postgres;

/// A database for one test, removed with this value: an SQLite file in a
/// temporary directory, or a PostgreSQL database of its own.
pub struct TestDb {
    pub location: Location,
    /// What holds the data, removed when dropped: the SQLite file's
    /// directory, or the PostgreSQL database.
    _dir: Option<tempfile::TempDir>,
    _postgres: Option<postgres::TestDatabase>,
}

impl TestDb {
    /// A new SQLite file (not created yet) in a temporary directory.
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        TestDb {
            location: Location::Sqlite(dir.path().join("test.db")),
            _dir: Some(dir),
            _postgres: None,
        }
    }

    /// A new, empty PostgreSQL database; panics, saying how to get a
    /// server, when `SANDPIPER_TEST_POSTGRES` is not set.
    pub async fn postgres() -> TestDb {
        TestDb::postgres_with("").await
    }

    /// [`TestDb::postgres`] made with `options` (see
    /// `postgres::TestDatabase::create_with`).
    pub async fn postgres_with(options: &str) -> TestDb {
        let db = postgres::TestDatabase::create_with(options).await;
        TestDb {
            location: Location::Postgres(db.url().to_owned()),
            _dir: None,
            _postgres: Some(db),
        }
    }

    pub fn backend(&self) -> Backend {
        self.location.backend()
    }

    /// The store over this database, migrated, with the default limits.
    pub async fn open(&self) -> Store {
        self.open_with(StoreLimits::default()).await
    }

    /// The store over this database, migrated.
    pub async fn open_with(&self, limits: StoreLimits) -> Store {
        Store::connect(&self.location, limits)
            .await
            .unwrap_or_else(|e| panic!("the {:?} store opens: {e}", self.backend()))
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // A test's body runs once per backend, so its panic alone would
        // not say which one failed.
        if std::thread::panicking() {
            eprintln!("(the test failed on {:?})", self.backend());
        }
    }
}

/// One database on each backend, SQLite first, for a test to run its
/// body over each in turn.
pub async fn backends() -> [TestDb; 2] {
    [TestDb::sqlite(), TestDb::postgres().await]
}

/// A connection to a new SQLite database at `path` as a Sandpiper from
/// before migration `version` left it (every migration before it applied),
/// for a test of that migration to fill with old rows before opening a
/// [`Store`] over it. `foreign_keys` as the test's old rows need.
pub async fn sqlite_before_migration(
    path: &std::path::Path,
    version: i64,
    foreign_keys: bool,
) -> sqlx::SqliteConnection {
    use sqlx::Connection;

    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .foreign_keys(foreign_keys);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .expect("connect");
    let mut before = super::migrations::sqlite();
    let upto = before
        .migrations
        .iter()
        .position(|m| m.version == version)
        .unwrap_or_else(|| panic!("no migration {version}"));
    before.migrations = std::borrow::Cow::Owned(before.migrations[..upto].to_vec());
    before
        .run(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("the migrations before {version}: {e}"));
    conn
}

/// Opens a store over `db` with one cluster; returns the store and the
/// cluster's id.
pub async fn store_with_cluster(db: &TestDb) -> (Store, Uuid) {
    store_with_cluster_limited(db, StoreLimits::default()).await
}

/// [`store_with_cluster`] with connection settings of the test's choosing.
pub async fn store_with_cluster_limited(db: &TestDb, limits: StoreLimits) -> (Store, Uuid) {
    let store = db.open_with(limits).await;
    let policy = PolicyRecord {
        id: Uuid::new_v4(),
        name: "p".to_owned(),
        description: String::new(),
        locked: false,
        is_default: false,
        combination: Combination::Rank,
        params: ParamValues::new(),
        filters: Vec::new(),
        weights: Vec::new(),
        balance: None,
        created_at: String::new(),
        updated_at: String::new(),
    };
    let cluster = ClusterRecord {
        id: Uuid::new_v4(),
        name: "c".to_owned(),
        description: String::new(),
        policy_id: policy.id,
        params: ParamValues::new(),
        balance: Default::default(),
        created_at: String::new(),
        updated_at: String::new(),
    };
    let mut tx = store.write().await.expect("write");
    tx.save_policy(&policy).await.expect("policy row");
    tx.save_cluster(&cluster).await.expect("cluster row");
    tx.commit().await.expect("commit");
    (store, cluster.id)
}

#[cfg(test)]
mod tests {
    use super::postgres::database_url;

    #[test]
    fn a_database_url_names_another_database() {
        assert_eq!(
            database_url("postgres://u@h:5/postgres", "t_1"),
            "postgres://u@h:5/t_1"
        );
        assert_eq!(
            database_url("postgresql://u:p@h/db?sslmode=disable", "t_1"),
            "postgresql://u:p@h/t_1?sslmode=disable"
        );
        assert_eq!(database_url("postgres://h:5", "t_1"), "postgres://h:5/t_1");
        assert_eq!(
            database_url("postgres://h?host=/tmp", "t_1"),
            "postgres://h/t_1?host=/tmp"
        );
    }

    /// The guard drops its database.
    #[tokio::test]
    async fn a_test_database_is_dropped_with_its_guard() {
        use sqlx::Connection as _;
        let db = super::postgres::TestDatabase::create().await;
        let name = db.name().to_owned();
        let server = super::postgres::server_url();
        let exists = |name: String| {
            let server = server.clone();
            async move {
                let mut conn = sqlx::PgConnection::connect(&server).await.expect("server");
                sqlx::query_scalar::<_, i64>("SELECT count(*) FROM pg_database WHERE datname = $1")
                    .bind(name)
                    .fetch_one(&mut conn)
                    .await
                    .expect("count")
            }
        };
        let store = super::TestDb {
            location: super::Location::Postgres(db.url().to_owned()),
            _dir: None,
            _postgres: Some(db),
        };
        let opened = store.open().await;
        assert_eq!(exists(name.clone()).await, 1);
        // Still connected: WITH (FORCE) closes the connections.
        drop(store);
        assert_eq!(exists(name).await, 0);
        drop(opened);
    }
}
