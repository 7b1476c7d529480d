//! The store's writer storing held decisions, without HTTP, the turn or
//! units: what one decision costs the writer, in CPU and in time to its
//! acknowledgement, with and without its entry in the decisions log.
//!
//! Each decision is what a held decision queues: a claim on a host, and
//! (mode `claim+log`) its log entry, a summary answer of the size and shape
//! `http_schedule` logs (about 6 KB), its request and the claim it made, in
//! a cluster whose log is kept to the server's default 1,000 decisions, so
//! the log is trimmed as on a busy server. Mode `claim` stores the claim
//! alone. `in_flight=1` waits for each acknowledgement before the next
//! decision (one decision per transaction); `in_flight=8` has eight
//! callers, as `http_schedule`'s clients, so decisions share transactions
//! when the writer is busy. The modes alternate round by round in one
//! process, on one SQLite file, because this two-core machine's speed
//! drifts by more than the differences compared.
//!
//! CPU is the process's (the writer's task, SQLite's threads and the
//! background checkpointer), per decision stored.
//!
//! Run with: `cargo bench --bench writer` (figures in docs/performance.md).
//! Prints first the answer's size as text and packed (`store/packed.rs`)
//! and the median time to pack and unpack it, then per round
//! `writer mode=... in_flight=... decisions=... per_s=... cpu_us_per_decision=... ack_p50_us=... ack_p99_us=... load=...`,
//! then per mode the medians over the rounds, and per `in_flight` the log's
//! share: `writer_log in_flight=... cpu_log_over_claim=...`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use sandpiper::pipeline::{Combination, ParamValues};
use sandpiper::store::claims::ClaimRow;
use sandpiper::store::clusters::ClusterRecord;
use sandpiper::store::decisions::{DecisionKind, LoggedDecision, Retention};
use sandpiper::store::packed::Packed;
use sandpiper::store::policies::PolicyRecord;
use sandpiper::store::writer::Batch;
use sandpiper::store::{Rows, Store, StoreError};
use serde_json::json;
use uuid::Uuid;

mod support;

/// Decisions stored per mode and round.
const DECISIONS: usize = 3_000;
/// Rounds; each runs every mode once.
const ROUNDS: usize = 3;
/// The server's default retention (`placement::PlacementConfig`).
const KEEP: u32 = 1_000;
/// The log's retention: `KEEP` decisions, none too old to keep.
const RETENTION: Retention = Retention {
    count: KEEP,
    max_age: Duration::from_secs(7 * 24 * 3600),
};

/// One held decision as the turn queues it: its claim and, optionally, its
/// log entry.
struct Decision {
    cluster_id: Uuid,
    claim: ClaimRow,
    logged: Option<(LoggedDecision, Retention)>,
}

impl Rows for Decision {
    fn add_to(&self, batch: &mut Batch) -> Result<(), StoreError> {
        batch.put_claim(self.cluster_id, self.claim.clone());
        if let Some((decision, retention)) = &self.logged {
            batch.log_decision(decision.clone(), *retention);
        }
        Ok(())
    }

    fn clusters(&self) -> Vec<Uuid> {
        vec![self.cluster_id]
    }
}

/// A claim's resources as the server stores them.
const RESOURCES: &str = r#"{"memory_mib":2048.0,"memory_guaranteed_mib":2048.0,"vcpus":2.0,"cpu_vcpu_percent":20.0,"disk_gib":0.0,"vms":1.0}"#;

/// A summary answer shaped as `http_schedule`'s log entries: 21 filters
/// (skipped or reused over a 500-host window), 8 weights, the best hosts.
fn summary_answer(id: Uuid, cluster_id: Uuid, vm: &str) -> String {
    let filters: Vec<_> = (0..21)
        .map(|i| {
            json!({
                "unit": format!("Filter-{i:02}"), "input": 500, "survivors": 500,
                "rejected": [], "other_reasons": 0, "other_hosts": 0, "failure": null,
                "skipped": "the request has none of: dedicated-hosts, current-host",
            })
        })
        .collect();
    let scores: Vec<_> = (0..8)
        .map(|i| {
            json!({
                "unit": format!("Weight-{i:02}"), "factor": 1.0, "input": 500, "failure": null,
                "best": (0..5).map(|h| json!({"host": format!("host-0{h:04}"), "score": h})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "decision_id": id, "dry_run": false, "cluster_id": cluster_id, "vm_id": vm,
        "chosen_host": "host-02701", "complete": true, "mode": "all_or_nothing",
        "instances": [{"vm_id": vm, "host": "host-02701", "explain": {
            "combination": "rank", "candidates": 500,
            "considered": "considered 500 of 10000 hosts (sampled window 6 of 20: held hosts 2500 to 2999, rotating with each decision)",
            "filters": filters, "scores": scores,
            "ranked": (0..5).map(|h| json!({"host": format!("host-0{h:04}"), "total": 66694.0})).collect::<Vec<_>>(),
            "outcome": "weighed", "winner": "host-02701", "tied_with": 0,
        }}],
    })
    .to_string()
}

/// A decision's claim and log entry, with a time-ordered id as the server
/// gives it; `answer` is made once, so that the CPU measured is the
/// store's (packing the answer included).
fn decision(cluster_id: Uuid, vm: String, answer: &str, log: bool) -> Decision {
    let id = Uuid::now_v7();
    let now = sandpiper::time::Timestamp::now().0;
    let claim = ClaimRow {
        vm_id: vm.clone(),
        host_id: "host-02701".to_owned(),
        resources: RESOURCES.to_owned(),
        decision_id: id,
        created_at_ms: now,
        expires_at_ms: now + 600_000,
        covered_from: None,
    };
    let logged = log.then(|| {
        let decision = LoggedDecision {
            id,
            cluster_id,
            kind: DecisionKind::Schedule,
            vm_id: Some(vm.clone()),
            host_id: Some("host-02701".to_owned()),
            answer: answer.to_owned(),
            full: None,
            claims: vec![(vm.clone(), "host-02701".to_owned())],
            request: Some(format!(
                r#"{{"vm":{{"id":"{vm}","memory_mib":2048.0,"vcpus":2}}}}"#
            )),
        };
        (decision, RETENTION)
    });
    Decision {
        cluster_id,
        claim,
        logged,
    }
}

/// Times packed per median of [`packing_cost`].
const PACKINGS: usize = 2_000;

/// The median time to pack `answer` as the writer does for each logged
/// decision, and to unpack it as a read of the log does, in µs.
fn packing_cost(answer: &str) -> anyhow::Result<(f64, f64)> {
    let mut pack = Vec::with_capacity(PACKINGS);
    let mut unpack = Vec::with_capacity(PACKINGS);
    for _ in 0..PACKINGS {
        let started = Instant::now();
        let packed = std::hint::black_box(Packed::pack(answer));
        pack.push(started.elapsed().as_secs_f64() * 1e6);
        let stored = Packed::from_stored(packed.codec(), packed.into_bytes());
        let started = Instant::now();
        let text = stored.unpack("the bench's answer")?;
        unpack.push(started.elapsed().as_secs_f64() * 1e6);
        anyhow::ensure!(text == answer, "the answer did not unpack as packed");
    }
    Ok((support::median(&pack), support::median(&unpack)))
}

/// CPU time of the whole process so far.
fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

struct Figures {
    per_s: f64,
    cpu_us: f64,
    ack_p50_us: f64,
    ack_p99_us: f64,
}

/// Stores `DECISIONS` decisions with `in_flight` callers.
async fn run(
    store: &Store,
    cluster_id: Uuid,
    answer: &Arc<str>,
    tag: &str,
    log: bool,
    in_flight: usize,
) -> anyhow::Result<Figures> {
    let started = Instant::now();
    let cpu = process_cpu();
    let mut callers = Vec::new();
    for caller in 0..in_flight {
        let store = store.clone();
        let tag = tag.to_owned();
        let answer = Arc::clone(answer);
        callers.push(tokio::spawn(async move {
            let mut acks = Vec::with_capacity(DECISIONS / in_flight);
            for i in (caller..DECISIONS).step_by(in_flight) {
                let job = decision(cluster_id, format!("vm-{tag}-{i}"), &answer, log);
                let queued = Instant::now();
                store.submit(job).wait().await?;
                acks.push(queued.elapsed());
            }
            anyhow::Ok(acks)
        }));
    }
    let mut acks = Vec::with_capacity(DECISIONS);
    for caller in callers {
        acks.extend(caller.await.context("a caller panicked")??);
    }
    let elapsed = started.elapsed();
    let cpu = process_cpu() - cpu;
    acks.sort();
    let at = |q: f64| acks[((acks.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    Ok(Figures {
        per_s: DECISIONS as f64 / elapsed.as_secs_f64(),
        cpu_us: cpu.as_secs_f64() * 1e6 / DECISIONS as f64,
        ack_p50_us: at(0.5),
        ack_p99_us: at(0.99),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir().context("temp dir")?;
    let store = Store::open(&dir.path().join("writer.db"))
        .await
        .context("opening the store")?;
    let policy = PolicyRecord {
        id: Uuid::new_v4(),
        name: "bench".to_owned(),
        description: String::new(),
        locked: false,
        is_default: false,
        combination: Combination::Rank,
        params: ParamValues::new(),
        filters: Vec::new(),
        weights: Vec::new(),
        balance: None,
        created_at: String::new(),
        updated_at: String::new(),
    };
    let cluster = ClusterRecord {
        id: Uuid::new_v4(),
        name: "bench".to_owned(),
        description: String::new(),
        policy_id: policy.id,
        params: ParamValues::new(),
        balance: Default::default(),
        created_at: String::new(),
        updated_at: String::new(),
    };
    let mut tx = store.write().await.context("a write transaction")?;
    tx.save_policy(&policy).await.context("the policy")?;
    tx.save_cluster(&cluster).await.context("the cluster")?;
    tx.commit().await.context("committing the cluster")?;
    let answer: Arc<str> =
        summary_answer(Uuid::now_v7(), cluster.id, "vm-adaptive-default-0-4939").into();
    let (pack_us, unpack_us) = packing_cost(&answer)?;
    println!(
        "writer answer_bytes={} packed_bytes={} pack_us_median={pack_us:.1} \
         unpack_us_median={unpack_us:.1} keep={KEEP}",
        answer.len(),
        Packed::pack(&answer).bytes().len()
    );

    // Fill the log to its retention first, so every round trims.
    run(&store, cluster.id, &answer, "fill", true, 8).await?;

    let modes = [("claim", false), ("claim+log", true)];
    let mut figures: Vec<((&str, usize), Vec<Figures>)> = Vec::new();
    for round in 0..ROUNDS {
        for in_flight in [1, 8] {
            for (mode, log) in modes {
                let tag = format!("{round}-{in_flight}-{mode}");
                let f = run(&store, cluster.id, &answer, &tag, log, in_flight).await?;
                println!(
                    "writer mode={mode} in_flight={in_flight} decisions={DECISIONS} round={round} \
                     per_s={:.0} cpu_us_per_decision={:.1} ack_p50_us={:.0} ack_p99_us={:.0} load={}",
                    f.per_s,
                    f.cpu_us,
                    f.ack_p50_us,
                    f.ack_p99_us,
                    support::load_average()
                );
                match figures
                    .iter_mut()
                    .find(|(key, _)| *key == (mode, in_flight))
                {
                    Some((_, all)) => all.push(f),
                    None => figures.push(((mode, in_flight), vec![f])),
                }
            }
        }
    }
    for ((mode, in_flight), all) in &figures {
        println!(
            "writer_rounds mode={mode} in_flight={in_flight} rounds={ROUNDS} per_s_median={:.0} \
             cpu_us_per_decision_median={:.1} ack_p50_us_median={:.0} ack_p99_us_median={:.0}",
            support::median(&all.iter().map(|f| f.per_s).collect::<Vec<_>>()),
            support::median(&all.iter().map(|f| f.cpu_us).collect::<Vec<_>>()),
            support::median(&all.iter().map(|f| f.ack_p50_us).collect::<Vec<_>>()),
            support::median(&all.iter().map(|f| f.ack_p99_us).collect::<Vec<_>>()),
        );
    }
    for in_flight in [1, 8] {
        let cpu = |mode: &str| {
            figures
                .iter()
                .find(|(key, _)| *key == (mode, in_flight))
                .map(|(_, all)| support::median(&all.iter().map(|f| f.cpu_us).collect::<Vec<_>>()))
                .unwrap_or(f64::NAN)
        };
        println!(
            "writer_log in_flight={in_flight} cpu_log_over_claim={:.2}",
            cpu("claim+log") / cpu("claim")
        );
    }
    store.close().await;
    Ok(())
}
