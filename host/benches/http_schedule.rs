//! Decisions per second over HTTP with claims: the real `sandpiper` binary
//! with the built-in default policy (its units as WebAssembly components)
//! holding a 10,000-host inventory, and `CLIENTS` keep-alive clients
//! scheduling 2 GiB VMs into it, each decision recording a claim and a log
//! entry on disk before it is answered.
//!
//! Also measured: pushing the 10,000-host snapshot, 10,000 single-host
//! updates (one request each, and one batch), the seed's burst (the first
//! 1,000 builds), and afterwards that no host is double-booked (every
//! claim's host had the memory for every claim on it).
//!
//! The server runs twice on the same database: first with the default
//! sampling (`SANDPIPER_SAMPLE_HOSTS=adaptive`: a decision over a cluster
//! of more than 1,000 hosts considers a rotating window of 500), then with
//! `all` (every decision considers all 10,000 hosts), fewer decisions.
//!
//! Each configuration runs five rounds (`HTTP_SCHEDULE_ROUNDS`), each over
//! a cluster of its own.
//!
//! Run with: `cargo bench --bench http_schedule` (figures in
//! docs/performance.md). Prints, per round,
//! `http_schedule hosts=10000 clients=... decisions_per_s=... p50_ms=... p99_ms=... sampling=... considered=... policy=... round=... load=... server_cpu_us_per_decision=... switches_per_decision=... jobs_per_commit=...`
//! (the server's CPU time, all threads, per timed decision, its threads'
//! context switches per decision, each a thread going to sleep or being
//! preempted, and the store writer's writes per commit over them, from its
//! metrics),
//! and at the end one `http_schedule_rounds` line per configuration with
//! the median and the best round.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use serde_json::{Value, json};

mod support;
use support::{Client, Server, free_memory, host, ms};

/// Hosts in the cluster: the seed's "more than 10,000 hypervisors".
const HOSTS: usize = 10_000;
/// Concurrent clients, each with its own keep-alive connection.
const CLIENTS: usize = 8;
/// Decisions timed; the first `BURST` of them are the seed's burst.
const DECISIONS: usize = 6_000;
/// The seed's burst: 1,000 builds.
const BURST: usize = 1_000;
/// Untimed decisions first, so units, caches and connections are warm.
const WARMUP: usize = 200;
/// Memory of each VM placed, MiB.
const VM_MEMORY_MIB: f64 = 2048.0;

fn main() -> anyhow::Result<()> {
    let rounds: usize = match std::env::var("HTTP_SCHEDULE_ROUNDS") {
        Ok(text) => text.parse().context("HTTP_SCHEDULE_ROUNDS")?,
        Err(_) => ROUNDS,
    };
    let dir = tempfile::tempdir().context("temp dir")?;
    let db = dir.path().join("bench.db");
    let mut figures: Vec<Figures> = Vec::new();
    // The default: a cluster of more than 1,000 hosts is sampled.
    let mut server = Server::start(&db, &[], &[("SANDPIPER_SAMPLE_HOSTS", "adaptive")])?;
    let result = (|| {
        // For comparison only: the four-unit policy that was the default
        // before oVirt's full `none` (CPU and Memory filters, even CPU x2
        // and even memory x1 weights), to separate the units' cost from
        // the rest of a decision.
        let policy = four_unit_policy(server.addr)?;
        for round in 0..rounds {
            let first = round == 0;
            figures.push(run(&server, "adaptive", DECISIONS, round, first, None)?);
            figures.push(run(
                &server,
                "adaptive",
                FOUR_UNIT_DECISIONS,
                round,
                false,
                Some(&policy),
            )?);
        }
        Ok::<_, anyhow::Error>(())
    })();
    server.stop();
    result?;
    // The same over every host, for comparison: fewer decisions, same
    // database (the units' compiled artifacts are reused).
    let mut server = Server::start(&db, &[], &[("SANDPIPER_SAMPLE_HOSTS", "all")])?;
    let result = (|| {
        for round in 0..rounds {
            figures.push(run(&server, "all", ALL_DECISIONS, round, false, None)?);
        }
        Ok::<_, anyhow::Error>(())
    })();
    server.stop();
    result?;
    summarize(&figures);
    Ok(())
}

/// Rounds of each configuration, unless `HTTP_SCHEDULE_ROUNDS` says
/// otherwise: the median and the best of five, as issue #17 asks, because
/// one run in five on this shared machine comes out far slower.
const ROUNDS: usize = 5;

/// One timed run's figures.
struct Figures {
    config: String,
    decisions_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    load: String,
    /// The server's CPU time over the timed decisions, all its threads,
    /// per decision: what a decision costs the machine, which the noise
    /// of a shared machine moves far less than the rate.
    cpu_us: f64,
}

/// One line per configuration over its rounds: the median and the best
/// (fastest) round of each figure, and the load average of every round.
fn summarize(figures: &[Figures]) {
    let mut configs: Vec<&str> = figures.iter().map(|f| f.config.as_str()).collect();
    configs.dedup();
    configs.sort();
    configs.dedup();
    for config in configs {
        let of: Vec<&Figures> = figures.iter().filter(|f| f.config == config).collect();
        let sorted = |key: fn(&Figures) -> f64| {
            let mut values: Vec<f64> = of.iter().map(|f| key(f)).collect();
            values.sort_by(f64::total_cmp);
            values
        };
        let rate = sorted(|f| f.decisions_per_s);
        let p50 = sorted(|f| f.p50_ms);
        let p99 = sorted(|f| f.p99_ms);
        let cpu = sorted(|f| f.cpu_us);
        let loads: Vec<&str> = of.iter().map(|f| f.load.as_str()).collect();
        println!(
            "http_schedule_rounds {config} rounds={} decisions_per_s_median={:.0} decisions_per_s_best={:.0} \
             p50_ms_median={:.2} p50_ms_min={:.2} p99_ms_median={:.2} p99_ms_min={:.2} \
             server_cpu_us_per_decision_median={:.0} loads={}",
            of.len(),
            rate[rate.len() / 2],
            rate[rate.len() - 1],
            p50[p50.len() / 2],
            p50[0],
            p99[p99.len() / 2],
            p99[0],
            cpu[cpu.len() / 2],
            loads.join(",")
        );
    }
}

/// Decisions timed with `SANDPIPER_SAMPLE_HOSTS=all`.
const ALL_DECISIONS: usize = 1_000;
/// Decisions timed with the four-unit policy.
const FOUR_UNIT_DECISIONS: usize = 3_000;

/// Creates the four-unit policy (see `main`); its id.
fn four_unit_policy(addr: SocketAddr) -> anyhow::Result<String> {
    support::create_policy(
        addr,
        &json!({ "name": "bench-four-units" }),
        &["CPU", "Memory"],
        &[
            ("OptimalForCpuEvenDistribution", 2),
            ("OptimalForMemoryEvenDistribution", 1),
        ],
    )
}

/// Pushes the inventory of a new cluster, then times `decisions`
/// placements from `CLIENTS` clients; `first` also times the inventory
/// stream and the burst. The cluster runs the default policy, or `policy`.
fn run(
    server: &Server,
    sampling: &str,
    decisions: usize,
    round: usize,
    first: bool,
    policy: Option<&str>,
) -> anyhow::Result<Figures> {
    let addr = server.addr;
    let mut admin = Client::connect(addr)?;
    let label = if policy.is_some() {
        "four_units"
    } else {
        "default"
    };
    let mut cluster = json!({ "name": format!("bench-{sampling}-{label}-{round}") });
    if let Some(id) = policy {
        cluster["scheduling_policy"] = json!({ "id": id });
    }
    let cluster = admin.send("POST", "/api/v1/clusters", &cluster)?;
    let cluster_id = cluster["id"].as_str().context("cluster id")?.to_owned();
    let base = format!("/api/v1/clusters/{cluster_id}");

    let hosts: Vec<Value> = (0..HOSTS)
        .map(|i| host(i, if first { 0 } else { 2 }))
        .collect();
    let started = Instant::now();
    admin.send(
        "PUT",
        &format!("{base}/inventory"),
        &json!({ "generation": 1, "hosts": hosts }),
    )?;
    let snapshot_ms = ms(started.elapsed());
    if first {
        stream_updates(&mut admin, &base, snapshot_ms)?;
    }
    for i in 0..WARMUP {
        admin.send(
            "POST",
            &format!("{base}/schedule"),
            &vm(&format!("warm-{round}-{i}")),
        )?;
    }

    let commits_before = commits(&mut admin)?;
    let (tx, rx) = mpsc::channel::<anyhow::Result<Vec<(Instant, Duration)>>>();
    let cpu_before = support::process_cpu(server.pid())?;
    let switches_before = support::process_switches(server.pid())?;
    let started = Instant::now();
    for c in 0..CLIENTS {
        let tx = tx.clone();
        let path = format!("{base}/schedule");
        let sampling = sampling.to_owned();
        let label = label.to_owned();
        std::thread::spawn(move || {
            let result = (|| {
                let mut client = Client::connect(addr)?;
                let mut samples = Vec::new();
                for i in (c..decisions).step_by(CLIENTS) {
                    let sent = Instant::now();
                    let answer = client.send(
                        "POST",
                        &path,
                        &vm(&format!("vm-{sampling}-{label}-{round}-{i}")),
                    )?;
                    ensure!(
                        answer["complete"] == true,
                        "vm-{i} was not placed: {}",
                        answer["reason"]
                    );
                    samples.push((sent, sent.elapsed()));
                }
                Ok(samples)
            })();
            let _ = tx.send(result);
        });
    }
    drop(tx);
    let mut samples = Vec::with_capacity(decisions);
    for result in rx {
        samples.extend(result?);
    }
    let elapsed = started.elapsed();
    let server_cpu = support::process_cpu(server.pid())?.saturating_sub(cpu_before);
    let switches = support::process_switches(server.pid())?.saturating_sub(switches_before);
    samples.sort_by_key(|(sent, _)| *sent);
    let burst_done = samples
        .iter()
        .take(BURST)
        .map(|(sent, took)| (*sent + *took).duration_since(started))
        .max()
        .unwrap_or_default();
    let mut latencies: Vec<Duration> = samples.iter().map(|(_, took)| *took).collect();
    latencies.sort();
    let pct =
        |p: f64| ms(latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)]);
    // What one decision considered, as its answer says. On a fresh
    // connection: the admin's sat idle through the timed run, longer than
    // the server keeps an idle connection on a loaded machine.
    admin = Client::connect(addr)?;
    let jobs_per_commit = match (commits_before, commits(&mut admin)?) {
        (Some((commits, jobs)), Some((commits_after, jobs_after))) => format!(
            "{:.2}",
            (jobs_after - jobs) / (commits_after - commits).max(1.0)
        ),
        // A server from before the writer's metrics, in an A/B run.
        _ => "unknown".to_owned(),
    };
    let probe = admin.send(
        "POST",
        &format!("{base}/schedule?dry_run=true"),
        &vm("probe"),
    )?;
    let window = probe["sample"]["window"].as_u64().unwrap_or(HOSTS as u64);
    let figures = Figures {
        config: format!("sampling={sampling} considered={window} policy={label}"),
        decisions_per_s: samples.len() as f64 / elapsed.as_secs_f64(),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        load: support::load_average(),
        cpu_us: server_cpu.as_secs_f64() * 1e6 / samples.len() as f64,
    };
    println!(
        "http_schedule hosts={HOSTS} clients={CLIENTS} decisions_per_s={:.0} p50_ms={:.2} p99_ms={:.2} {} round={round} load={} server_cpu_us_per_decision={:.0} switches_per_decision={:.1} jobs_per_commit={jobs_per_commit}",
        figures.decisions_per_s,
        figures.p50_ms,
        figures.p99_ms,
        figures.config,
        figures.load,
        figures.cpu_us,
        switches as f64 / samples.len() as f64
    );
    if first {
        println!("burst builds={BURST} absorbed_ms={:.0}", ms(burst_done));
    }

    // No host may hold claims for more memory than it had free.
    let claims = admin.get(&format!("{base}/claims"))?;
    let claims = claims["claims"].as_array().context("claims")?;
    ensure!(
        claims.len() == WARMUP + decisions,
        "{} claims for {} decisions",
        claims.len(),
        WARMUP + decisions
    );
    let mut claimed: HashMap<&str, f64> = HashMap::new();
    let mut vms = std::collections::HashSet::new();
    for claim in claims {
        let host = claim["host_id"].as_str().context("host_id")?;
        *claimed.entry(host).or_default() +=
            claim["resources"]["memory_mib"].as_f64().unwrap_or(0.0);
        ensure!(
            vms.insert(claim["vm_id"].as_str().unwrap_or_default().to_owned()),
            "a VM holds two claims"
        );
    }
    let mut busiest = 0.0f64;
    for (host_id, memory) in &claimed {
        let index: usize = host_id.trim_start_matches("host-").parse()?;
        // Both runs' last report of every host is round 2.
        let free = free_memory(index, 2);
        ensure!(
            *memory <= free,
            "{host_id} double-booked: {memory} MiB claimed, {free} MiB free"
        );
        busiest = busiest.max(*memory / free);
    }
    println!(
        "double_booked=0 sampling={sampling} policy={label} hosts_with_claims={} fullest_host_percent={:.0}",
        claimed.len(),
        busiest * 100.0
    );
    Ok(figures)
}

/// Every host reported once more, one request each (a monitoring stream),
/// then again as one batch.
fn stream_updates(admin: &mut Client, base: &str, snapshot_ms: f64) -> anyhow::Result<()> {
    let started = Instant::now();
    for i in 0..HOSTS {
        let update = json!({ "updates": [{ "op": "upsert", "generation": 2 + i as u64, "host": host(i, 1) }] });
        admin.send("POST", &format!("{base}/inventory/updates"), &update)?;
    }
    let one_by_one = started.elapsed();
    // And again as one batch.
    let updates: Vec<Value> = (0..HOSTS)
        .map(|i| json!({ "op": "upsert", "generation": 20_000 + i as u64, "host": host(i, 2) }))
        .collect();
    let started = Instant::now();
    admin.send(
        "POST",
        &format!("{base}/inventory/updates"),
        &json!({ "updates": updates }),
    )?;
    let batch_ms = ms(started.elapsed());
    println!(
        "inventory hosts={HOSTS} snapshot_ms={snapshot_ms:.1} updates_one_by_one_per_s={:.0} updates_batch_ms={batch_ms:.1}",
        HOSTS as f64 / one_by_one.as_secs_f64()
    );

    Ok(())
}

/// The store writer's commits and the writes in them so far, from the
/// server's metrics (`None` from a server without them): over the timed
/// decisions, how many a commit held.
fn commits(admin: &mut Client) -> anyhow::Result<Option<(f64, f64)>> {
    let (code, text) = admin.raw("GET", "/metrics", "text/plain", Vec::new())?;
    ensure!(code == 200, "GET /metrics: {code}");
    let text = String::from_utf8(text)?;
    let counter = |name: &str| -> Option<f64> {
        let line = text
            .lines()
            .find(|line| line.split_whitespace().next() == Some(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Ok(counter("sandpiper_store_commits_total")
        .zip(counter("sandpiper_store_committed_jobs_total")))
}

fn vm(id: &str) -> Value {
    json!({ "vm": { "id": id, "memory_mib": VM_MEMORY_MIB, "vcpus": 2 } })
}
