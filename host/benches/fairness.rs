//! One cluster's storm must not take the others down (issue #11): the real
//! `sandpiper` binary, an honest client deciding on cluster A alone, then
//! the same client while 64 clients storm cluster B, whose filter (the
//! hostile test unit in `loop` mode) runs out of fuel on every call. The
//! honest client's p99 latency in both runs, and their ratio, come from
//! the same process on the same server.
//!
//! Run with: `cargo bench --bench fairness` (figures in
//! docs/performance.md). Prints
//! `fairness honest_p99_ms=... with_storm_p99_ms=... ratio=... storm_decisions=... storm_busy=...`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

/// Clients storming cluster B, as in the issue.
const STORM_CLIENTS: usize = 64;
/// Hosts in each storm request: the hostile filter's fuel budget grows with
/// them (~20 M + 150 k per host), so each call spins ~10-40 ms.
const STORM_HOSTS: usize = 200;
/// Hosts in each honest request (the default policy `none`).
const HONEST_HOSTS: usize = 100;
/// Honest decisions timed in each run.
const HONEST_DECISIONS: usize = 300;
/// Untimed honest decisions first, so units and connections are warm.
const WARMUP: usize = 30;
/// How long the storm runs before the honest client starts timing.
const STORM_RAMP: Duration = Duration::from_secs(2);
/// How long the server may take to start (compiling built-in units).
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// The admin token the bench server starts with.
const TOKEN: &str = "bench-admin-0123456789abcdef0123456789abcdef";

fn main() -> anyhow::Result<()> {
    let hostile = build_hostile()?;
    let dir = tempfile::tempdir().context("temp dir")?;
    let mut server = Server::start(&dir.path().join("bench.db"))?;
    let result = run(server.addr, &hostile);
    server.stop();
    result
}

fn run(addr: SocketAddr, hostile: &[u8]) -> anyhow::Result<()> {
    let mut admin = Client::connect(addr)?;
    let honest = admin.ok("POST", "/api/v1/clusters", &json!({ "name": "honest" }))?;
    let honest = format!("/api/v1/clusters/{}/schedule", id(&honest)?);
    let storm_policy = storm_policy(&mut admin, addr, hostile)?;
    let storm = admin.ok(
        "POST",
        "/api/v1/clusters",
        &json!({ "name": "storm", "scheduling_policy": { "id": storm_policy } }),
    )?;
    let storm = format!("/api/v1/clusters/{}/schedule", id(&storm)?);

    let honest_body = serde_json::to_vec(&body("honest", HONEST_HOSTS))?;
    let mut client = Client::connect(addr)?;
    for _ in 0..WARMUP {
        client.expect(&honest, &honest_body, 200)?;
    }
    let alone = time(&mut client, &honest, &honest_body)?;

    let stop = Arc::new(AtomicBool::new(false));
    let decided = Arc::new(AtomicUsize::new(0));
    let busy = Arc::new(AtomicUsize::new(0));
    let storm_body = Arc::new(serde_json::to_vec(&body("storm", STORM_HOSTS))?);
    let stormers: Vec<_> = (0..STORM_CLIENTS)
        .map(|_| {
            let (stop, decided, busy) = (stop.clone(), decided.clone(), busy.clone());
            let (path, body) = (storm.clone(), storm_body.clone());
            std::thread::spawn(move || -> anyhow::Result<()> {
                let mut client = Client::connect(addr)?;
                while !stop.load(Ordering::Relaxed) {
                    // A busy cluster is answered before its body is read and
                    // the connection closed: such a client reconnects, as an
                    // engine honouring `Retry-After` would (without waiting,
                    // to keep the storm at full pressure).
                    match client.request("POST", &path, &body) {
                        // The hostile filter is fail-closed: every decision
                        // fails with filter_failed once it has spun.
                        Ok((422, _)) => {
                            decided.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok((503, _)) | Err(_) => {
                            busy.fetch_add(1, Ordering::Relaxed);
                            client = Client::connect(addr)?;
                        }
                        Ok((code, _)) => bail!("storm request answered {code}"),
                    }
                }
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(STORM_RAMP);
    let stormed = time(&mut client, &honest, &honest_body);
    stop.store(true, Ordering::Relaxed);
    for stormer in stormers {
        stormer
            .join()
            .map_err(|_| anyhow::anyhow!("a storm client panicked"))??;
    }
    let stormed = stormed?;
    ensure!(
        decided.load(Ordering::Relaxed) > 0,
        "the storm made no decision"
    );
    let (p99_alone, p99_stormed) = (percentile(&alone, 99.0), percentile(&stormed, 99.0));
    println!(
        "fairness honest_p50_ms={:.2} honest_p99_ms={p99_alone:.2} with_storm_p50_ms={:.2} \
         with_storm_p99_ms={p99_stormed:.2} ratio={:.2} storm_clients={STORM_CLIENTS} \
         storm_decisions={} storm_busy={}",
        percentile(&alone, 50.0),
        percentile(&stormed, 50.0),
        p99_stormed / p99_alone,
        decided.load(Ordering::Relaxed),
        busy.load(Ordering::Relaxed),
    );
    Ok(())
}

/// Times `HONEST_DECISIONS` decisions one after another, milliseconds.
fn time(client: &mut Client, path: &str, body: &[u8]) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(HONEST_DECISIONS);
    for _ in 0..HONEST_DECISIONS {
        let started = Instant::now();
        client.expect(path, body, 200)?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(times)
}

fn percentile(times: &[f64], p: f64) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn id(value: &Value) -> anyhow::Result<&str> {
    value["id"].as_str().context("an id")
}

/// A policy whose only filter is the hostile unit spinning until its fuel
/// runs out.
fn storm_policy(admin: &mut Client, addr: SocketAddr, hostile: &[u8]) -> anyhow::Result<String> {
    let mut upload = TcpStream::connect(addr)?;
    let head = format!(
        "POST /api/v1/schedulingpolicyunits?name=Hostile HTTP/1.1\r\nHost: {addr}\r\n\
         Authorization: Bearer {TOKEN}\r\nContent-Type: application/wasm\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        hostile.len()
    );
    upload.write_all(head.as_bytes())?;
    upload.write_all(hostile)?;
    let mut reply = String::new();
    upload.read_to_string(&mut reply)?;
    ensure!(reply.starts_with("HTTP/1.1 201"), "upload: {reply}");
    let unit: Value = serde_json::from_str(reply.split("\r\n\r\n").nth(1).context("body")?)?;
    let policy = admin.ok(
        "POST",
        "/api/v1/schedulingpolicies",
        &json!({ "name": "storm" }),
    )?;
    let policy = id(&policy)?.to_owned();
    let base = format!("/api/v1/schedulingpolicies/{policy}");
    admin.ok(
        "POST",
        &format!("{base}/filters"),
        &json!({ "scheduling_policy_unit": { "id": id(&unit)? } }),
    )?;
    admin.ok(
        "PUT",
        &base,
        &json!({ "properties": [{ "name": "mode", "value": "loop" }] }),
    )?;
    Ok(policy)
}

fn body(vm: &str, hosts: usize) -> Value {
    let hosts: Vec<Value> = (0..hosts)
        .map(|i| {
            json!({
                "id": format!("host-{i:04}"),
                "metrics": {
                    "memory_total_mib": 65536.0,
                    "memory_free_mib": 16384.0 + (i % 61) as f64 * 512.0,
                    "cpu_sockets": 2,
                    "cpu_cores": 16,
                    "cpu_threads": 32,
                },
            })
        })
        .collect();
    json!({ "vm": { "id": vm, "memory_mib": 2048.0, "vcpus": 2 }, "hosts": hosts })
}

/// The hostile test unit (`tests/guests/hostile`), built from source.
fn build_hostile() -> anyhow::Result<Vec<u8>> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the host crate sits in the repository")?
        .to_owned();
    let exe = std::env::current_exe()?;
    let target = exe
        .ancestors()
        .nth(3)
        .context("benches run from <target>/<profile>/deps")?
        .to_owned();
    let builder = sandpiper_guest_build::Builder {
        manifest_dir: repo,
        out_dir: target.join("test-guests").join("hostile"),
        target_dir: None,
        cargo: std::env::var_os("CARGO").map_or_else(|| "cargo".into(), PathBuf::from),
        emit_rerun_if_changed: false,
    };
    let built = builder
        .build(&["sandpiper-test-hostile"])
        .map_err(|e| anyhow::anyhow!("building the hostile unit: {e}"))?;
    Ok(std::fs::read(&built[0].path)?)
}

/// The server under test: the real binary.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(db: &std::path::Path) -> anyhow::Result<Server> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sandpiper"))
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(db)
            .env("SANDPIPER_ADMIN_TOKEN", TOKEN)
            // Every client connects from 127.0.0.1: the per-address cap
            // (64) would refuse the storm's connections at the door and
            // measure the connection layer, not the clusters' fairness.
            .env("SANDPIPER_MAX_CONNECTIONS_PER_IP", "512")
            .env("SANDPIPER_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting sandpiper")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = tx.send(addr.trim().to_owned());
                }
            }
        });
        let addr = rx
            .recv_timeout(START_TIMEOUT)
            .context("the server did not start")?
            .parse()
            .context("listening address")?;
        Ok(Server { child, addr })
    }

    fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// A keep-alive HTTP/1.1 client for JSON requests.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    addr: SocketAddr,
}

impl Client {
    fn connect(addr: SocketAddr) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr).context("connecting")?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        Ok(Client {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            addr,
        })
    }

    /// Sends a JSON request; the answer must be a success.
    fn ok(&mut self, method: &str, path: &str, body: &Value) -> anyhow::Result<Value> {
        let (code, value) = self.request(method, path, &serde_json::to_vec(body)?)?;
        ensure!(
            (200..300).contains(&code),
            "{method} {path}: {code} {value}"
        );
        Ok(value)
    }

    /// Posts `body`; the answer must have status `status`.
    fn expect(&mut self, path: &str, body: &[u8], status: u16) -> anyhow::Result<()> {
        let (code, value) = self.request("POST", path, body)?;
        ensure!(code == status, "POST {path}: {code} {value}");
        Ok(())
    }

    fn request(&mut self, method: &str, path: &str, body: &[u8]) -> anyhow::Result<(u16, Value)> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        self.writer.write_all(head.as_bytes())?;
        self.writer.write_all(body)?;
        let mut status = String::new();
        self.reader.read_line(&mut status)?;
        let code: u16 = status
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("status line {status:?}"))?;
        let mut length = None;
        let mut chunked = false;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = Some(v.trim().parse::<usize>()?);
                } else if k.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = v.trim().eq_ignore_ascii_case("chunked");
                }
            }
        }
        let mut bytes = Vec::new();
        if chunked {
            loop {
                let mut size = String::new();
                self.reader.read_line(&mut size)?;
                let size = usize::from_str_radix(size.trim(), 16)?;
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                bytes.extend_from_slice(&chunk[..size]);
            }
        } else {
            bytes.resize(length.context("no content-length")?, 0);
            self.reader.read_exact(&mut bytes)?;
        }
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        Ok((code, value))
    }
}
