//! Issue #5's stress test over real HTTP: sixteen clients schedule VMs of
//! one size into one small held cluster at once until every one of them
//! has been refused twice (the cluster is full). Afterwards the server's
//! own state — its claims, its inventory summary and its decisions log —
//! must show:
//!
//! * no host overcommitted: replaying the log in the order the cluster's
//!   lock let the decisions through, every claim went to a host that had
//!   room for it under the policy's filters, computed here from the pushed
//!   figures with the filters' own rules;
//! * every refusal came when no host had room (or, for `count = N`, fewer
//!   than N slots were left), says so in the documented answer shape and
//!   names the filter that rejected each host;
//! * every success has exactly one claim, on the chosen host, under the
//!   VM's id; no VM has two; a re-scheduled VM's claim was replaced;
//! * the cluster was really filled: every host holds exactly as many VMs
//!   as its figures allow, and one more VM fits nowhere.
//!
//! No assertion depends on timing or on how the clients interleave: the
//! log's order is the lock's order, and the checks replay it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::support::{Client, Server, expect_status, unit_id};

/// Concurrent clients.
const CLIENTS: usize = 16;

/// Refusals of a single VM each client waits for before it stops.
const REFUSALS_PER_CLIENT: usize = 2;

/// A client gives up after this many requests (a bug that never refuses
/// must fail the test, not hang it).
const MAX_REQUESTS_PER_CLIENT: usize = 40;

/// Every VM of the test: 2 GiB, 1 GiB of it guaranteed, two vCPUs.
const VM_MEMORY_MIB: f64 = 2048.0;
const VM_GUARANTEED_MIB: f64 = 1024.0;
const VM_VCPUS: f64 = 2.0;

/// The policy's settings: the Memory filter may promise 150 % of a host's
/// memory; CoreFilter may hand out two vCPUs per hardware thread.
const MAX_MEMORY_OVER_COMMIT: f64 = 150.0;
const CPU_ALLOCATION_RATIO: f64 = 2.0;

/// The policy's filters, in the order they run.
const FILTERS: [&str; 3] = ["CPU", "Memory", "CoreFilter"];

/// One host as pushed: the figures the filters read.
#[derive(Clone, Copy, Debug)]
pub struct HostSpec {
    pub id: &'static str,
    pub total: f64,
    pub free: f64,
    pub committed: f64,
    pub reserved: f64,
    pub cores: f64,
    pub threads: f64,
    pub vcpus_used: f64,
}

/// Eight hosts, each full for a different reason: free memory (h1, h7),
/// memory promised under the over-commit limit (h2, h8), vCPUs at the
/// allocation ratio (h3, h6), too little memory for even one VM (h4),
/// too few cores for the VM's vCPUs (h5).
pub const HOSTS: [HostSpec; 8] = [
    host("h1", 16384.0, 12288.0, 8192.0, 0.0, 8.0, 16.0, 8.0),
    host("h2", 16384.0, 16000.0, 20480.0, 512.0, 8.0, 16.0, 0.0),
    host("h3", 32768.0, 30000.0, 0.0, 0.0, 4.0, 4.0, 2.0),
    host("h4", 8192.0, 1500.0, 0.0, 0.0, 8.0, 16.0, 0.0),
    host("h5", 16384.0, 16384.0, 0.0, 0.0, 1.0, 2.0, 0.0),
    host("h6", 16384.0, 9000.0, 4096.0, 0.0, 8.0, 8.0, 10.0),
    host("h7", 65536.0, 10240.0, 0.0, 0.0, 32.0, 64.0, 0.0),
    host("h8", 16384.0, 16384.0, 23552.0, 0.0, 8.0, 16.0, 0.0),
];

/// How many of the test's VMs each host of [`HOSTS`] takes, worked out by
/// hand from the figures (and checked against [`capacity`]).
const EXPECTED_CAPACITY: [usize; 8] = [6, 3, 3, 0, 0, 3, 5, 1];

#[allow(clippy::too_many_arguments)]
const fn host(
    id: &'static str,
    total: f64,
    free: f64,
    committed: f64,
    reserved: f64,
    cores: f64,
    threads: f64,
    vcpus_used: f64,
) -> HostSpec {
    HostSpec {
        id,
        total,
        free,
        committed,
        reserved,
        cores,
        threads,
        vcpus_used,
    }
}

impl HostSpec {
    pub fn json(&self) -> Value {
        json!({
            "id": self.id,
            "metrics": {
                "memory_total_mib": self.total,
                "memory_free_mib": self.free,
                "memory_committed_mib": self.committed,
                "memory_reserved_mib": self.reserved,
                "cpu_cores": self.cores,
                "cpu_threads": self.threads,
                "vcpus_used": self.vcpus_used,
            }
        })
    }
}

/// The first filter (in run order) that rejects one more of the test's
/// VMs on `host` while `claimed` of them are claimed there, or `None` when
/// it fits. The rules are the units' own (policies/ovirt/cpu, policies/ovirt/memory,
/// guest-sdk/nova-ops/src/capacity.rs) over the usage columns with the
/// claims folded in (host/src/placement/resources.rs).
pub fn rejected_by(host: &HostSpec, claimed: usize) -> Option<&'static str> {
    let n = claimed as f64;
    // CPU: at least as many cores as the VM has vCPUs (CountThreadsAsCores
    // is false).
    if host.cores < VM_VCPUS {
        return Some("CPU");
    }
    // Memory: free memory after the claims (no swap) holds the VM, and
    // what is promised stays within the over-commit limit.
    let free = host.free - n * VM_MEMORY_MIB;
    if host.total <= 0.0 || free < VM_MEMORY_MIB {
        return Some("Memory");
    }
    let limit = host.total * MAX_MEMORY_OVER_COMMIT / 100.0;
    let schedulable = limit - (host.committed + n * VM_GUARANTEED_MIB) - host.reserved;
    if schedulable < VM_GUARANTEED_MIB {
        return Some("Memory");
    }
    // CoreFilter: vCPUs in use plus the VM's within threads × ratio.
    let cpus = if host.threads > 0.0 {
        host.threads
    } else {
        host.cores
    };
    if cpus > 0.0 {
        let limit = cpus * CPU_ALLOCATION_RATIO;
        let used = host.vcpus_used + n * VM_VCPUS;
        if VM_VCPUS > cpus || limit - used < VM_VCPUS {
            return Some("CoreFilter");
        }
    }
    None
}

/// How many of the test's VMs `host` takes.
pub fn capacity(host: &HostSpec) -> usize {
    (0..)
        .find(|&n| rejected_by(host, n).is_some())
        .expect("finite")
}

/// One of the test's VMs.
pub fn vm(id: &str) -> Value {
    json!({
        "id": id,
        "memory_mib": VM_MEMORY_MIB,
        "memory_guaranteed_mib": VM_GUARANTEED_MIB,
        "vcpus": VM_VCPUS as u32,
    })
}

/// One schedule request a client made, with its answer.
#[derive(Clone, Debug)]
struct Sent {
    client: usize,
    body: Value,
    status: u16,
    answer: Value,
}

impl Sent {
    fn count(&self) -> usize {
        self.body["count"].as_u64().unwrap_or(1) as usize
    }
}

/// The claims the replay holds: VM → (host, decision).
type Ledger = BTreeMap<String, (String, String)>;

/// Replays the decisions log oldest first (the order the cluster's lock
/// let them through), checking each against the room the hosts had at
/// that moment. Returns the claims it ends with.
fn replay(decisions: &[Value], hosts: &[HostSpec]) -> Result<Ledger, String> {
    let mut ledger = Ledger::new();
    let on = |ledger: &Ledger, host: &str, except: &BTreeSet<String>| {
        ledger
            .iter()
            .filter(|(vm, (h, _))| h == host && !except.contains(*vm))
            .count()
    };
    for (step, decision) in decisions.iter().enumerate() {
        let answer = &decision["answer"];
        let id = decision["id"].as_str().ok_or("a decision without an id")?;
        let instances = answer["instances"].as_array().ok_or("no instances")?;
        let asked: BTreeSet<String> = instances
            .iter()
            .map(|i| i["vm_id"].as_str().unwrap_or_default().to_owned())
            .chain(
                answer["not_tried"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|v| v.as_str().unwrap_or_default().to_owned()),
            )
            .collect();
        let count = asked.len();
        // Room before the decision, not counting the claims of the VMs it
        // places: placing a VM again replaces its claim.
        let free_slots: usize = hosts
            .iter()
            .map(|h| capacity(h).saturating_sub(on(&ledger, h.id, &asked)))
            .sum();
        let claims = answer["claims"].as_array().ok_or("no claims list")?;
        if answer["complete"] == true {
            if claims.len() != count {
                return Err(format!(
                    "decision {step} ({id}) is complete with {} claims for {count} instances",
                    claims.len()
                ));
            }
        } else {
            if answer["reason"].as_str().is_none_or(str::is_empty) {
                return Err(format!("decision {step} ({id}) refused without a reason"));
            }
            match answer["mode"].as_str() {
                Some("all_or_nothing") => {
                    if !claims.is_empty() || free_slots >= count {
                        return Err(format!(
                            "decision {step} ({id}) refused {count} instances (all or nothing) \
                             with {free_slots} slots free, claiming {}",
                            claims.len()
                        ));
                    }
                }
                Some("best_effort") => {
                    if claims.len() != free_slots {
                        return Err(format!(
                            "decision {step} ({id}) placed {} of {count} (best effort) with \
                             {free_slots} slots free",
                            claims.len()
                        ));
                    }
                }
                other => return Err(format!("decision {step}: unknown mode {other:?}")),
            }
        }
        for vm in &asked {
            ledger.remove(vm);
        }
        for claim in claims {
            let vm = claim["vm_id"].as_str().ok_or("a claim without a VM")?;
            let host = claim["host_id"].as_str().ok_or("a claim without a host")?;
            if claim["decision_id"] != decision["id"] {
                return Err(format!(
                    "decision {step}: claim of {vm} names another decision"
                ));
            }
            if !asked.contains(vm) {
                return Err(format!(
                    "decision {step}: claim of {vm}, which it did not place"
                ));
            }
            let spec = hosts
                .iter()
                .find(|h| h.id == host)
                .ok_or_else(|| format!("decision {step}: claim on unknown host {host}"))?;
            let held = on(&ledger, host, &BTreeSet::new());
            if let Some(filter) = rejected_by(spec, held) {
                return Err(format!(
                    "decision {step} ({id}) overcommitted {host}: {vm} claimed with {held} VMs \
                     there already, which {filter} rejects"
                ));
            }
            if ledger
                .insert(vm.to_owned(), (host.to_owned(), id.to_owned()))
                .is_some()
            {
                return Err(format!("decision {step}: {vm} claimed twice"));
            }
        }
    }
    Ok(ledger)
}

/// The hosts each filter of a refused pick rejected, from its summary.
fn rejected_sets(explain: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut sets = BTreeMap::new();
    for filter in explain["filters"].as_array().expect("filters") {
        let unit = filter["unit"].as_str().expect("unit").to_owned();
        assert_eq!(
            filter["other_reasons"], 0,
            "every reason listed: {filter:#}"
        );
        let mut hosts = BTreeSet::new();
        for reason in filter["rejected"].as_array().expect("rejected") {
            let text = reason["reason"].as_str().expect("a reason");
            assert!(!text.is_empty(), "an empty reason: {filter:#}");
            let examples = reason["examples"].as_array().expect("examples");
            assert_eq!(
                reason["hosts"].as_u64(),
                Some(examples.len() as u64),
                "every host named: {filter:#}"
            );
            hosts.extend(examples.iter().map(|h| h.as_str().expect("id").to_owned()));
        }
        if !hosts.is_empty() {
            sets.insert(unit, hosts);
        }
    }
    sets
}

/// What each filter rejects when every host is full.
fn rejected_when_full() -> BTreeMap<String, BTreeSet<String>> {
    let mut sets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for h in &HOSTS {
        let filter = rejected_by(h, capacity(h)).expect("full");
        sets.entry(filter.to_owned())
            .or_default()
            .insert(h.id.to_owned());
    }
    sets
}

/// Makes a policy of the test's capacity filters (CPU, Memory,
/// CoreFilter, in that order; even memory distribution as its weight)
/// with its over-commit settings, and returns its id.
pub fn capacity_policy(admin: &Client, name: &str) -> String {
    let policy = expect_status(
        &admin.post(
            "/api/v1/schedulingpolicies",
            &json!({ "name": name, "description": "capacity filters only" }),
        ),
        201,
    );
    let id = policy["id"].as_str().expect("id").to_owned();
    let policy_path = format!("/api/v1/schedulingpolicies/{id}");
    for name in FILTERS {
        let unit = unit_id(admin, name);
        expect_status(
            &admin.post(
                &format!("{policy_path}/filters"),
                &json!({ "scheduling_policy_unit": { "id": unit } }),
            ),
            201,
        );
    }
    let even = unit_id(admin, "OptimalForMemoryEvenDistribution");
    expect_status(
        &admin.post(
            &format!("{policy_path}/weights"),
            &json!({ "scheduling_policy_unit": { "id": even }, "factor": 1 }),
        ),
        201,
    );
    let updated = expect_status(
        &admin.put(
            &policy_path,
            &json!({ "properties": [
                { "name": "MaxMemoryOverCommit", "value": MAX_MEMORY_OVER_COMMIT.to_string() },
                { "name": "cpu_allocation_ratio", "value": format!("{CPU_ALLOCATION_RATIO:.1}") },
            ] }),
        ),
        200,
    );
    let order: Vec<&str> = updated["filters"]
        .as_array()
        .expect("filters")
        .iter()
        .map(|f| f["scheduling_policy_unit"]["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        order, FILTERS,
        "the filters run in the order the test assumes"
    );
    id
}

/// Makes the capacity policy, a cluster running it with [`HOSTS`] pushed,
/// and an engine token.
fn setup(server: &Server) -> (String, Client) {
    let admin = server.admin();
    let policy = capacity_policy(&admin, "load");
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": "load", "scheduling_policy": { "id": policy } }),
        ),
        201,
    );
    let cluster_path = format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"));
    let hosts: Vec<Value> = HOSTS.iter().map(HostSpec::json).collect();
    let held = expect_status(
        &admin.put(
            &format!("{cluster_path}/inventory"),
            &json!({ "generation": 1, "hosts": hosts }),
        ),
        200,
    );
    assert_eq!(held["hosts"], HOSTS.len());
    let token = expect_status(
        &admin.post(
            "/api/v1/tokens",
            &json!({ "name": "load-engine", "role": "engine" }),
        ),
        201,
    );
    let engine = server.client(Some(token["secret"].as_str().expect("secret")));
    (cluster_path, engine)
}

fn schedule(engine: &Client, cluster_path: &str, client: usize, body: Value) -> Sent {
    let reply = engine.post(&format!("{cluster_path}/schedule"), &body);
    let answer = if reply.body.is_empty() {
        Value::Null
    } else {
        reply.json()
    };
    Sent {
        client,
        body,
        status: reply.status,
        answer,
    }
}

/// One client: single VMs until it has been refused
/// [`REFUSALS_PER_CLIENT`] times, with a few special requests mixed in.
fn run_client(engine: &Client, cluster_path: &str, client: usize) -> Vec<Sent> {
    let mut sent = Vec::new();
    let mut refusals = 0;
    let mut rescheduled = false;
    for n in 0..MAX_REQUESTS_PER_CLIENT {
        let body = match (client, n) {
            (1, 1) => json!({ "vm": vm("c01-burst"), "count": 4, "mode": "best_effort" }),
            (3, 1) => json!({ "vm": vm("c03-pair"), "count": 2 }),
            // After its first refusal (the cluster is full), client 2
            // places a VM placed before the load again: its own claim
            // does not count against it, so it fits, and it must replace
            // that claim rather than add one.
            (2, _) if refusals == 1 && !rescheduled => {
                rescheduled = true;
                json!({ "vm": vm("pre-single") })
            }
            _ => json!({ "vm": vm(&format!("c{client:02}-v{n:02}")) }),
        };
        let one = schedule(engine, cluster_path, client, body);
        let refused = one.status == 200 && one.answer["complete"] == false;
        let single = one.count() == 1;
        sent.push(one);
        if refused && single {
            refusals += 1;
            if refusals == REFUSALS_PER_CLIENT {
                break;
            }
        }
    }
    sent
}

#[test]
fn concurrent_clients_fill_a_cluster_without_overcommitting_it() {
    let capacities: Vec<usize> = HOSTS.iter().map(capacity).collect();
    assert_eq!(capacities, EXPECTED_CAPACITY, "the test's own arithmetic");
    let total_capacity: usize = capacities.iter().sum();

    let dir = tempfile::tempdir().expect("temp dir");
    // Refused requests wait for pending claims once (oVirt's delay and
    // retry); nothing resolves during the test, so keep the wait short.
    let server = Server::start_with(dir.path(), &[], &[("SANDPIPER_RETRY_WAIT_MS", "20")]);
    let (cluster_path, engine) = setup(&server);
    let admin = server.admin();

    // Before the load, one VM and a batch of three, one request each.
    let mut sent = vec![
        schedule(
            &engine,
            &cluster_path,
            usize::MAX,
            json!({ "vm": vm("pre-single") }),
        ),
        schedule(
            &engine,
            &cluster_path,
            usize::MAX,
            json!({ "vm": vm("pre-batch"), "count": 3 }),
        ),
    ];
    for one in &sent {
        assert_eq!(one.status, 200, "{:#}", one.answer);
        assert_eq!(one.answer["complete"], true, "{:#}", one.answer);
    }
    let batch: Vec<&str> = sent[1].answer["claims"]
        .as_array()
        .expect("claims")
        .iter()
        .map(|c| c["vm_id"].as_str().expect("vm"))
        .collect();
    assert_eq!(batch, ["pre-batch-0", "pre-batch-1", "pre-batch-2"]);

    let started = std::time::Instant::now();
    let per_client: Vec<Vec<Sent>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|client| {
                let engine = engine.clone();
                let cluster_path = cluster_path.as_str();
                scope.spawn(move || run_client(&engine, cluster_path, client))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    let load_time = started.elapsed();
    for (client, mine) in per_client.iter().enumerate() {
        let refused = mine
            .iter()
            .filter(|s| s.answer["complete"] == false && s.count() == 1)
            .count();
        assert_eq!(
            refused, REFUSALS_PER_CLIENT,
            "client {client} stopped before the cluster refused it twice"
        );
    }
    sent.extend(per_client.into_iter().flatten());

    // Every request was answered 200: the decision, or a refusal that says
    // why. (A 503 `cluster_busy` would mean the lock starved someone.)
    for one in &sent {
        assert_eq!(
            one.status, 200,
            "client {} got {}: {:#}",
            one.client, one.status, one.answer
        );
        assert_eq!(one.answer["dry_run"], false);
        assert!(one.answer["decision_id"].is_string(), "{:#}", one.answer);
    }

    // The server's own account.
    let claims = expect_status(&admin.get(&format!("{cluster_path}/claims")), 200);
    let claims = claims["claims"].as_array().expect("claims").clone();
    let inventory = expect_status(&admin.get(&format!("{cluster_path}/inventory")), 200);
    let mut decisions = expect_status(
        &admin.get(&format!("{cluster_path}/decisions?limit=500")),
        200,
    )
    .as_array()
    .expect("decisions")
    .clone();
    decisions.reverse(); // oldest first: the order the lock let them in

    // One logged decision per request, with the answer as returned.
    assert_eq!(decisions.len(), sent.len(), "one decision per request");
    let by_id: BTreeMap<&str, &Sent> = sent
        .iter()
        .map(|s| (s.answer["decision_id"].as_str().expect("id"), s))
        .collect();
    assert_eq!(by_id.len(), sent.len(), "decision ids are unique");
    for decision in &decisions {
        let id = decision["id"].as_str().expect("id");
        let one = by_id
            .get(id)
            .unwrap_or_else(|| panic!("logged decision {id} was answered to no client"));
        assert_eq!(decision["answer"], one.answer, "the log keeps the answer");
        assert_eq!(decision["kind"], "schedule");
        assert_eq!(decision["vm_id"], one.body["vm"]["id"]);
        assert_eq!(decision["host_id"], one.answer["chosen_host"]);
    }

    // Replayed in lock order, no decision overcommitted a host, and every
    // refusal came when there really was no room.
    let ledger = replay(&decisions, &HOSTS).unwrap_or_else(|e| panic!("{e}"));

    // Every success has exactly one claim, under its VM's id, on the host
    // the answer chose; no VM has two; the numbers agree.
    let mut listed = Ledger::new();
    for claim in &claims {
        let vm = claim["vm_id"].as_str().expect("vm").to_owned();
        let entry = (
            claim["host_id"].as_str().expect("host").to_owned(),
            claim["decision_id"].as_str().expect("decision").to_owned(),
        );
        assert!(
            listed.insert(vm.clone(), entry).is_none(),
            "{vm} has two claims"
        );
        assert_eq!(claim["state"], "pending");
        assert_eq!(
            claim["resources"],
            json!({ "memory_mib": VM_MEMORY_MIB, "memory_guaranteed_mib": VM_GUARANTEED_MIB,
                    "vcpus": VM_VCPUS, "cpu_vcpu_percent": 20.0, "disk_gib": 0.0, "vms": 1.0 }),
            "{vm}"
        );
    }
    assert_eq!(
        listed, ledger,
        "the live claims are exactly the claims the log made"
    );
    let mut expected = Ledger::new();
    let mut successes = 0;
    for one in &sent {
        let answer = &one.answer;
        let placed = answer["claims"].as_array().expect("claims");
        for (i, claim) in placed.iter().enumerate() {
            assert_eq!(
                claim["host_id"], answer["instances"][i]["host"],
                "{answer:#}"
            );
            assert_eq!(
                claim["vm_id"], answer["instances"][i]["vm_id"],
                "{answer:#}"
            );
            successes += 1;
        }
        if answer["complete"] == true && one.count() == 1 {
            assert_eq!(placed.len(), 1, "{answer:#}");
            assert_eq!(placed[0]["host_id"], answer["chosen_host"]);
            assert_eq!(placed[0]["vm_id"], one.body["vm"]["id"]);
        }
        for claim in placed {
            expected.insert(
                claim["vm_id"].as_str().expect("vm").to_owned(),
                (
                    claim["host_id"].as_str().expect("host").to_owned(),
                    answer["decision_id"].as_str().expect("id").to_owned(),
                ),
            );
        }
    }
    // A client's own requests are sequential, so the one VM placed twice
    // (pre-single) ends with the claim of its second decision.
    let again: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.body["vm"]["id"] == "pre-single")
        .collect();
    assert_eq!(again.len(), 2, "pre-single was placed again");
    assert_eq!(
        again[1].answer["complete"], true,
        "a VM placed again fits in its own claim's room even in a full cluster: {:#}",
        again[1].answer
    );
    assert_eq!(
        listed["pre-single"].1,
        again[1].answer["decision_id"].as_str().expect("id"),
        "placing a VM again replaced its claim"
    );
    assert_eq!(listed, expected, "each success's claim, and nothing else");
    assert_eq!(
        successes,
        claims.len() + 1,
        "one claim per VM placed (pre-single twice, one claim)"
    );

    // The cluster is full, exactly: every host holds as many VMs as its
    // figures allow (no more: not overcommitted; no fewer: really filled).
    for (h, cap) in HOSTS.iter().zip(&capacities) {
        let on = listed.values().filter(|(host, _)| host == h.id).count();
        assert_eq!(on, *cap, "VMs claimed on {}", h.id);
        assert!(rejected_by(h, on).is_some(), "{} could take one more", h.id);
    }
    assert_eq!(claims.len(), total_capacity);
    assert_eq!(inventory["claims"], total_capacity);
    let n = total_capacity as f64;
    assert_eq!(inventory["pending"]["memory_mib"], n * VM_MEMORY_MIB);
    assert_eq!(
        inventory["pending"]["memory_guaranteed_mib"],
        n * VM_GUARANTEED_MIB
    );
    assert_eq!(inventory["pending"]["vcpus"], n * VM_VCPUS);
    assert_eq!(inventory["pending"]["vms"], n);

    // Every refusal has the documented shape and names, for each host, the
    // filter that rejected it; a single VM is refused only when every host
    // is full, so the filters are those of the full cluster.
    let full = rejected_when_full();
    let mut refusals = 0;
    for one in &sent {
        let answer = &one.answer;
        if answer["complete"] == true {
            assert_eq!(answer["reason"], Value::Null);
            continue;
        }
        refusals += 1;
        let reason = answer["reason"].as_str().expect("a refusal says why");
        let instances = answer["instances"].as_array().expect("instances");
        let failed = instances.last().expect("a pick");
        assert_eq!(failed["host"], Value::Null, "{answer:#}");
        let vm = failed["vm_id"].as_str().expect("vm");
        let explain = &failed["explain"];
        let candidates = explain["candidates"].as_u64().expect("candidates") as usize;
        assert!(
            reason.starts_with(&format!(
                "no host can take `{vm}`: of {candidates} candidates, "
            )),
            "{reason}"
        );
        assert_eq!(explain["outcome"], "no_host", "{answer:#}");
        assert_eq!(explain["winner"], Value::Null);
        // Every candidate was rejected, each by the filter that rejects
        // it when it is full: a pick finds no host only when every host
        // it considers is full (counting the instances the request placed
        // before it). The first pick considers every host; later ones only
        // the hosts that survived the pick before.
        let sets = rejected_sets(explain);
        let rejected: usize = sets.values().map(BTreeSet::len).sum();
        assert_eq!(rejected, candidates, "{answer:#}");
        for (unit, hosts) in &sets {
            assert!(
                full.get(unit).is_some_and(|f| hosts.is_subset(f)),
                "{unit} rejected {hosts:?}, not what it rejects when they are full: {answer:#}"
            );
            assert!(
                reason.contains(&format!("{unit} rejected {}", hosts.len())),
                "{reason}"
            );
        }
        if instances.len() == 1 {
            assert_eq!(candidates, HOSTS.len());
            assert_eq!(sets, full, "{answer:#}");
            assert_eq!(answer["chosen_host"], Value::Null);
        }
        if answer["mode"] == "all_or_nothing" {
            assert_eq!(answer["claims"], json!([]));
            if instances.len() > 1 {
                // A later instance failed: the earlier picks' hosts were
                // given back.
                assert!(
                    reason.ends_with("; all or nothing, so no instance was placed"),
                    "{reason}"
                );
            }
        }
    }
    assert!(refusals >= CLIENTS * REFUSALS_PER_CLIENT);

    // One more VM fits nowhere.
    let more = expect_status(
        &engine.post(
            &format!("{cluster_path}/schedule?dry_run=true"),
            &json!({ "vm": vm("one-more") }),
        ),
        200,
    );
    assert_eq!(more["complete"], false, "{more:#}");
    assert_eq!(rejected_sets(&more["instances"][0]["explain"]), full);

    eprintln!(
        "load: {CLIENTS} clients, {} decisions, {successes} instances placed ({} claims), \
         {refusals} refusals, in {load_time:?}",
        decisions.len(),
        claims.len(),
    );
}

/// The replay catches what the load test exists to catch: a claim on a
/// full host, a VM claimed twice, a refusal while there was room.
#[test]
fn the_replay_catches_overcommits_double_claims_and_false_refusals() {
    let placed = |id: &str, vm: &str, host: &str| {
        json!({ "id": id, "answer": {
            "mode": "all_or_nothing", "complete": true, "reason": null, "not_tried": [],
            "instances": [ { "vm_id": vm, "host": host } ],
            "claims": [ { "vm_id": vm, "host_id": host, "decision_id": id } ],
        } })
    };
    let refused = |id: &str, vm: &str| {
        json!({ "id": id, "answer": {
            "mode": "all_or_nothing", "complete": false, "reason": "no host", "not_tried": [],
            "instances": [ { "vm_id": vm, "host": null } ], "claims": [],
        } })
    };
    // h8 takes one VM.
    let one = [HOSTS[7]];
    assert!(replay(&[placed("d1", "a", "h8")], &one).is_ok());
    assert!(replay(&[placed("d1", "a", "h8"), refused("d2", "b")], &one).is_ok());
    // A second VM on it is an overcommit.
    let err = replay(&[placed("d1", "a", "h8"), placed("d2", "b", "h8")], &one).unwrap_err();
    assert!(err.contains("overcommitted h8"), "{err}");
    // The same VM again replaces its claim: fine.
    assert!(replay(&[placed("d1", "a", "h8"), placed("d2", "a", "h8")], &one).is_ok());
    // A refusal while the host had room.
    let err = replay(&[refused("d1", "a")], &one).unwrap_err();
    assert!(err.contains("with 1 slots free"), "{err}");
    // One decision claiming one VM twice.
    let mut twice = placed("d1", "a", "h1");
    twice["answer"]["claims"] = json!([
        { "vm_id": "a", "host_id": "h1", "decision_id": "d1" },
        { "vm_id": "a", "host_id": "h1", "decision_id": "d1" },
    ]);
    assert!(replay(&[twice], &HOSTS).is_err());
}

/// Makes a policy of the one filter `unit` with `properties`, a cluster
/// running it holding `host`, and returns the cluster's path.
fn one_filter_cluster(
    admin: &Client,
    name: &str,
    unit: &str,
    properties: Value,
    host: Value,
) -> String {
    let policy = expect_status(
        &admin.post("/api/v1/schedulingpolicies", &json!({ "name": name })),
        201,
    );
    let policy_path = format!(
        "/api/v1/schedulingpolicies/{}",
        policy["id"].as_str().expect("id")
    );
    let unit = unit_id(admin, unit);
    expect_status(
        &admin.post(
            &format!("{policy_path}/filters"),
            &json!({ "scheduling_policy_unit": { "id": unit } }),
        ),
        201,
    );
    expect_status(
        &admin.put(&policy_path, &json!({ "properties": properties })),
        200,
    );
    let cluster = expect_status(
        &admin.post(
            "/api/v1/clusters",
            &json!({ "name": name, "scheduling_policy": { "id": policy["id"] } }),
        ),
        201,
    );
    let path = format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"));
    expect_status(
        &admin.put(
            &format!("{path}/inventory"),
            &json!({ "generation": 1, "hosts": [host] }),
        ),
        200,
    );
    path
}

/// Claims keep counting once they exceed a host's free memory: a filter
/// that lets a host promise more than it has (Nova's RamFilter at a ratio
/// above 1, oVirt's Memory filter with free swap) stops at its limit.
#[test]
fn claims_past_a_hosts_free_memory_still_count() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(dir.path(), &[], &[("SANDPIPER_RETRY_WAIT_MS", "0")]);
    let admin = server.admin();
    let placed = |path: &str, prefix: &str| {
        (0..12)
            .filter(|i| {
                let answer = expect_status(
                    &admin.post(
                        &format!("{path}/schedule"),
                        &json!({ "vm": { "id": format!("{prefix}-{i}"), "memory_mib": 2048 } }),
                    ),
                    200,
                );
                answer["complete"] == true
            })
            .count()
    };
    // RamFilter at 1.5: 16 GiB with 4 GiB free may hold 24 GiB, 12 of
    // them used: room for six 2 GiB VMs.
    let ram = one_filter_cluster(
        &admin,
        "ram",
        "RamFilter",
        json!([ { "name": "ram_allocation_ratio", "value": "1.5" } ]),
        json!({ "id": "n1", "metrics": { "memory_total_mib": 16384, "memory_free_mib": 4096 } }),
    );
    // Memory with 4 GiB free and 4 GiB of free swap: room for four.
    let swap = one_filter_cluster(
        &admin,
        "swap",
        "Memory",
        json!([]),
        json!({ "id": "s1", "metrics": { "memory_total_mib": 16384, "memory_free_mib": 4096,
                                         "swap_total_mib": 4096, "swap_free_mib": 4096 } }),
    );
    assert_eq!(placed(&ram, "ram"), 6, "RamFilter at 1.5");
    // The Memory filter counts swap (it placed past the free 4 GiB) but
    // never promises more than free memory and swap together.
    let on_swap = placed(&swap, "swap");
    assert!(
        (3..=4).contains(&on_swap),
        "{on_swap} 2 GiB VMs on 4 GiB free and 4 GiB swap"
    );
}
