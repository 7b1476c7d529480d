//! A fresh PostgreSQL database for one test, on the server that
//! `SANDPIPER_TEST_POSTGRES` names (`scripts/test.sh` starts one and sets
//! it): `CREATE DATABASE "t_<uuid>"`, optionally as a copy of a template,
//! dropped again when the [`TestDatabase`] guard drops.
//!
//! One file for every test that needs it, included with `#[path]` by the
//! host's own unit tests (`host/src/store/test_support.rs`) and by
//! `tests/common/mod.rs` (the `api` and `e2e` test binaries). All of them
//! are targets of the `sandpiper` package, so this file uses only that
//! package's dependencies (sqlx, uuid, tokio) and nothing of the crate
//! itself: it compiles the same inside the library and outside it.

use sqlx::{Connection as _, Executor as _, PgConnection};

/// The variable naming the test server:
/// `postgres://USER@HOST:PORT/DB` with a USER that may `CREATE DATABASE`.
pub const SERVER_VARIABLE: &str = "SANDPIPER_TEST_POSTGRES";

/// The test server's URL. There is no silent skip: a test that needs
/// PostgreSQL and finds no server fails, saying how to get one.
pub fn server_url() -> String {
    match std::env::var(SERVER_VARIABLE) {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "this test needs PostgreSQL: set {SERVER_VARIABLE}=postgres://USER@HOST:PORT/postgres \
             (USER may CREATE DATABASE) or run scripts/test.sh, which starts a throwaway server \
             (scripts/postgres-test-server.sh)"
        ),
    }
}

/// `server` (a `postgres://` URL) naming the database `name` instead of
/// its own; user, host, port and query string stay.
pub fn database_url(server: &str, name: &str) -> String {
    let (scheme, rest) = server
        .split_once("://")
        .unwrap_or_else(|| panic!("{SERVER_VARIABLE} is not a URL: {server}"));
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let query = tail.find('?').map_or("", |i| &tail[i..]);
    format!("{scheme}://{authority}/{name}{query}")
}

/// `name` as an SQL identifier.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Runs `sql` (one statement, outside a transaction: `CREATE DATABASE`
/// cannot run inside one) on the server's own database.
pub async fn run_on_server(server: &str, sql: String) -> Result<(), sqlx::Error> {
    let mut conn = PgConnection::connect(server).await?;
    let result = conn.execute(sqlx::AssertSqlSafe(sql)).await.map(drop);
    let _ = conn.close().await;
    result
}

/// [`run_on_server`] from synchronous code, even from inside an async
/// runtime (a `Drop`): on a thread of its own with a runtime of its own.
pub fn run_on_server_blocking(server: &str, sql: String) -> Result<(), sqlx::Error> {
    let server = server.to_owned();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(run_on_server(&server, sql))
    })
    .join()
    .expect("the statement's thread")
}

/// A database of the test's own on the test server, dropped (best effort,
/// `WITH (FORCE)`, so connections still open do not keep it) when this
/// is dropped, so that hundreds of tests leave nothing behind.
#[derive(Debug)]
pub struct TestDatabase {
    server: String,
    name: String,
    url: String,
}

impl TestDatabase {
    /// A new, empty database.
    pub async fn create() -> TestDatabase {
        TestDatabase::create_from(None).await
    }

    /// A new database, a copy of `template` when given (which nobody may
    /// be connected to meanwhile: PostgreSQL refuses to copy a database in
    /// use).
    pub async fn create_from(template: Option<&str>) -> TestDatabase {
        let options = template
            .map(|template| format!("TEMPLATE {}", quote_identifier(template)))
            .unwrap_or_default();
        TestDatabase::create_with(&options).await
    }

    /// A new database made with `options`, the rest of the
    /// `CREATE DATABASE name ...` statement (`TEMPLATE template0
    /// LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`).
    pub async fn create_with(options: &str) -> TestDatabase {
        let server = server_url();
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let sql = format!("CREATE DATABASE {} {options}", quote_identifier(&name));
        if let Err(e) = run_on_server(&server, sql).await {
            panic!(
                "creating a test database on {SERVER_VARIABLE}={server} (the user must be \
                 allowed to CREATE DATABASE): {e}"
            );
        }
        let url = database_url(&server, &name);
        TestDatabase { server, name, url }
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Hands the database over to the caller, who must drop it
    /// ([`drop_database`]) or keep it on purpose (a template): the guard
    /// no longer does.
    pub fn keep(self) -> String {
        let name = self.name.clone();
        std::mem::forget(self);
        name
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Err(e) = drop_database(&self.server, &self.name) {
            eprintln!("could not drop the test database {}: {e}", self.name);
        }
    }
}

/// Drops the database `name` on `server`, closing its connections first.
pub fn drop_database(server: &str, name: &str) -> Result<(), sqlx::Error> {
    run_on_server_blocking(
        server,
        format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            quote_identifier(name)
        ),
    )
}
