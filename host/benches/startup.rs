//! How long the `sandpiper` binary takes to be ready, and the memory it
//! holds once busy (issue #17's start-up goals).
//!
//! * **First start**: a fresh database, so every built-in unit is compiled
//!   and stored; from spawning the process to its "listening on" line,
//!   which it prints only once every unit is loaded.
//! * **Restart**: the same database again; the compiled code is read back,
//!   nothing is compiled.
//! * **Memory**: on the restarted server, a 10,000-host inventory, 50
//!   policies (clones of the default `none`) and 200 decisions with claims;
//!   then the process's resident set (`VmRSS`) and its peak (`VmHWM`).
//! * **Idle**: that server left alone for `IDLE` after `SETTLE`: the CPU
//!   it uses a second and its threads' context switches a second, each a
//!   wake-up on a machine with nothing to do (the epoch ticker sleeps
//!   while no unit runs, `sandbox/engine.rs`).
//!
//! Run with: `cargo bench --bench startup` (figures in
//! docs/performance.md). Prints
//! `startup first_start_ms=... restart_ms=...` (median and minimum of
//! `RUNS`), `startup rss_mib=... peak_rss_mib=... hosts=... policies=...`
//! and `startup idle_cpu_ms_per_s=... idle_switches_per_s=... seconds=...`.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

mod support;
use support::{Client, Server, host, load_average, ms};

/// Fresh starts (each followed by a restart) measured.
const RUNS: usize = 3;
/// Hosts in the inventory the memory is measured with.
const HOSTS: usize = 10_000;
/// Policies the memory is measured with.
const POLICIES: usize = 50;
/// Decisions (each with a claim) made before the memory is read.
const DECISIONS: usize = 200;
/// How long the busy server is left before its idling is measured: its
/// last commit's checkpoint and the ticker's idle ticks run out.
const SETTLE: Duration = Duration::from_secs(2);
/// How long its idling is measured.
const IDLE: Duration = Duration::from_secs(10);

fn main() -> anyhow::Result<()> {
    let mut first = Vec::new();
    let mut restart = Vec::new();
    for run in 0..RUNS {
        let dir = tempfile::tempdir().context("temp dir")?;
        let db = dir.path().join("startup.db");
        let started = Instant::now();
        let mut server = Server::start(&db, &[], &[])?;
        first.push(started.elapsed());
        server.stop();

        let started = Instant::now();
        let mut server = Server::start(&db, &[], &[])?;
        restart.push(started.elapsed());
        let measured = if run + 1 == RUNS {
            Some(busy_memory(&server).and_then(|memory| idling(&server).map(|idle| (memory, idle))))
        } else {
            None
        };
        server.stop();
        if let Some(measured) = measured {
            let ((rss, peak), (cpu_ms, switches)) = measured?;
            println!(
                "startup rss_mib={rss:.0} peak_rss_mib={peak:.0} hosts={HOSTS} \
                 policies={POLICIES} decisions={DECISIONS}"
            );
            println!(
                "startup idle_cpu_ms_per_s={cpu_ms:.1} idle_switches_per_s={switches:.0} \
                 seconds={}",
                IDLE.as_secs()
            );
        }
    }
    println!(
        "startup first_start_ms median={:.0} min={:.0} restart_ms median={:.0} min={:.0} \
         runs={RUNS} load={}",
        ms(median(&first)),
        ms(min(&first)),
        ms(median(&restart)),
        ms(min(&restart)),
        load_average()
    );
    Ok(())
}

/// Fills `server` as the memory goal states, and reads its resident set
/// and peak, MiB.
fn busy_memory(server: &Server) -> anyhow::Result<(f64, f64)> {
    let mut admin = Client::connect(server.addr)?;
    let policies = admin.get("/api/v1/schedulingpolicies")?;
    let none = policies
        .as_array()
        .and_then(|all| all.iter().find(|p| p["name"] == "none"))
        .and_then(|p| p["id"].as_str())
        .context("the built-in policy `none`")?
        .to_owned();
    for i in 0..POLICIES {
        admin.send(
            "POST",
            &format!("/api/v1/schedulingpolicies/{none}/clone"),
            &json!({ "name": format!("policy-{i:02}") }),
        )?;
    }
    let cluster = admin.send("POST", "/api/v1/clusters", &json!({ "name": "memory" }))?;
    let base = format!(
        "/api/v1/clusters/{}",
        cluster["id"].as_str().context("cluster id")?
    );
    let hosts: Vec<Value> = (0..HOSTS).map(|i| host(i, 0)).collect();
    admin.send(
        "PUT",
        &format!("{base}/inventory"),
        &json!({ "generation": 1, "hosts": hosts }),
    )?;
    for i in 0..DECISIONS {
        admin.send(
            "POST",
            &format!("{base}/schedule"),
            &json!({ "vm": { "id": format!("vm-{i}"), "memory_mib": 2048, "vcpus": 2 } }),
        )?;
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .context("the server's /proc status")?;
    let kib = |key: &str| -> anyhow::Result<f64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .with_context(|| format!("{key} in /proc status"))
    };
    Ok((kib("VmRSS:")? / 1024.0, kib("VmHWM:")? / 1024.0))
}

/// What `server` does with nothing to do: CPU milliseconds and context
/// switches a second over [`IDLE`], after [`SETTLE`].
fn idling(server: &Server) -> anyhow::Result<(f64, f64)> {
    std::thread::sleep(SETTLE);
    let pid = server.pid();
    let (cpu, switches) = (support::process_cpu(pid)?, support::process_switches(pid)?);
    std::thread::sleep(IDLE);
    let cpu = support::process_cpu(pid)?.saturating_sub(cpu);
    let switches = support::process_switches(pid)?.saturating_sub(switches);
    let seconds = IDLE.as_secs_f64();
    Ok((cpu.as_secs_f64() * 1e3 / seconds, switches as f64 / seconds))
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn min(times: &[Duration]) -> Duration {
    times.iter().copied().min().unwrap_or_default()
}
