//! What the two HTTP suites share: the answer they check, the dump of the
//! store they compare (SQLite or PostgreSQL), a PostgreSQL database per
//! test, real units' bytes to upload and the README tour's
//! hosts. `tests/api` (in process, through `app()`) and `tests/e2e` (the
//! real binary) both include this file, so an assertion reads the same in
//! either.

use std::path::Path;

use sandpiper::store::Location;
use serde_json::{Value, json};

/// A fresh PostgreSQL database per test (shared with the host's own
/// tests, `host/src/store/test_support.rs`). Not every binary that
/// includes this file uses all of it (`e2e` runs on SQLite only).
#[path = "postgres.rs"]
#[allow(dead_code)]
pub mod postgres;

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON (`Null` when empty).
    pub fn json(&self) -> Value {
        if self.body.is_empty() {
            return Value::Null;
        }
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// `error.code` of an error body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("not an error body: {}", String::from_utf8_lossy(&self.body)))
            .to_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Asserts a status, showing the body when it differs.
#[track_caller]
pub fn expect_status(reply: &Reply, status: u16) -> Value {
    assert_eq!(
        reply.status,
        status,
        "unexpected status; body: {}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()
}

/// The README tour's three hosts: `small` has too little free memory for
/// the tour's VM (4 GiB), and too few cores for a 24-vCPU one, as has `mid`.
pub fn tour_hosts() -> Value {
    serde_json::from_str(include_str!("tour_hosts.json")).expect("tour_hosts.json is JSON")
}

/// Three hosts with every figure the built-in policies' filters read;
/// `hot` has been over 90 % CPU for five minutes and runs the three VMs of
/// [`overloaded_vms`]: what oVirt's load balancers move a VM off.
pub fn overloaded_hosts() -> Value {
    let host = |id: &str, usage: f64, minutes: f64, vms: f64| {
        json!({
            "id": id,
            "address": format!("{id}.example.com"),
            "metrics": {
                "cpu_sockets": 2, "cpu_cores": 16, "cpu_threads": 32,
                "cpu_usage_percent": usage, "cpu_overloaded_minutes": minutes,
                "memory_total_mib": 65536, "memory_free_mib": 49152,
                "memory_committed_mib": 8192,
                "disk_total_gib": 1000, "disk_free_gib": 800,
                "vm_count": vms, "vcpus_used": vms * 2.0,
            }
        })
    };
    json!([
        host("hot", 95.0, 5.0, 3.0),
        host("cool", 10.0, 0.0, 0.0),
        host("warm", 40.0, 0.0, 0.0),
    ])
}

/// The VMs on [`overloaded_hosts`]' `hot` host; `v2` uses the least CPU.
pub fn overloaded_vms() -> Value {
    let vm = |id: &str, usage: f64| {
        json!({ "id": id, "host": "hot", "memory_mib": 2048, "vcpus": 2,
                "cpu_usage_percent": usage, "migratable": true })
    };
    json!([vm("v1", 90.0), vm("v2", 20.0), vm("v3", 50.0)])
}

/// The simulator tests' cluster (`tests/e2e/simulate.rs`,
/// `tests/api/simulations.rs`): twenty hosts of 32 cores (64 threads) and
/// 256 GiB, empty and idle, as a snapshot.
pub fn simulation_cluster() -> Value {
    let hosts: Vec<Value> = (1..=20)
        .map(|i| {
            json!({
                "id": format!("h{i:02}"),
                "metrics": {
                    "cpu_sockets": 2, "cpu_cores": 32, "cpu_threads": 64,
                    "memory_total_mib": 262144, "memory_free_mib": 262144,
                    "cpu_usage_percent": 2
                }
            })
        })
        .collect();
    json!({"hosts": hosts, "vms": []})
}

/// The component of the built-in unit in `policies/<dir>`, as embedded in
/// the binary: a real unit built from source, to upload under another name.
pub fn builtin_wasm(dir: &str) -> &'static [u8] {
    sandpiper::builtin::UNITS
        .iter()
        .find(|u| u.name == dir)
        .unwrap_or_else(|| panic!("no built-in unit in policies/{dir}"))
        .wasm
}

/// `wasm` with a custom section named `tag` appended: the same unit, but
/// other bytes (another sha256), so the server has not compiled it yet.
pub fn distinct_copy(wasm: &[u8], tag: &str) -> Vec<u8> {
    assert!(tag.len() < 100, "one-byte LEB128 lengths only");
    let mut out = wasm.to_vec();
    out.push(0); // custom section id
    out.push(u8::try_from(tag.len() + 1).expect("short")); // section size
    out.push(u8::try_from(tag.len()).expect("short")); // name length
    out.extend_from_slice(tag.as_bytes());
    out
}

/// Every row of every table of the database at `db`, as text, in a fixed
/// order: two dumps of one database are equal exactly when the stored
/// data is. Blobs are written as their length (their identity is the
/// row's sha256 key). The audit log is left out: it records every admin
/// request, refused ones included, which is what the "nothing changed"
/// checks send; its own tests (`tests/api/audit.rs`) read it through the
/// API. So are the database's own tables (SQLite's `sqlite_*`, sqlx's
/// `_sqlx_migrations` on PostgreSQL) and the fleet's bookkeeping on
/// PostgreSQL (`cluster_owners`, and `config_generation`, which every
/// admin change raises).
///
/// Rows are in insertion order (SQLite's rowid, PostgreSQL's `rowid`
/// identity column, else the primary key), and the rowid itself is not
/// shown on either backend: a row deleted and written again the same is
/// the same data.
pub async fn dump(db: &Location) -> String {
    match db {
        Location::Sqlite(path) => dump_sqlite(path).await,
        Location::Postgres(url) => dump_postgres(url).await,
    }
}

async fn dump_sqlite(db: &Path) -> String {
    use sqlx::{Connection, Row};
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .read_only(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .expect("open the database");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         AND name <> 'audit_log' ORDER BY name",
    )
    .fetch_all(&mut conn)
    .await
    .expect("tables");
    let mut out = String::new();
    for table in tables {
        let columns: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT name, type FROM pragma_table_info('{table}') ORDER BY cid"
        )))
        .fetch_all(&mut conn)
        .await
        .expect("columns");
        let select: Vec<String> = columns
            .iter()
            .map(|(name, ty)| {
                if ty.eq_ignore_ascii_case("BLOB") {
                    format!("'<' || length(\"{name}\") || ' bytes>'")
                } else {
                    format!("quote(\"{name}\")")
                }
            })
            .collect();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM \"{table}\" ORDER BY rowid",
            select.join(", ")
        )))
        .fetch_all(&mut conn)
        .await
        .expect("rows");
        out.push_str(&format!("== {table}\n"));
        for row in rows {
            let values: Vec<String> = (0..columns.len())
                .map(|i| row.try_get::<String, _>(i).unwrap_or_default())
                .collect();
            out.push_str(&values.join(" | "));
            out.push('\n');
        }
    }
    out
}

/// [`dump`] of a PostgreSQL database, the tables and columns read from the
/// catalog: text quoted as SQLite's `quote()` does, numbers bare, `NULL`.
async fn dump_postgres(url: &str) -> String {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("connect to the database");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind = 'r' \
         AND c.relname NOT IN ('_sqlx_migrations', 'audit_log', 'cluster_owners', \
         'config_generation') ORDER BY c.relname COLLATE \"C\"",
    )
    .fetch_all(&mut conn)
    .await
    .expect("tables");
    let mut out = String::new();
    for table in tables {
        let columns: Vec<(String, String)> = sqlx::query_as(
            "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = to_regclass(quote_ident($1)) AND attnum > 0 AND NOT attisdropped \
             ORDER BY attnum",
        )
        .bind(&table)
        .fetch_all(&mut conn)
        .await
        .expect("columns");
        let order: Vec<String> = if columns.iter().any(|(name, _)| name == "rowid") {
            vec!["rowid".to_owned()]
        } else {
            sqlx::query_scalar(
                "SELECT a.attname::text FROM pg_index i \
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey) \
                 WHERE i.indrelid = to_regclass(quote_ident($1)) AND i.indisprimary \
                 ORDER BY array_position(i.indkey::int2[], a.attnum)",
            )
            .bind(&table)
            .fetch_all(&mut conn)
            .await
            .expect("primary key")
        };
        assert!(!order.is_empty(), "{table} has neither a rowid nor a key");
        let shown: Vec<&(String, String)> =
            columns.iter().filter(|(name, _)| name != "rowid").collect();
        let select: Vec<String> = shown
            .iter()
            .map(|(name, ty)| match ty.as_str() {
                "bytea" => format!("'<' || length(\"{name}\") || ' bytes>'"),
                "text" => format!("quote_nullable(\"{name}\")"),
                _ => format!("coalesce(\"{name}\"::text, 'NULL')"),
            })
            .collect();
        let order: Vec<String> = order.iter().map(|c| format!("\"{c}\"")).collect();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM \"{table}\" ORDER BY {}",
            select.join(", "),
            order.join(", ")
        )))
        .fetch_all(&mut conn)
        .await
        .expect("rows");
        out.push_str(&format!("== {table}\n"));
        for row in rows {
            let values: Vec<String> = (0..shown.len())
                .map(|i| row.try_get::<String, _>(i).unwrap_or_default())
                .collect();
            out.push_str(&values.join(" | "));
            out.push('\n');
        }
    }
    let _ = conn.close().await;
    out
}

/// The binary's build as text (its size and modification time): what a
/// template made by one build is named after, so a rebuild makes a new
/// one and the test processes of one build share it.
pub fn build_stamp(binary: &Path) -> String {
    let meta = std::fs::metadata(binary).expect("the binary's metadata");
    let built = meta
        .modified()
        .expect("mtime")
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos();
    format!("{}-{built}", meta.len())
}

/// Where the template database made by one build of `binary` lives, under
/// `dir` in cargo's temporary directory for tests: its name carries the
/// binary's size and modification time, so a rebuild makes a new one and
/// the test processes of one build share it.
pub fn template_path(binary: &Path, dir: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).expect("template dir");
    dir.join(format!("template-{}.db", build_stamp(binary)))
}

/// The compiled built-in units every test server and command of this
/// build shares (`SANDPIPER_CACHE_DIR`, `--cache-dir`), under cargo's
/// temporary directory for tests: the first start compiles them, and every
/// later first start, in any test binary, reads them from there instead of
/// compiling them all again (half a minute of CPU each on CI). Made `0700`,
/// as the server requires of a cache it reads code from.
pub fn unit_cache_dir() -> std::path::PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sandpiper-unit-cache");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .expect("the unit cache directory");
    dir
}
