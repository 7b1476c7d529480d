//! Nova's policy over HTTP (issue #17): the real `sandpiper` binary deciding
//! with Nova's policy of the reference benchmark (`RamFilter`,
//! `ComputeFilter`, `ComputeCapabilitiesFilter` with four `capabilities:`
//! extra specs, then `RAMWeigher`, normalised; its units as WebAssembly
//! components) over the Nova-shaped hosts of the in-process benchmark
//! (`tests/benches/common/nova_cluster.rs`, shared with `nova_units`), at
//! 1,000, 10,000 and 50,000 hosts, two ways:
//!
//! * **held**: the hosts are put into the cluster's inventory once
//!   (`PUT .../inventory`, timed), then each decision is
//!   `POST .../schedule` with the VM and its hints only, as an engine that
//!   keeps Sandpiper's inventory up to date would ask: a summary explain
//!   (the default), `exhaustive: true` (every host considered, as inline
//!   and in process: the request's affinity groups name hosts outside any
//!   sampled window, so a window would be widened to every host anyway),
//!   and a claim recorded with the decision's log entry before the answer,
//!   as an engine placing VMs gets (each decision is a new VM). The same
//!   with `?dry_run=true` (no claim, no log entry) separates what
//!   recording costs.
//! * **inline**: the same hosts and their running VMs posted in each
//!   request's body (the JSON is encoded once, before timing), answered
//!   with the full explain record and logged.
//! * **compact**: the same, as the compact body (`multipart/form-data`:
//!   the request as JSON, the hosts and VMs as Arrow IPC streams written by
//!   `sandpiper::arrow_snapshot::write`); it must choose the host inline
//!   chose.
//!
//! Inline answers carry the full explain record by default: every host's
//! verdict and each survivor's scores (0.26 MB here, where 967 of 10,000
//! hosts survive), rendered, logged and sent with each answer. Held
//! answers carry the bounded summary. So each
//! inline mode also runs with `"explain": "summary"` (`inline_summary`,
//! `compact_summary`, `compact_changing_summary`), decisions of the two
//! forms alternating, so that noise falls on both alike: the summary
//! lines compare with `held` like for like.
//!
//! The same body sent again lets the server reuse per-host units' answers
//! for every host (their content is unchanged). So **compact_changing**
//! sends it as a live cluster would: before each decision a hundredth of
//! the hosts report new free memory (the body written again, untimed), and
//! only those are asked about again; a line per unit called then gives
//! its answers reused and its call's time (medians, from the explain
//! records).
//!
//! Beside them, the same decision made in this process with the same
//! embedded components and the sandbox's default limits (`in_process`):
//! what the HTTP path adds is the difference; and what fingerprinting the
//! hosts costs a decision that reuses answers for posted hosts
//! (`content_stamps`), and what reading the compact body's columns costs
//! (`compact_columns`: the Arrow streams decoded, checked and built;
//! `compact_columns_changing`: the same over the body before with a
//! hundredth of the hosts changed, only what changed built again, as the
//! server builds a cluster's next compact body; `content_stamps_changing`:
//! its fingerprints then, each column's share kept from the body before,
//! as a cluster keeps them).
//!
//! Each decision is timed at the client, from the first byte of the
//! request to the last of the answer, over one keep-alive connection, one
//! decision at a time; a 503 (a unit starved of CPU on a busy machine) is
//! retried after a second, as an engine would, only the answered attempt
//! timed, and counted (`retries=`). Prints medians and minimums with the
//! one-minute load average beside each line:
//! `nova_http hosts=... mode=held|held_dry_run|inline|inline_summary|compact|compact_summary|compact_changing|compact_changing_summary|in_process|content_stamps|compact_columns|compact_columns_changing|content_stamps_changing runs=... median_ms=... min_ms=... load=... retries=...`.
//!
//! Run with: `cargo bench --bench nova_http [hosts]` (figures in
//! docs/performance.md, "Nova's policy over HTTP"); `NOVA_HTTP_RUNS=N`
//! times N decisions per mode instead of the default count, e.g. to
//! profile the server through one phase.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use sandpiper::builtin::UNITS;
use sandpiper::pipeline::{Combination, Policy, ScheduleRequest, schedule};
use sandpiper::sandbox::{Limits, Runtime};
use sandpiper::snapshot::hint_pairs;
use sandpiper::unit::Unit;

mod support;
use support::{Client, Server, load_average, median, ms};

/// The synthetic data the unit benchmarks use, from its one home in
/// tests/benches/common (this package cannot depend on `sandpiper-tests`).
#[path = "../../tests/benches/common"]
mod bench_data {
    pub mod nova_cluster;
    mod splitmix;
    pub use splitmix::SplitMix;
}
use bench_data::nova_cluster::{NovaCluster, nova_cluster};

/// Cluster sizes measured.
const SIZES: [usize; 3] = [1_000, 10_000, 50_000];
/// Host-decisions per size and mode: runs = this / hosts, clamped, so
/// that each size takes a similar time.
const HOST_RUNS: usize = 1_000_000;
/// Fewest and most timed decisions per size and mode.
const MIN_RUNS: usize = 7;
const MAX_RUNS: usize = 101;
/// Untimed decisions first (first-touch page faults, caches, the held
/// columns' first build).
const WARMUP_RUNS: usize = 3;

/// The server's request limit, MiB: room for the 50,000-host bodies.
const MAX_REQUEST_MIB: &str = "256";

/// Nova's policy: filters in order, then the one weigher (factor 1).
const FILTERS: [&str; 3] = ["RamFilter", "ComputeFilter", "ComputeCapabilitiesFilter"];
const WEIGHER: &str = "RAMWeigher";

fn main() -> anyhow::Result<()> {
    let only: Option<usize> = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(|a| a.parse())
        .transpose()
        .context("the argument is a cluster size")?;
    let in_process = InProcess::new()?;
    let dir = tempfile::tempdir().context("temp dir")?;
    // 50,000 hosts with their VMs are about 79 MB of JSON, over the
    // default limit of a request (64 MiB).
    let mut server = Server::start(
        &dir.path().join("bench.db"),
        &[],
        &[("SANDPIPER_MAX_REQUEST_MIB", MAX_REQUEST_MIB)],
    )?;
    let result = (|| {
        let policy = nova_policy(server.addr)?;
        for hosts in SIZES.into_iter().filter(|h| only.is_none_or(|o| o == *h)) {
            run(server.addr, &policy, &in_process, hosts)?;
        }
        Ok(())
    })();
    server.stop();
    result
}

/// Timed decisions per size and mode; `divisor` makes a costlier mode
/// run fewer. `NOVA_HTTP_RUNS` sets the count instead, to keep a phase
/// running long enough for a profiler to sample it.
fn runs_for(hosts: usize, divisor: usize) -> usize {
    match std::env::var("NOVA_HTTP_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        Some(runs) => runs,
        None => (HOST_RUNS / divisor / hosts).clamp(MIN_RUNS, MAX_RUNS),
    }
}

/// Measures every mode at `hosts` hosts.
fn run(
    addr: std::net::SocketAddr,
    policy: &str,
    in_process: &InProcess,
    hosts: usize,
) -> anyhow::Result<()> {
    let NovaCluster {
        snapshot,
        vm,
        hints,
    } = nova_cluster(hosts);

    // The same decision in this process.
    let built = snapshot.build().context("the Nova cluster builds")?;
    let request = ScheduleRequest {
        vm: vm.to_vm(&built.hosts, "vm")?,
        hints: hint_pairs(&hints),
        ..ScheduleRequest::default()
    };
    let inventory = Arc::new(built.inventory);
    let mut survivors = 0;
    let local = time(runs_for(hosts, 1), || {
        let started = Instant::now();
        let decision = schedule(&in_process.policy, &inventory, &request)
            .map_err(|e| anyhow::anyhow!("in process: {e:?}"))?;
        let took = started.elapsed();
        survivors = decision.explain.scored.len();
        Ok(took)
    })?;
    print(
        "in_process",
        hosts,
        &local,
        &format!("survivors={survivors}"),
    );
    // What knowing posted hosts unchanged costs an inline decision: each
    // host's content fingerprint, over a freshly built cluster as the
    // server has one (built again each run, untimed).
    let stamps = time(runs_for(hosts, 1), || {
        let fresh = snapshot.build().context("the Nova cluster builds")?;
        let started = Instant::now();
        let stamps = sandpiper::pipeline::content_stamps(&fresh.inventory);
        let took = started.elapsed();
        ensure!(stamps.by_host().len() == hosts);
        Ok(took)
    })?;
    print("content_stamps", hosts, &stamps, "");
    // What reading the compact body's columns costs: the Arrow streams
    // decoded, checked and built into the cluster's columns, as the server
    // does before deciding (the bytes copied untimed).
    let streams = sandpiper::arrow_snapshot::write(&snapshot)?;
    let columns = time(runs_for(hosts, 4), || {
        read_columns(streams.clone(), hosts, |h, v| h.build(&v)).map(|(took, _)| took)
    })?;
    print("compact_columns", hosts, &columns, "");
    // The same, over the body before with a hundredth of the hosts'
    // free memory changed, as the server builds a cluster's next compact
    // body (`ArrowHosts::build_reusing`): only what changed is built.
    // Then its fingerprints, with each column's share kept from the body
    // before as a cluster keeps them (`ReuseCache::content_stamps`): only
    // the changed column is hashed again.
    let mut last = None;
    let mut kept = sandpiper::pipeline::ReuseCache::default();
    let mut stamped = Vec::new();
    let mut changing = snapshot.clone();
    let mut round = 0usize;
    let over_last = time(runs_for(hosts, 4), || {
        round += 1;
        change_free_memory(&mut changing, round);
        let streams = sandpiper::arrow_snapshot::write(&changing)?;
        let (took, cluster) = read_columns(streams, hosts, |h, v| h.build_reusing(v, &mut last))?;
        let started = Instant::now();
        let stamps = kept.content_stamps(&cluster.inventory, true);
        stamped.push(ms(started.elapsed()));
        ensure!(stamps.by_host().len() == hosts);
        Ok(took)
    })?;
    print("compact_columns_changing", hosts, &over_last, "");
    let stamped = &stamped[stamped.len() - over_last.len()..];
    print("content_stamps_changing", hosts, stamped, "");

    let mut admin = Client::connect(addr)?;
    let cluster = admin.send(
        "POST",
        "/api/v1/clusters",
        &json!({ "name": format!("nova-{hosts}"), "scheduling_policy": { "id": policy } }),
    )?;
    let base = format!(
        "/api/v1/clusters/{}",
        cluster["id"].as_str().context("cluster id")?
    );
    let inventory_body = serde_json::to_vec(
        &json!({ "generation": 1, "hosts": &snapshot.hosts, "vms": &snapshot.vms }),
    )?;
    let started = Instant::now();
    let (code, answer) = admin.raw(
        "PUT",
        &format!("{base}/inventory"),
        "application/json",
        inventory_body.clone(),
    )?;
    ensure!(
        code == 200,
        "PUT inventory: {code} {}",
        String::from_utf8_lossy(&answer)
    );
    println!(
        "nova_http hosts={hosts} mode=put_inventory ms={:.1} body_mb={:.1} load={}",
        ms(started.elapsed()),
        inventory_body.len() as f64 / 1e6,
        load_average()
    );

    // Held: each decision a new VM, claimed and logged.
    let mut next = 0usize;
    let mut placed = 0usize;
    let mut answer_bytes = 0usize;
    let held = time(runs_for(hosts, 1), || {
        next += 1;
        let mut vm = vm.clone();
        vm.id = format!("held-{hosts}-{next}");
        let body = json!({ "vm": vm, "hints": hints, "exhaustive": true });
        let (answer, bytes, took) = decide(&mut admin, &format!("{base}/schedule"), &body)?;
        answer_bytes = bytes;
        placed += usize::from(answer["complete"] == true);
        Ok(took)
    })?;
    let decided = held.len() + WARMUP_RUNS;
    print(
        "held",
        hosts,
        &held,
        &format!("placed={placed}/{decided} answer_bytes={answer_bytes}"),
    );

    // Held, recording nothing.
    let dry = time(runs_for(hosts, 1), || {
        let body = json!({ "vm": vm, "hints": hints, "exhaustive": true });
        decide(&mut admin, &format!("{base}/schedule?dry_run=true"), &body).map(|d| d.2)
    })?;
    print("held_dry_run", hosts, &dry, "");

    // Inline: the same hosts in every body, encoded once, with the full
    // explain (the default) and the summary, alternately.
    let mut inline_bodies = [Vec::new(), Vec::new()];
    for (encoded, explain) in inline_bodies.iter_mut().zip(EXPLAINS) {
        let mut body = json!({
            "vm": vm,
            "hints": hints,
            "hosts": &snapshot.hosts,
            "vms": &snapshot.vms,
        });
        if let Some(explain) = explain {
            body["explain"] = json!(explain);
        }
        *encoded = serde_json::to_vec(&body)?;
    }
    let mut chosen = [String::new(), String::new()];
    let mut answer_sizes = [0usize; 2];
    let [inline, inline_summary] = time_alternating(runs_for(hosts, 8), |form| {
        let body = inline_bodies[form].clone();
        let (bytes, took) = post(&mut admin, &format!("{base}/schedule"), body)?;
        answer_sizes[form] = bytes.len();
        chosen[form] = chosen_host(&bytes)?;
        Ok(took)
    })?;
    for (form, times) in [(0, &inline), (1, &inline_summary)] {
        print(
            INLINE_MODES[form],
            hosts,
            times,
            &format!(
                "body_mb={:.1} answer_mb={:.3} chosen={}",
                inline_bodies[form].len() as f64 / 1e6,
                answer_sizes[form] as f64 / 1e6,
                chosen[form]
            ),
        );
    }
    let chosen = std::mem::take(&mut chosen[0]);
    // Compact: the same hosts and VMs as Arrow streams, the request as
    // JSON, in one multipart/form-data body (encoded once per form).
    let compact = [
        streams.body(&json!({ "vm": vm, "hints": hints }))?,
        streams.body(&json!({ "vm": vm, "hints": hints, "explain": "summary" }))?,
    ];
    let mut compact_chosen = [String::new(), String::new()];
    let [compact_times, compact_summary] = time_alternating(runs_for(hosts, 8), |form| {
        let (bytes, took) = post_as(
            &mut admin,
            &format!("{base}/schedule"),
            &compact[form].content_type,
            compact[form].body.clone(),
        )?;
        compact_chosen[form] = chosen_host(&bytes)?;
        Ok(took)
    })?;
    for (form, times) in [(0, &compact_times), (1, &compact_summary)] {
        ensure!(
            compact_chosen[form] == chosen,
            "the compact body chose {}, the JSON one {chosen}",
            compact_chosen[form]
        );
        print(
            COMPACT_MODES[form],
            hosts,
            times,
            &format!(
                "body_mb={:.1} chosen={chosen}",
                compact[form].body.len() as f64 / 1e6
            ),
        );
    }
    // Compact, as a live cluster sends it: between two decisions a
    // hundredth of the hosts report new free memory, so their answers
    // cannot be reused and the rest's can. Each body is written before
    // its decision is timed.
    let mut changing = snapshot.clone();
    let mut round = 0usize;
    let mut per_unit: std::collections::BTreeMap<String, (u64, Vec<f64>, Vec<f64>)> =
        Default::default();
    let [changing_times, changing_summary] = time_alternating(runs_for(hosts, 8), |form| {
        round += 1;
        change_free_memory(&mut changing, round);
        let mut request = json!({ "vm": vm, "hints": hints });
        if let Some(explain) = EXPLAINS[form] {
            request["explain"] = json!(explain);
        }
        let body = sandpiper::arrow_snapshot::write(&changing)?.body(&request)?;
        let (bytes, took) = post_as(
            &mut admin,
            &format!("{base}/schedule"),
            &body.content_type,
            body.body,
        )?;
        let answer: Value = serde_json::from_slice(&bytes)?;
        // Only the full record says what each call took.
        for (unit, (input, reused, elapsed)) in unit_costs(&answer) {
            let seen = per_unit.entry(unit).or_default();
            seen.0 = input;
            seen.1.push(reused);
            seen.2.push(elapsed);
        }
        Ok(took)
    })?;
    for (mode, times) in [
        ("compact_changing", &changing_times),
        ("compact_changing_summary", &changing_summary),
    ] {
        print(
            mode,
            hosts,
            times,
            &format!("hosts_changed_per_decision={}", changed(hosts)),
        );
    }
    // Why a changing body still costs what it does: each unit called
    // pays its fixed cost over the few hosts not reused.
    for (unit, (input, reused, elapsed)) in &per_unit {
        println!(
            "nova_http hosts={hosts} mode=compact_changing unit={unit} candidates={input} \
             reused_median={:.0} unit_median_us={:.0}",
            median(reused),
            median(elapsed)
        );
    }
    let held_median = median(&held);
    println!(
        "nova_http hosts={hosts} held_over_in_process={:.2} inline_over_held={:.2} \
         inline_summary_over_held={:.2} compact_over_held={:.2} \
         compact_summary_over_held={:.2} compact_changing_over_held={:.2} \
         compact_changing_summary_over_held={:.2} load={}",
        held_median / median(&local),
        median(&inline) / held_median,
        median(&inline_summary) / held_median,
        median(&compact_times) / held_median,
        median(&compact_summary) / held_median,
        median(&changing_times) / held_median,
        median(&changing_summary) / held_median,
        load_average()
    );
    Ok(())
}

/// One held decision: its answer, its size in bytes and its time.
fn decide(
    client: &mut Client,
    path: &str,
    body: &Value,
) -> anyhow::Result<(Value, usize, Duration)> {
    let (bytes, took) = post(client, path, serde_json::to_vec(body)?)?;
    Ok((serde_json::from_slice(&bytes)?, bytes.len(), took))
}

/// Runs `decide` `WARMUP_RUNS` times untimed, then `runs` times; the
/// times in milliseconds. `decide` returns its own time: that of its
/// answered attempt (see [`post`]).
fn time(
    runs: usize,
    mut decide: impl FnMut() -> anyhow::Result<Duration>,
) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(runs);
    for i in 0..WARMUP_RUNS + runs {
        let took = decide()?;
        if i >= WARMUP_RUNS {
            times.push(ms(took));
        }
    }
    Ok(times)
}

/// Decodes `streams` and builds their `hosts` hosts' columns with
/// `build`, as the server reads a compact body; the time both took, and
/// the cluster.
fn read_columns(
    streams: sandpiper::arrow_snapshot::Streams,
    hosts: usize,
    build: impl FnOnce(
        sandpiper::arrow_snapshot::ArrowHosts,
        sandpiper::arrow_snapshot::ArrowVms,
    ) -> Result<sandpiper::snapshot::Cluster, sandpiper::snapshot::SnapshotError>,
) -> anyhow::Result<(Duration, sandpiper::snapshot::Cluster)> {
    let started = Instant::now();
    let (arrow_hosts, arrow_vms) = streams.read().map_err(|e| anyhow::anyhow!("{e}"))?;
    let cluster = build(arrow_hosts, arrow_vms).map_err(|e| anyhow::anyhow!("{e}"))?;
    let took = started.elapsed();
    ensure!(cluster.inventory.host_count() == hosts);
    Ok((took, cluster))
}

/// Hosts whose free memory changes between two decisions of a live
/// cluster: a hundredth.
fn changed(hosts: usize) -> usize {
    (hosts / 100).max(1)
}

/// Lowers the free memory of [`changed`] hosts of `snapshot`, a
/// different hundredth each `round`.
fn change_free_memory(snapshot: &mut sandpiper::snapshot::Snapshot, round: usize) {
    let hosts = snapshot.hosts.len();
    for k in 0..changed(hosts) {
        let host = &mut snapshot.hosts[(round * 7_919 + k * 101) % hosts];
        if let Some(free) = host.metrics.get_mut("memory_free_mib") {
            *free = (*free - 1.0).max(0.0);
        }
    }
}

/// The two explain forms of an inline decision: the default (full) and
/// the summary.
const EXPLAINS: [Option<&str>; 2] = [None, Some("summary")];
/// Their modes' names.
const INLINE_MODES: [&str; 2] = ["inline", "inline_summary"];
const COMPACT_MODES: [&str; 2] = ["compact", "compact_summary"];

/// Runs decisions of two forms alternately (`decide(0)`, `decide(1)`),
/// `WARMUP_RUNS` of each untimed, then `runs` of each: each form's times
/// in milliseconds, measured side by side.
fn time_alternating(
    runs: usize,
    mut decide: impl FnMut(usize) -> anyhow::Result<Duration>,
) -> anyhow::Result<[Vec<f64>; 2]> {
    let mut times = [Vec::with_capacity(runs), Vec::with_capacity(runs)];
    for i in 0..WARMUP_RUNS + runs {
        for (form, times) in times.iter_mut().enumerate() {
            let took = decide(form)?;
            if i >= WARMUP_RUNS {
                times.push(ms(took));
            }
        }
    }
    Ok(times)
}

/// The host an answer chose (`none` when it chose none).
fn chosen_host(answer: &[u8]) -> anyhow::Result<String> {
    let answer: Value = serde_json::from_slice(answer)?;
    Ok(answer["chosen_host"].as_str().unwrap_or("none").to_owned())
}

/// Attempts a decision may take: on a machine shared with other builds a
/// unit starved of CPU answers 503 `overloaded` with `Retry-After`, and an
/// engine retries, as this bench does.
const ATTEMPTS: usize = 5;
/// How long to wait before retrying a 503 (its `Retry-After` is 1 s).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Retries the bench had to make (503s), printed with each line.
static RETRIES: AtomicUsize = AtomicUsize::new(0);

/// POSTs `body` to `path` until it is answered (503s retried, counted in
/// [`RETRIES`]); the answer and the time of the answered attempt.
fn post(client: &mut Client, path: &str, body: Vec<u8>) -> anyhow::Result<(Vec<u8>, Duration)> {
    post_as(client, path, "application/json", body)
}

/// [`post`] with a body of `content_type`.
fn post_as(
    client: &mut Client,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> anyhow::Result<(Vec<u8>, Duration)> {
    for _ in 0..ATTEMPTS {
        let started = Instant::now();
        let (code, bytes) = client.raw("POST", path, content_type, body.clone())?;
        let took = started.elapsed();
        match code {
            200 => return Ok((bytes, took)),
            503 => {
                RETRIES.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(RETRY_AFTER);
            }
            _ => bail!("{path}: {code} {}", String::from_utf8_lossy(&bytes)),
        }
    }
    bail!("{path}: still 503 after {ATTEMPTS} attempts")
}

fn print(mode: &str, hosts: usize, times: &[f64], extra: &str) {
    println!(
        "nova_http hosts={hosts} mode={mode} runs={} median_ms={:.2} min_ms={:.2} load={} retries={} {extra}",
        times.len(),
        median(times),
        times.iter().copied().fold(f64::INFINITY, f64::min),
        load_average(),
        RETRIES.swap(0, Ordering::Relaxed)
    );
}

/// Each unit called by the decision `answer` explains, by name: the
/// candidates it judged, how many of its answers were reused, and the
/// time its call took (µs).
fn unit_costs(answer: &Value) -> Vec<(String, (u64, f64, f64))> {
    let explain = &answer["explain"];
    let filters = explain["filters"].as_array().into_iter().flatten();
    let scores = explain["scores"].as_array().into_iter().flatten();
    filters
        .chain(scores)
        .filter_map(|record| {
            let elapsed = record["usage"]["elapsed_us"].as_f64()?;
            let unit = record["unit"].as_str()?.to_owned();
            // A filter's candidates, a weight's survivors.
            let input = record["input"].as_u64().unwrap_or_else(|| {
                record["hosts"]
                    .as_array()
                    .map_or(0, |hosts| hosts.len() as u64)
            });
            let reused = record["reused"].as_f64().unwrap_or(0.0);
            Some((unit, (input, reused, elapsed)))
        })
        .collect()
}

/// Nova's policy in this process, from the same embedded components the
/// server loads, under the sandbox's default limits.
struct InProcess {
    policy: Policy,
}

impl InProcess {
    fn new() -> anyhow::Result<InProcess> {
        let runtime = Runtime::new(Limits::default()).context("starting the sandbox runtime")?;
        let mut by_name = std::collections::HashMap::new();
        for builtin in UNITS.iter().filter(|u| u.package.contains("-nova-")) {
            let unit: Arc<dyn Unit> = runtime
                .load(builtin.wasm)
                .with_context(|| format!("loading {}", builtin.package))?;
            by_name.insert(unit.info().name.clone(), unit);
        }
        let unit = |name: &str| -> anyhow::Result<Arc<dyn Unit>> {
            by_name
                .get(name)
                .cloned()
                .with_context(|| format!("built-in unit {name}"))
        };
        let mut builder = Policy::builder().combination(Combination::Normalised);
        for name in FILTERS {
            builder = builder.filter(unit(name)?);
        }
        let policy = builder
            .score(unit(WEIGHER)?, 1)
            .build()
            .map_err(|e| anyhow::anyhow!("Nova's policy: {e:?}"))?;
        Ok(InProcess { policy })
    }
}

/// Creates Nova's policy on the server; its id.
fn nova_policy(addr: std::net::SocketAddr) -> anyhow::Result<String> {
    support::create_policy(
        addr,
        &json!({ "name": "bench-nova", "combination": "normalised" }),
        &FILTERS,
        &[(WEIGHER, 1)],
    )
}
