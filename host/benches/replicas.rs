//! Decisions per second with claims over many clusters, for one replica on
//! SQLite and one and three replicas on one PostgreSQL database (issue
//! #13, docs/fleet.md): the real `sandpiper` binary with the built-in
//! default policy, [`CLUSTERS`] clusters of [`HOSTS`] hosts, and
//! [`CLIENTS`] keep-alive clients spread over the replicas, each cycling
//! through the clusters; a request for a cluster another replica owns is
//! forwarded to it. Every decision records a claim and a log entry before
//! it is answered.
//!
//! Also printed: each replica's resident memory once it holds its
//! clusters (the bound: under 200 MB for 10 clusters of 1,000
//! hosts; the one PostgreSQL replica holds all 12).
//!
//! Run with: `cargo bench --bench replicas`. PostgreSQL: the server
//! `SANDPIPER_TEST_POSTGRES` names (a database is created per run), or
//! else a throwaway one started with `scripts/postgres-test-server.sh`.
//! Prints, per configuration,
//! `replicas n=... store=... clusters=... decisions_per_s=... p50_ms=... p99_ms=... rss_mib=...`.

use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

mod support;
use support::{Client, Server, host, load_average, ms};

/// Clusters: the 12.
const CLUSTERS: usize = 12;
/// Hosts per cluster.
const HOSTS: usize = 1_000;
/// Concurrent clients, each with its own keep-alive connection to one
/// replica.
const CLIENTS: usize = 12;
/// Decisions timed per configuration.
const DECISIONS: usize = 3_000;
/// Untimed decisions first, one per client and cluster at least, so every
/// replica has taken its clusters and warmed its units.
const WARMUP: usize = 240;

fn main() -> anyhow::Result<()> {
    let postgres = Postgres::find_or_start()?;
    let dir = tempfile::tempdir().context("temp dir")?;
    let sqlite = dir.path().join("bench.db");
    run(1, "sqlite", &[sqlite.to_string_lossy().into_owned()])?;
    for n in [1, 3] {
        let url = postgres.database(&format!("replicas_{n}_{}", std::process::id()))?;
        run(n, "postgres", &vec![url; n])?;
    }
    Ok(())
}

/// Starts `n` replicas on the databases `dbs` (one each; the same URL for
/// replicas sharing PostgreSQL), fills the clusters and measures.
fn run(n: usize, store: &str, dbs: &[String]) -> anyhow::Result<()> {
    // The first alone: it migrates and compiles the built-in units; the
    // others find them stored.
    let mut replicas = Vec::new();
    for db in dbs.iter().take(n) {
        replicas.push(Server::start(Path::new(db), &[], &[])?);
    }
    let result = measure(&replicas, store);
    for replica in &mut replicas {
        replica.stop();
    }
    result
}

fn measure(replicas: &[Server], store: &str) -> anyhow::Result<()> {
    let n = replicas.len();
    let mut admin = Client::connect(replicas[0].addr)?;
    let mut paths = Vec::new();
    for k in 0..CLUSTERS {
        let cluster = admin.send(
            "POST",
            "/api/v1/clusters",
            &json!({ "name": format!("bench-{k}") }),
        )?;
        let id = cluster["id"].as_str().context("cluster id")?;
        let path = format!("/api/v1/clusters/{id}");
        let hosts: Vec<Value> = (0..HOSTS).map(|i| host(i, k)).collect();
        // Through the replica that should own it: clusters spread evenly.
        let mut owner = Client::connect(replicas[k % n].addr)?;
        owner.send(
            "PUT",
            &format!("{path}/inventory"),
            &json!({ "generation": 1, "hosts": hosts }),
        )?;
        paths.push(path);
    }
    let addrs: Vec<_> = replicas.iter().map(|r| r.addr).collect();
    let decide = |decisions: usize, label: &'static str| {
        let (tx, rx) = mpsc::channel::<anyhow::Result<Vec<Duration>>>();
        for c in 0..CLIENTS {
            let (tx, addr, paths) = (tx.clone(), addrs[c % n], paths.clone());
            std::thread::spawn(move || {
                let result = (|| {
                    let mut client = Client::connect(addr)?;
                    let mut samples = Vec::new();
                    for i in (c..decisions).step_by(CLIENTS) {
                        let path = format!("{}/schedule", paths[i % CLUSTERS]);
                        let body = json!({ "vm": {
                            "id": format!("{label}-{i}"),
                            "memory_mib": 2048,
                            "vcpus": 2,
                        } });
                        let sent = Instant::now();
                        let answer = client.send("POST", &path, &body)?;
                        samples.push(sent.elapsed());
                        if answer["claims"].as_array().is_none_or(Vec::is_empty) {
                            bail!("no claim: {answer}");
                        }
                    }
                    Ok(samples)
                })();
                let _ = tx.send(result);
            });
        }
        drop(tx);
        rx.iter().collect::<anyhow::Result<Vec<Vec<Duration>>>>()
    };
    decide(WARMUP, "warm")?;
    let started = Instant::now();
    let mut samples: Vec<Duration> = decide(DECISIONS, "timed")?.into_iter().flatten().collect();
    let elapsed = started.elapsed();
    ensure!(samples.len() == DECISIONS, "every decision answered");
    samples.sort();
    let quantile = |q: f64| ms(samples[((samples.len() - 1) as f64 * q) as usize]);
    let rss: Vec<String> = replicas
        .iter()
        .map(|r| format!("{:.0}", rss_mib(r.pid())))
        .collect();
    println!(
        "replicas n={n} store={store} clusters={CLUSTERS} hosts_per_cluster={HOSTS} \
         clients={CLIENTS} decisions={DECISIONS} decisions_per_s={:.0} p50_ms={:.2} \
         p99_ms={:.2} rss_mib={} load={}",
        DECISIONS as f64 / elapsed.as_secs_f64(),
        quantile(0.5),
        quantile(0.99),
        rss.join(","),
        load_average(),
    );
    Ok(())
}

/// A process's resident memory, MiB (`VmRSS` in /proc).
fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// The PostgreSQL server the bench uses: the one `SANDPIPER_TEST_POSTGRES`
/// names, or a throwaway one, stopped when the bench ends.
struct Postgres {
    url: String,
    /// Set when this bench started the server.
    dir: Option<String>,
}

impl Postgres {
    fn find_or_start() -> anyhow::Result<Postgres> {
        if let Ok(url) = std::env::var("SANDPIPER_TEST_POSTGRES") {
            return Ok(Postgres { url, dir: None });
        }
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/postgres-test-server.sh"
        );
        let out = Command::new("bash")
            .args([script, "start"])
            .output()
            .context("running scripts/postgres-test-server.sh")?;
        ensure!(
            out.status.success(),
            "scripts/postgres-test-server.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let vars = String::from_utf8(out.stdout)?;
        let value = |name: &str| {
            vars.lines()
                .filter_map(|l| l.trim_start_matches("export ").split_once('='))
                .find(|(k, _)| *k == name)
                .map(|(_, v)| {
                    let v = v.split(';').next().unwrap_or_default();
                    v.trim_matches(['\'', '"']).to_owned()
                })
        };
        Ok(Postgres {
            url: value("SANDPIPER_TEST_POSTGRES").context("the server's URL")?,
            dir: value("SANDPIPER_TEST_POSTGRES_DIR"),
        })
    }

    /// A new database on the server, by name; returns its URL.
    fn database(&self, name: &str) -> anyhow::Result<String> {
        use sqlx::Connection as _;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let mut conn = sqlx::PgConnection::connect(&self.url).await?;
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
                .execute(&mut conn)
                .await?;
            anyhow::Ok(())
        })?;
        let base = self
            .url
            .rsplit_once('/')
            .map_or(self.url.as_str(), |(b, _)| b);
        Ok(format!("{base}/{name}"))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let script = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../scripts/postgres-test-server.sh"
            );
            let _ = Command::new("bash").args([script, "stop", dir]).status();
        }
    }
}
