//! The API in process: the server's own state
//! ([`sandpiper::server::Server::build_state`]) over a fresh copy of a
//! template database (an SQLite file in a temporary directory, or with
//! `SANDPIPER_TEST_STORE=postgres` a PostgreSQL database of its own), driven through
//! [`sandpiper::server::Services::app`] with tower's `oneshot`. No socket and no server
//! process; uploads are still compiled by the real `sandpiper` binary in a
//! child process, as in production.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use clap::Parser;
use serde_json::Value;
use tower::ServiceExt;

use sandpiper::config::ServeArgs;
use sandpiper::server::Server;

#[path = "../../common/mod.rs"]
mod common;

use common::postgres;
use sandpiper::store::Location;

pub use common::{
    Reply, builtin_wasm, distinct_copy, dump, expect_status, overloaded_hosts, overloaded_vms,
    simulation_cluster, tour_hosts, unit_cache_dir,
};

/// The admin token every test state starts with (what
/// `SANDPIPER_ADMIN_TOKEN` supplies to a real server).
pub const ADMIN_TOKEN: &str = "api-admin-0123456789abcdef0123456789abcdef";

/// `sandpiper serve`'s flags, parsed as the binary parses them, so a test
/// says `--decisions-retained 2` exactly as an operator would.
#[derive(Parser)]
struct Serve {
    #[command(flatten)]
    args: ServeArgs,
}

/// The serve arguments for the database at `db` plus `flags`.
fn serve_args(db: &Location, flags: &[&str]) -> ServeArgs {
    // On PostgreSQL the state is one replica of a fleet, which must say
    // where others would forward to; in process there is no socket, and
    // no other replica.
    let (db, fleet): (&str, &[&str]) = match db {
        Location::Sqlite(path) => (path.to_str().expect("a UTF-8 temporary path"), &[]),
        Location::Postgres(url) => (url.as_str(), &["--advertise-url", "http://127.0.0.1:9"]),
    };
    // The compiled units' cache every test server shares: a first start
    // reads what an earlier one compiled.
    let cache = common::unit_cache_dir();
    let cache = cache.to_str().expect("a UTF-8 temporary path");
    let argv = ["serve", "--db", db, "--cache-dir", cache]
        .into_iter()
        .chain(fleet.iter().copied())
        .chain(flags.iter().copied());
    Serve::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("serve flags {flags:?}: {e}"))
        .args
}

/// The state the server would build over `db` with `flags`.
async fn build_state(db: &Location, flags: &[&str]) -> sandpiper::server::Services {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_sandpiper"));
    Server::build_state(&serve_args(db, flags), Some(ADMIN_TOKEN), exe, None)
        .await
        .unwrap_or_else(|e| panic!("building the server's state: {e}"))
}

/// Builds the server's state over `db` once, as a first start does
/// (migrations, every built-in unit compiled and stored, the
/// [`ADMIN_TOKEN`]), and closes it as a stopping server does (on SQLite:
/// the WAL checkpointed into the file, which is then all there is). On a
/// runtime of its own: the test that asks first is itself inside one,
/// which cannot block on another's future.
fn build_template(db: &Location) {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async {
                    let services = build_state(db, &[]).await;
                    services.state.store().close().await;
                });
            })
            .join()
            .expect("the template is built");
    });
}

/// Which store the tests run on: `SANDPIPER_TEST_STORE=postgres` (on the
/// server of `SANDPIPER_TEST_POSTGRES`, a database per test) or `sqlite`,
/// the default (a file per test). scripts/test.sh runs the suite on each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StoreKind {
    Sqlite,
    Postgres,
}

fn store_kind() -> StoreKind {
    match std::env::var("SANDPIPER_TEST_STORE").as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("" | "sqlite") => StoreKind::Sqlite,
        Ok("postgres") => StoreKind::Postgres,
        other => {
            panic!("SANDPIPER_TEST_STORE is `sqlite` (the default) or `postgres`, not {other:?}")
        }
    }
}

/// An SQLite database the server's state has been built over once, and
/// closed ([`build_template`]). Made once per build of this test binary
/// (its name carries the binary's size and modification time) under
/// cargo's temporary directory for tests, so each test copies it instead
/// of compiling every built-in unit again.
fn template_db() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary");
        let path = common::template_path(&exe, "sandpiper-api");
        if path.exists() {
            return path;
        }
        let dir = path.parent().expect("in the template dir");
        let name = path
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        let work = tempfile::tempdir_in(dir).expect("template work dir");
        let db = work.path().join("sandpiper.db");
        build_template(&Location::Sqlite(db.clone()));
        // Atomic: a test process running at the same time sees either no
        // template or a whole one.
        std::fs::rename(&db, &path).expect("publish the template");
        for entry in std::fs::read_dir(dir).expect("template dir").flatten() {
            let other = entry.file_name();
            let other = other.to_string_lossy();
            if other.starts_with("template-") && other != name.as_str() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        path
    })
}

/// What PostgreSQL templates of this suite are called: the prefix, then
/// the build of the test binary.
const POSTGRES_TEMPLATE_PREFIX: &str = "sandpiper_api_template_";

/// [`template_db`] on PostgreSQL: a database on the test server, built
/// once per build of this test binary and kept there (named after the
/// build, like the SQLite file), from which each test's database is
/// copied (`CREATE DATABASE ... TEMPLATE`). Templates of other builds are
/// dropped. A throwaway server (scripts/test.sh) takes them with it.
async fn template_postgres() -> &'static str {
    static TEMPLATE: OnceLock<String> = OnceLock::new();
    if let Some(name) = TEMPLATE.get() {
        return name;
    }
    let name = tokio::task::spawn_blocking(|| {
        TEMPLATE.get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(make_template_postgres())
        })
    })
    .await
    .expect("the template database");
    name.as_str()
}

async fn make_template_postgres() -> String {
    use sqlx::Connection as _;
    let server = postgres::server_url();
    let exe = std::env::current_exe().expect("the test binary");
    let name = format!(
        "{POSTGRES_TEMPLATE_PREFIX}{}",
        common::build_stamp(&exe).replace('-', "_")
    );
    let mut conn = sqlx::PgConnection::connect(&server)
        .await
        .expect("the test server");
    if !database_exists(&mut conn, &name).await {
        let work = postgres::TestDatabase::create().await;
        let url = work.url().to_owned();
        build_template(&Location::Postgres(url));
        // Atomic, as the SQLite file's rename: a test process running at
        // the same time sees either no template or a whole one; if one
        // published it first, ours goes.
        let rename = format!(
            "ALTER DATABASE {} RENAME TO {}",
            postgres::quote_identifier(work.name()),
            postgres::quote_identifier(&name)
        );
        let renamed = postgres::run_on_server(&server, rename).await;
        if renamed.is_ok() {
            work.keep();
        } else {
            assert!(
                database_exists(&mut conn, &name).await,
                "publishing the template: {renamed:?}"
            );
        }
    }
    let others: Vec<String> = sqlx::query_scalar(
        "SELECT datname::text FROM pg_database WHERE starts_with(datname, $1) AND datname <> $2",
    )
    .bind(POSTGRES_TEMPLATE_PREFIX)
    .bind(&name)
    .fetch_all(&mut conn)
    .await
    .expect("pg_database");
    for other in others {
        // Best effort: one of its build's tests may be copying it.
        let _ = postgres::run_on_server(
            &server,
            format!(
                "DROP DATABASE IF EXISTS {}",
                postgres::quote_identifier(&other)
            ),
        )
        .await;
    }
    let _ = conn.close().await;
    name
}

async fn database_exists(conn: &mut sqlx::PgConnection, name: &str) -> bool {
    sqlx::query_scalar::<_, i64>("SELECT count(*) FROM pg_database WHERE datname = $1")
        .bind(name)
        .fetch_one(conn)
        .await
        .expect("pg_database")
        > 0
}

/// The application over its own database.
pub struct Api {
    app: Router,
    /// The state under the router, for what Rust callers inside the
    /// server do (the operations the balance loop and pools submit).
    pub state: sandpiper::api::AppState,
    /// The database, for [`dump`].
    pub db: Location,
    // Dropped last: the store's files live here, or its database.
    _dir: Option<tempfile::TempDir>,
    _postgres: Option<postgres::TestDatabase>,
}

impl Api {
    /// The application with the server's default flags.
    pub async fn start() -> Api {
        Api::start_with(&[]).await
    }

    /// The application with `sandpiper serve` flags (`--db` is set here),
    /// on the store `SANDPIPER_TEST_STORE` names.
    pub async fn start_with(flags: &[&str]) -> Api {
        let (db, dir, database) = match store_kind() {
            StoreKind::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let db = dir.path().join("sandpiper.db");
                let template = tokio::task::spawn_blocking(template_db)
                    .await
                    .expect("the template database");
                std::fs::copy(template, &db).expect("copy the template database");
                (Location::Sqlite(db), Some(dir), None)
            }
            StoreKind::Postgres => {
                let template = template_postgres().await;
                let database = postgres::TestDatabase::create_from(Some(template)).await;
                let db = Location::Postgres(database.url().to_owned());
                (db, None, Some(database))
            }
        };
        let services = build_state(&db, flags).await;
        Api {
            app: services.app(),
            state: services.state,
            db,
            _dir: dir,
            _postgres: database,
        }
    }

    /// A client with `token` (none: anonymous).
    pub fn client(&self, token: Option<&str>) -> Client {
        Client {
            app: self.app.clone(),
            token: token.map(str::to_owned),
        }
    }

    /// A client with the admin token.
    pub fn admin(&self) -> Client {
        self.client(Some(ADMIN_TOKEN))
    }
}

/// Calls the API with one token.
#[derive(Clone)]
pub struct Client {
    app: Router,
    pub token: Option<String>,
}

impl Client {
    /// Sends a request with an optional body and content type, as the
    /// end-to-end tests' HTTP client writes it (a `Content-Length` on every
    /// request that may carry a body).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: Option<&str>,
        extra: &[(&str, &str)],
    ) -> Reply {
        let body = body.unwrap_or_default();
        let mut request = Request::builder().method(method).uri(path);
        for (k, v) in extra {
            request = request.header(*k, *v);
        }
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        if let Some(ct) = content_type {
            request = request.header("Content-Type", ct);
        }
        if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
            request = request.header("Content-Length", body.len());
        }
        let request = request.body(Body::from(body)).expect("a request");
        let response = self
            .app
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("the answer's body")
            .to_vec();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// Sends a GET and returns the response with its body unread, for
    /// streams (server-sent events).
    pub async fn open(&self, path: &str) -> axum::response::Response {
        let mut request = Request::builder().method("GET").uri(path);
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let request = request.body(Body::empty()).expect("a request");
        self.app
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible")
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, None, None, &[]).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send("DELETE", path, None, None, &[]).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send_json("POST", path, body).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Reply {
        self.send_json("PUT", path, body).await
    }

    async fn send_json(&self, method: &str, path: &str, body: &Value) -> Reply {
        let body = body.to_string().into_bytes();
        self.send(method, path, Some(body), Some("application/json"), &[])
            .await
    }

    /// POSTs raw bytes as `application/wasm`.
    pub async fn post_wasm(&self, path: &str, wasm: &[u8]) -> Reply {
        let body = Some(wasm.to_vec());
        self.send("POST", path, body, Some("application/wasm"), &[])
            .await
    }

    /// PUTs raw bytes as `application/wasm`.
    pub async fn put_wasm(&self, path: &str, wasm: &[u8]) -> Reply {
        let body = Some(wasm.to_vec());
        self.send("PUT", path, body, Some("application/wasm"), &[])
            .await
    }
}

/// The id (as text) of the policy called `name`, looked up through the API.
pub async fn policy_id(client: &Client, name: &str) -> String {
    let policies = expect_status(&client.get("/api/v1/schedulingpolicies").await, 200);
    policies
        .as_array()
        .expect("a list")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no policy named {name}"))["id"]
        .as_str()
        .expect("an id")
        .to_owned()
}

/// The id (as text) of the unit called `name`, looked up through the API.
pub async fn unit_id(client: &Client, name: &str) -> String {
    let units = expect_status(&client.get("/api/v1/schedulingpolicyunits").await, 200);
    units
        .as_array()
        .expect("a list")
        .iter()
        .find(|u| u["name"] == name)
        .unwrap_or_else(|| panic!("no unit named {name}"))["id"]
        .as_str()
        .expect("an id")
        .to_owned()
}
