//! Running the real `sandpiper` binary for a test: a temporary directory
//! with its SQLite file, a random port, a known admin token, and helpers to
//! call the API and to dump the database.

pub mod http;
pub mod webdriver;

#[path = "../../common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use serde_json::Value;

pub use common::postgres;
pub use common::{
    Reply, builtin_wasm, distinct_copy, expect_status, overloaded_hosts, overloaded_vms,
    simulation_cluster, tour_hosts, unit_cache_dir,
};

/// The admin token every test server starts with (via
/// `SANDPIPER_ADMIN_TOKEN`).
pub const ADMIN_TOKEN: &str = "e2e-admin-0123456789abcdef0123456789abcdef";

/// How long a server may take to start: migrations, compiling the built-in
/// units on a first start (tens of milliseconds each), binding.
pub const START_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a stopped server may take to finish and exit.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running server.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub db: PathBuf,
    log: PathBuf,
}

impl Server {
    /// Starts a server whose data lives in `dir`.
    pub fn start(dir: &Path) -> Server {
        Server::start_with(dir, &[], &[])
    }

    /// Starts a server with extra `serve` flags and environment. A `dir`
    /// without a database gets a copy of [`template_db`], so the server
    /// does not spend its start compiling every built-in unit again.
    pub fn start_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let db = dir.join("sandpiper.db");
        if !db.exists() {
            std::fs::copy(template_db(), &db).expect("copy the template database");
        }
        Server::start_fresh(dir, args, env)
    }

    /// Starts a server on whatever `dir` holds: with no database there, a
    /// true first start (migrations, built-ins compiled, first admin token).
    pub fn start_fresh(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let db = dir.join("sandpiper.db");
        Server::start_on(db.as_os_str(), dir, args, env)
    }

    /// Starts a server on the database `db` (a file, or a PostgreSQL URL),
    /// its log in `dir`. After [`template_db`] is made: its server fills
    /// the compiled units' cache every test server reads
    /// ([`common::unit_cache_dir`]), so first starts do not all compile
    /// every built-in unit at once.
    pub fn start_on(
        db: &std::ffi::OsStr,
        dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        template_db();
        Server::spawn(db, dir, args, env)
    }

    /// Starts a server on `db` as [`Server::start_on`] does, now.
    fn spawn(db: &std::ffi::OsStr, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let log = dir.join("server.log");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("server log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_sandpiper"));
        command
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--db")
            .arg(db)
            .args(args)
            .env_remove("SANDPIPER_LOG")
            .env("SANDPIPER_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("SANDPIPER_CACHE_DIR", common::unit_cache_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("start sandpiper");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = tx.send(addr.trim().to_owned());
                }
            }
        });
        let addr = match rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => addr.parse().expect("a socket address"),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the server did not start; its log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
        };
        Server {
            child: Some(child),
            addr,
            db: PathBuf::from(db),
            log,
        }
    }

    /// A client with `token` (none: anonymous).
    pub fn client(&self, token: Option<&str>) -> Client {
        Client {
            addr: self.addr,
            token: token.map(str::to_owned),
        }
    }

    /// A client with the admin token.
    pub fn admin(&self) -> Client {
        self.client(Some(ADMIN_TOKEN))
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn stop(self) -> ExitStatus {
        self.signal_stop();
        self.wait()
    }

    /// Kills the process with SIGKILL (a crash: nothing is flushed or
    /// closed) and reaps it.
    pub fn kill(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("SIGKILL");
        let _ = child.wait();
    }

    /// Sends SIGTERM without waiting.
    pub fn signal_stop(&self) {
        terminate(self.child.as_ref().expect("running"));
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().expect("try_wait").is_none())
    }

    /// Waits for the process to exit.
    pub fn wait(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        wait_with_timeout(&mut child, STOP_TIMEOUT).unwrap_or_else(|| {
            let _ = child.kill();
            panic!("the server did not stop in time; log:\n{}", self.log())
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A database a server has started on once and stopped cleanly: migrated,
/// with every built-in unit compiled and stored, and the [`ADMIN_TOKEN`].
/// Made once per build of the binary (its name carries the binary's size
/// and modification time) under cargo's temporary directory for tests,
/// and shared by the test processes that run that build.
pub fn template_db() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let exe = Path::new(env!("CARGO_BIN_EXE_sandpiper"));
        let path = common::template_path(exe, "sandpiper-e2e");
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
        let server = Server::spawn(db.as_os_str(), work.path(), &[], &[]);
        assert!(server.stop().success(), "the template server stops cleanly");
        // Atomic: a test process running at the same time sees either no
        // template or a whole one.
        std::fs::rename(work.path().join("sandpiper.db"), &path).expect("publish the template");
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

fn terminate(child: &Child) {
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Calls the API with one token.
#[derive(Clone, Debug)]
pub struct Client {
    pub addr: SocketAddr,
    pub token: Option<String>,
}

impl Client {
    /// Sends a request with an optional body and content type.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: Option<&str>,
        extra: &[(&str, &str)],
    ) -> Reply {
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers: Vec<(&str, &str)> = extra.to_vec();
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth));
        }
        if let Some(ct) = content_type {
            headers.push(("Content-Type", ct));
        }
        http::send(self.addr, method, path, &headers, body)
    }

    pub fn get(&self, path: &str) -> Reply {
        self.send("GET", path, None, None, &[])
    }

    pub fn delete(&self, path: &str) -> Reply {
        self.send("DELETE", path, None, None, &[])
    }

    /// POSTs JSON to a server that may die meanwhile: a failed connection
    /// is an error, not a test failure.
    pub fn try_post(&self, path: &str, body: &Value) -> std::io::Result<Reply> {
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth));
        }
        http::try_send(
            self.addr,
            "POST",
            path,
            &headers,
            Some(body.to_string().into_bytes()),
        )
    }

    pub fn post(&self, path: &str, body: &Value) -> Reply {
        self.send(
            "POST",
            path,
            Some(body.to_string().into_bytes()),
            Some("application/json"),
            &[],
        )
    }

    pub fn put(&self, path: &str, body: &Value) -> Reply {
        self.send(
            "PUT",
            path,
            Some(body.to_string().into_bytes()),
            Some("application/json"),
            &[],
        )
    }

    /// POSTs raw bytes as `application/wasm`.
    pub fn post_wasm(&self, path: &str, wasm: &[u8]) -> Reply {
        self.send(
            "POST",
            path,
            Some(wasm.to_vec()),
            Some("application/wasm"),
            &[],
        )
    }
}

/// The id (as text) of the unit called `name`, looked up through the API.
pub fn unit_id(client: &Client, name: &str) -> String {
    let units = expect_status(&client.get("/api/v1/schedulingpolicyunits"), 200);
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

/// Every row of every table of the database at `db`, as text (see
/// [`common::dump`]), read while the server runs.
pub fn dump(db: &Path) -> String {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(common::dump(&sandpiper::store::Location::Sqlite(
            db.to_owned(),
        )))
}

/// `value` without what differs from run to run and is not the decision:
/// the `usage` records (time and fuel spent), and how many answers were
/// `reused` from earlier decisions (a cache, empty after a restart).
pub fn without_usage(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "usage" | "reused"))
                .map(|(k, v)| (k.clone(), without_usage(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_usage).collect()),
        other => other.clone(),
    }
}
