//! One cluster's storm must not take the others down (issue #11): the real
//! `sandpiper` binary, an honest client deciding on cluster A, timed
//! alone, next to an honest storm on cluster C, and next to a hostile
//! storm on cluster B, whose only filter (the hostile test unit in `loop`
//! mode) runs out of fuel on every call. Each storm is 64 clients sending
//! requests of the same size. The honest client's p99 latency in every
//! phase, and their ratios, come from the same process and server.
//!
//! Storm clients honour `Retry-After` after a 503, as oVirt's and Nova's
//! engines do: the threat of issue #11 is a hostile *unit*, which honest
//! engines keep calling; a hostile *client* is bounded by the per-address
//! connection cap instead. A last phase, for diagnosis, repeats the
//! hostile storm with clients that reconnect at once after a 503 (the
//! issue's tester's clients) and shows what that costs the server.
//!
//! Every phase also prints the CPU the server and this process used while
//! the honest client was timed (in cores: CPU seconds per second) and the
//! machine's load average, since the bench shares its cores.
//!
//! Run with: `cargo bench --bench fairness` (figures in
//! docs/performance.md); `FAIRNESS_ROUNDS` (default 3) sets the rounds.
//! Prints a `fairness round=... phase=...` line per phase and round, then
//! `fairness median ...` with each phase's median p99 and ratios.

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

/// Clients in each storm, as in the issue.
const STORM_CLIENTS: usize = 64;
/// Hosts in each storm request: the hostile filter's fuel budget grows with
/// them (~20 M + 150 k per host), so each call spins ~10-40 ms.
const STORM_HOSTS: usize = 200;
/// Hosts in each honest request (the default policy `none`).
const HONEST_HOSTS: usize = 100;
/// Honest decisions timed in each phase: the p99 is the sixth slowest.
const HONEST_DECISIONS: usize = 500;
/// Untimed honest decisions first, so units and connections are warm.
const WARMUP: usize = 30;
/// How long a storm runs before the honest client starts timing.
const STORM_RAMP: Duration = Duration::from_secs(2);
/// Rounds of every phase unless `FAIRNESS_ROUNDS` says otherwise; the
/// summary line takes the median of each figure over the rounds.
const DEFAULT_ROUNDS: usize = 3;
/// How long a storm client waits, seconds, after a 503 without
/// `Retry-After` or a connection the server closed mid-request: an
/// engine's retry loop.
const DEFAULT_BACKOFF_SECS: u64 = 1;
/// How long the server may take to start (compiling built-in units).
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// The admin token the bench server starts with.
const TOKEN: &str = "bench-admin-0123456789abcdef0123456789abcdef";
/// Clock ticks per second of `/proc/<pid>/stat`'s CPU times (`USER_HZ`,
/// 100 on every architecture Linux exposes to user space).
const CLOCK_TICKS_PER_SEC: f64 = 100.0;

fn main() -> anyhow::Result<()> {
    let hostile = build_hostile()?;
    let dir = tempfile::tempdir().context("temp dir")?;
    let mut server = Server::start(&dir.path().join("bench.db"))?;
    let result = run(&server, &hostile);
    server.stop();
    result
}

/// What a storm's clients do after a 503.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backoff {
    /// Wait as long as `Retry-After` says, then reconnect (an engine).
    RetryAfter,
    /// Reconnect at once (the tester's clients).
    AtOnce,
}

/// One storm: its clients' requests and how they back off.
struct Storm {
    phase: &'static str,
    path: String,
    body: Arc<Vec<u8>>,
    /// The status of a decided request: 200, or 422 `filter_failed` for
    /// the hostile fail-closed filter.
    decided: u16,
    backoff: Backoff,
}

/// One phase's figures, taken while the honest client was timed.
struct Measured {
    times: Vec<f64>,
    decided: usize,
    busy: usize,
    server_cores: f64,
    bench_cores: f64,
    load: f64,
}

fn run(server: &Server, hostile: &[u8]) -> anyhow::Result<()> {
    let addr = server.addr;
    let mut admin = Client::connect(addr)?;
    let mut cluster = |body: Value| -> anyhow::Result<String> {
        let cluster = admin.ok("POST", "/api/v1/clusters", &body)?;
        Ok(format!("/api/v1/clusters/{}/schedule", id(&cluster)?))
    };
    let honest = cluster(json!({ "name": "honest" }))?;
    let neighbour = cluster(json!({ "name": "honest-storm" }))?;
    let storm_policy = storm_policy(&mut Client::connect(addr)?, addr, hostile)?;
    let hostile = cluster(json!({ "name": "storm", "scheduling_policy": { "id": storm_policy } }))?;

    let storm_body = Arc::new(serde_json::to_vec(&body("storm", STORM_HOSTS))?);
    let storm = |phase, path: &String, decided, backoff| Storm {
        phase,
        path: path.clone(),
        body: Arc::clone(&storm_body),
        decided,
        backoff,
    };
    let storms = [
        storm("honest_storm", &neighbour, 200, Backoff::RetryAfter),
        storm("hostile_storm", &hostile, 422, Backoff::RetryAfter),
        storm("hostile_storm_at_once", &hostile, 422, Backoff::AtOnce),
    ];

    let honest_body = serde_json::to_vec(&body("honest", HONEST_HOSTS))?;
    let mut client = Client::connect(addr)?;
    for _ in 0..WARMUP {
        client.expect(&honest, &honest_body, 200)?;
    }
    let rounds = std::env::var("FAIRNESS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(DEFAULT_ROUNDS)
        .max(1);
    // Per phase: the p99 of every round, and its ratio to the same round's
    // p99 alone and next to the honest storm (the first storm).
    let mut alone_p99 = Vec::new();
    let mut p99 = vec![Vec::new(); storms.len()];
    let mut vs_alone = vec![Vec::new(); storms.len()];
    let mut vs_honest = vec![Vec::new(); storms.len()];
    for round in 1..=rounds {
        let alone = measure(server, &mut client, &honest, &honest_body, None)?;
        report(round, "alone", &alone);
        let alone = percentile(&alone.times, 99.0);
        alone_p99.push(alone);
        for (i, storm) in storms.iter().enumerate() {
            let stormed = measure(server, &mut client, &honest, &honest_body, Some(storm))?;
            report(round, storm.phase, &stormed);
            let stormed = percentile(&stormed.times, 99.0);
            p99[i].push(stormed);
            vs_alone[i].push(stormed / alone);
            vs_honest[i].push(stormed / p99[0][round - 1]);
        }
    }
    let mut line = format!(
        "fairness median rounds={rounds} alone_p99_ms={:.2}",
        median(&alone_p99)
    );
    for (i, storm) in storms.iter().enumerate() {
        line += &format!(
            " {phase}_p99_ms={:.2} {phase}_vs_alone={:.2}",
            median(&p99[i]),
            median(&vs_alone[i]),
            phase = storm.phase,
        );
        if i > 0 {
            line += &format!(
                " {}_vs_honest_storm={:.2}",
                storm.phase,
                median(&vs_honest[i])
            );
        }
    }
    println!("{line} load1={:.2}", load_average());
    Ok(())
}

fn report(round: usize, phase: &str, m: &Measured) {
    println!(
        "fairness round={round} phase={phase} p50_ms={:.2} p99_ms={:.2} storm_decided={} \
         storm_busy={} server_cores={:.2} bench_cores={:.2} load1={:.2}",
        percentile(&m.times, 50.0),
        percentile(&m.times, 99.0),
        m.decided,
        m.busy,
        m.server_cores,
        m.bench_cores,
        m.load,
    );
}

/// Times `HONEST_DECISIONS` honest decisions, one after another, with
/// `storm` (if any) running from `STORM_RAMP` before until they end.
fn measure(
    server: &Server,
    client: &mut Client,
    path: &str,
    body: &[u8],
    storm: Option<&Storm>,
) -> anyhow::Result<Measured> {
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(StormCounts::default());
    let clients: Vec<_> = storm
        .map(|storm| {
            (0..STORM_CLIENTS)
                .map(|_| {
                    let (stop, counts) = (Arc::clone(&stop), Arc::clone(&counts));
                    let (path, body) = (storm.path.clone(), Arc::clone(&storm.body));
                    let (decided, backoff, addr) = (storm.decided, storm.backoff, server.addr);
                    std::thread::spawn(move || {
                        storm_client(addr, &path, &body, decided, backoff, &stop, &counts)
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if storm.is_some() {
        std::thread::sleep(STORM_RAMP);
    }
    let before = counts.now();
    let (server_cpu, bench_cpu) = (cpu_seconds(server.pid()), cpu_seconds(std::process::id()));
    let started = Instant::now();
    let times = time(client, path, body);
    let wall = started.elapsed().as_secs_f64();
    let server_cpu = cpu_seconds(server.pid()) - server_cpu;
    let bench_cpu = cpu_seconds(std::process::id()) - bench_cpu;
    let after = counts.now();
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client
            .join()
            .map_err(|_| anyhow::anyhow!("a storm client panicked"))??;
    }
    let times = times?;
    let decided = after.0 - before.0;
    ensure!(
        storm.is_none() || decided > 0,
        "the storm made no decision while the honest client was timed"
    );
    Ok(Measured {
        times,
        decided,
        busy: after.1 - before.1,
        server_cores: server_cpu / wall,
        bench_cores: bench_cpu / wall,
        load: load_average(),
    })
}

/// What a storm's clients got: decisions, and requests turned away (503,
/// or the connection closed before the answer).
#[derive(Default)]
struct StormCounts {
    decided: AtomicUsize,
    busy: AtomicUsize,
}

impl StormCounts {
    fn now(&self) -> (usize, usize) {
        (
            self.decided.load(Ordering::Relaxed),
            self.busy.load(Ordering::Relaxed),
        )
    }
}

/// One storm client: decides over and over until `stop`, backing off after
/// a 503 as `backoff` says.
fn storm_client(
    addr: SocketAddr,
    path: &str,
    body: &[u8],
    decided: u16,
    backoff: Backoff,
    stop: &AtomicBool,
    counts: &StormCounts,
) -> anyhow::Result<()> {
    let mut client = Client::connect(addr)?;
    while !stop.load(Ordering::Relaxed) {
        // A busy cluster is answered before its body is read and the
        // connection closed, so the client reconnects after its wait (the
        // write of the body may itself fail: the server closed first).
        let wait = match client.request("POST", path, body) {
            Ok(answer) if answer.status == decided => {
                counts.decided.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Ok(answer) if answer.status == 503 => answer.retry_after,
            Ok(answer) => bail!("storm request answered {} {}", answer.status, answer.body),
            Err(_) => None,
        };
        counts.busy.fetch_add(1, Ordering::Relaxed);
        if backoff == Backoff::RetryAfter {
            let wait = Duration::from_secs(wait.unwrap_or(DEFAULT_BACKOFF_SECS));
            sleep_unless_stopped(wait, stop);
        }
        client = Client::connect(addr)?;
    }
    Ok(())
}

/// Sleeps `wait`, waking early once `stop` is set so a phase ends on time.
fn sleep_unless_stopped(wait: Duration, stop: &AtomicBool) {
    let until = Instant::now() + wait;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
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

fn median(values: &[f64]) -> f64 {
    percentile(values, 50.0)
}

/// CPU seconds (user and system) process `pid` has used; 0 where `/proc`
/// does not say.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The fields after the command name (in parentheses, and it may hold
    // spaces): utime and stime are the 12th and 13th of them.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / CLOCK_TICKS_PER_SEC
}

/// The machine's one-minute load average; 0 where `/proc` does not say.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
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

    fn pid(&self) -> u32 {
        self.child.id()
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
        let answer = self.request(method, path, &serde_json::to_vec(body)?)?;
        ensure!(
            (200..300).contains(&answer.status),
            "{method} {path}: {} {}",
            answer.status,
            answer.body
        );
        Ok(answer.body)
    }

    /// Posts `body`; the answer must have status `status`.
    fn expect(&mut self, path: &str, body: &[u8], status: u16) -> anyhow::Result<()> {
        let answer = self.request("POST", path, body)?;
        ensure!(
            answer.status == status,
            "POST {path}: {} {}",
            answer.status,
            answer.body
        );
        Ok(())
    }

    fn request(&mut self, method: &str, path: &str, body: &[u8]) -> anyhow::Result<Answer> {
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
        let mut retry_after = None;
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
                } else if k.eq_ignore_ascii_case("retry-after") {
                    retry_after = v.trim().parse().ok();
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
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        Ok(Answer {
            status: code,
            retry_after,
            body,
        })
    }
}

/// An HTTP answer: its status, `Retry-After` in seconds, and JSON body.
struct Answer {
    status: u16,
    retry_after: Option<u64>,
    body: Value,
}
