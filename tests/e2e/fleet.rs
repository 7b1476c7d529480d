//! Issue #13: several replicas on one PostgreSQL database. Three real
//! `sandpiper serve` processes share three clusters; engines send
//! decisions with claims to all three at once. Afterwards no host holds
//! more than it has room for, and every acknowledged claim is stored
//! exactly once, also when one replica is killed with SIGKILL in the
//! middle of the burst (its clusters move to the others within a lease).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::load::{HOSTS, capacity, capacity_policy, vm};
use crate::support::postgres::TestDatabase;
use crate::support::{Client, Server, expect_status};

/// Short leases, so the kill test's takeover is quick (the default is 5 s).
const LEASE_MS: u64 = 2000;

/// Copies of the load test's eight hosts per cluster: 21 of the test's VMs
/// fit in one copy, so a cluster takes `21 * COPIES`.
const COPIES: usize = 4;

const CLUSTERS: usize = 3;

/// Refusals (the cluster is full) after which an engine thread stops.
const REFUSALS: usize = 3;

/// A PostgreSQL database of its own for one test (dropped afterwards), a
/// copy of [`template`]: migrated, with the built-in units compiled and
/// stored, so that no test's first replica compiles them again.
struct Database {
    db: TestDatabase,
    url: String,
}

impl Database {
    fn create() -> Database {
        let db = runtime().block_on(TestDatabase::create_from(Some(template())));
        let url = db.url().to_owned();
        Database { db, url }
    }

    /// Runs `query` on this database and returns the first column of each
    /// row, as text.
    fn column(&self, query: &str) -> Vec<String> {
        use sqlx::Connection as _;
        runtime().block_on(async {
            let mut conn = sqlx::PgConnection::connect(self.db.url())
                .await
                .expect("connect");
            sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(query.to_owned()))
                .fetch_all(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("{query}: {e}"))
        })
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The database every test of this file copies: one replica started on
/// an empty database and stopped cleanly. Made once per run of the test
/// binary and left on the test server (a throwaway one, from
/// scripts/test.sh, goes with it).
fn template() -> &'static str {
    static TEMPLATE: OnceLock<String> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let db = runtime().block_on(TestDatabase::create());
        let dir = tempfile::tempdir().expect("dir");
        let server = Server::start_on(db.url().as_ref(), dir.path(), &[], &[]);
        assert!(
            server.stop().success(),
            "the template's replica stopped cleanly"
        );
        db.keep()
    })
}

/// Starts `n` replicas on `db`, the first alone (it migrates the database
/// and compiles the built-in units; the others find them stored).
fn replicas(db: &Database, dirs: &[tempfile::TempDir]) -> Vec<Server> {
    let lease = LEASE_MS.to_string();
    let args = ["--owner-lease-ms", lease.as_str()];
    let env = [("SANDPIPER_RETRY_WAIT_MS", "0")];
    dirs.iter()
        .map(|dir| Server::start_on(db.url.as_ref(), dir.path(), &args, &env))
        .collect()
}

/// One host of a cluster's inventory: copy `copy` of `HOSTS[index]`.
fn host_id(index: usize, copy: usize) -> String {
    format!("{}-{copy}", HOSTS[index].id)
}

/// How many of the test's VMs each host takes.
fn capacities() -> BTreeMap<String, usize> {
    (0..COPIES)
        .flat_map(|copy| (0..HOSTS.len()).map(move |i| (host_id(i, copy), capacity(&HOSTS[i]))))
        .collect()
}

/// Makes the test's policy and clusters through `admin`, and sends each
/// cluster's inventory through another replica (the first request for a
/// cluster makes the replica it reaches its owner). Returns the clusters'
/// paths.
fn clusters(admin: &Client, replicas: &[&Server]) -> Vec<String> {
    let policy = capacity_policy(admin, "fleet");
    let hosts: Vec<Value> = (0..COPIES)
        .flat_map(|copy| {
            HOSTS.iter().enumerate().map(move |(i, h)| {
                let mut host = h.json();
                host["id"] = json!(host_id(i, copy));
                host
            })
        })
        .collect();
    (0..CLUSTERS)
        .map(|k| {
            let created = expect_status(
                &admin.post(
                    "/api/v1/clusters",
                    &json!({ "name": format!("fleet-{k}"), "scheduling_policy": { "id": policy } }),
                ),
                201,
            );
            let path = format!("/api/v1/clusters/{}", created["id"].as_str().expect("id"));
            let through = replicas[k % replicas.len()].admin();
            expect_status(
                &through.put(
                    &format!("{path}/inventory"),
                    &json!({ "generation": 1, "hosts": hosts }),
                ),
                200,
            );
            path
        })
        .collect()
}

/// What the engines saw, over every thread.
#[derive(Default)]
struct Seen {
    /// Acknowledged claims: (cluster path, VM) → host.
    acked: BTreeMap<(String, String), String>,
    /// VMs whose request got no clear answer (a cut connection, or a
    /// 503 from a replica that could not reach the owner after sending):
    /// each may or may not have been placed, but at most once.
    unknown: BTreeSet<(String, String)>,
    /// When each claim was acknowledged, by cluster.
    acked_at: Vec<(String, Instant)>,
    /// Every status other than 200, with its error code.
    refusals: BTreeMap<String, usize>,
}

/// One engine thread: single VMs to `cluster` through `replica` until the
/// cluster refused [`REFUSALS`] times, or the replica is gone.
fn engine(replica: Client, cluster: String, name: String, seen: Arc<Mutex<Seen>>) {
    let mut refusals = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    for n in 0.. {
        assert!(
            Instant::now() < deadline,
            "{name}: the cluster never filled"
        );
        let vm_id = format!("{name}-{n}");
        let key = (cluster.clone(), vm_id.clone());
        let reply = replica.try_post(&format!("{cluster}/schedule"), &json!({ "vm": vm(&vm_id) }));
        let mut seen_now = seen.lock().expect("seen");
        match reply {
            Ok(reply) if reply.status == 200 => {
                let answer = reply.json();
                if answer["complete"] == false {
                    refusals += 1;
                    if refusals == REFUSALS {
                        return;
                    }
                    continue;
                }
                let host = answer["claims"][0]["host_id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("a claim: {answer:#}"))
                    .to_owned();
                seen_now.acked.insert(key, host);
                seen_now.acked_at.push((cluster.clone(), Instant::now()));
            }
            Ok(reply) => {
                let answer = reply.json();
                let code = answer["error"]["code"].as_str().unwrap_or("?").to_owned();
                assert_eq!(reply.status, 503, "{name}: {answer:#}");
                *seen_now.refusals.entry(code).or_default() += 1;
                seen_now.unknown.insert(key);
                drop(seen_now);
                std::thread::sleep(Duration::from_millis(200));
            }
            // The replica this thread talks to died.
            Err(_) => {
                seen_now.unknown.insert(key);
                return;
            }
        }
    }
}

/// Every claim stored, as (cluster path, VM) → host.
fn stored_claims(db: &Database) -> BTreeMap<(String, String), String> {
    db.column("SELECT cluster_id || ' ' || vm_id || ' ' || host_id FROM claims")
        .into_iter()
        .map(|row| {
            let mut parts = row.split(' ');
            let cluster = format!("/api/v1/clusters/{}", parts.next().expect("cluster"));
            let vm = parts.next().expect("vm").to_owned();
            let host = parts.next().expect("host").to_owned();
            ((cluster, vm), host)
        })
        .collect()
}

/// No host holds more of the test's VMs than it has room for.
fn assert_no_overcommit(stored: &BTreeMap<(String, String), String>) {
    let capacities = capacities();
    let mut per_host: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for ((cluster, _), host) in stored {
        *per_host.entry((cluster, host)).or_default() += 1;
    }
    for ((cluster, host), count) in per_host {
        assert!(
            count <= capacities[host],
            "{cluster}: host {host} holds {count} VMs, room for {}",
            capacities[host]
        );
    }
}

/// The clusters each replica says it owns, by replica.
fn owners(replicas: &[&Server]) -> Vec<Vec<String>> {
    replicas
        .iter()
        .map(|r| {
            let health = expect_status(&r.client(None).get("/healthz"), 200);
            assert_eq!(health["store"], "postgres", "{health:#}");
            health["replica"]["clusters_owned"]
                .as_array()
                .expect("clusters_owned")
                .iter()
                .map(|id| format!("/api/v1/clusters/{}", id.as_str().expect("id")))
                .collect()
        })
        .collect()
}

#[test]
fn three_replicas_decide_for_shared_clusters_without_double_booking() {
    let db = Database::create();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let replicas = replicas(&db, &dirs);
    let all: Vec<&Server> = replicas.iter().collect();
    let paths = clusters(&replicas[0].admin(), &all);

    // Every cluster through every replica at once.
    let seen = Arc::new(Mutex::new(Seen::default()));
    let threads: Vec<_> = paths
        .iter()
        .flat_map(|path| replicas.iter().enumerate().map(move |(r, s)| (path, r, s)))
        .enumerate()
        .map(|(t, (path, _, server))| {
            let (client, path, seen) = (server.admin(), path.clone(), Arc::clone(&seen));
            std::thread::spawn(move || engine(client, path, format!("e{t}"), seen))
        })
        .collect();
    for thread in threads {
        thread.join().expect("engine thread");
    }
    let seen = seen.lock().expect("seen");

    let stored = stored_claims(&db);
    assert_no_overcommit(&stored);
    // With every replica up, nothing is in doubt: what was acknowledged
    // is exactly what is stored (the claims table's key is cluster and VM,
    // so a claim is stored once or not at all).
    assert!(seen.unknown.is_empty(), "{:?}", seen.refusals);
    assert_eq!(stored, seen.acked);
    // The clusters are full: every room was taken, by exactly one VM.
    let room: usize = capacities().values().sum();
    for path in &paths {
        let placed = stored.keys().filter(|(c, _)| c == path).count();
        assert_eq!(placed, room, "{path}");
    }
    // Each cluster has exactly one owner, and the replicas' in-memory
    // claims (served by the owner, asked through another replica) are the
    // stored ones.
    let owned: Vec<String> = owners(&all).into_iter().flatten().collect();
    assert_eq!(
        owned.iter().collect::<BTreeSet<_>>(),
        paths.iter().collect::<BTreeSet<_>>(),
        "each cluster owned once: {owned:?}"
    );
    assert_eq!(owned.len(), paths.len(), "{owned:?}");
    for (k, path) in paths.iter().enumerate() {
        let through = replicas[(k + 1) % replicas.len()].admin();
        let claims = expect_status(&through.get(&format!("{path}/claims")), 200);
        let held: BTreeSet<String> = claims["claims"]
            .as_array()
            .expect("claims")
            .iter()
            .map(|c| c["vm_id"].as_str().expect("vm").to_owned())
            .collect();
        let stored_here: BTreeSet<String> = stored
            .keys()
            .filter(|(c, _)| c == path)
            .map(|(_, vm)| vm.clone())
            .collect();
        assert_eq!(held, stored_here, "{path}");
    }
}

#[test]
fn a_killed_replica_s_clusters_move_to_the_others_and_nothing_is_lost() {
    let db = Database::create();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let mut replicas: Vec<Option<Server>> = replicas(&db, &dirs).into_iter().map(Some).collect();
    let up: Vec<&Server> = replicas.iter().flatten().collect();
    let paths = clusters(&up[0].admin(), &up);
    // The victim: the owner of the first cluster.
    let owned = owners(&up);
    let victim = owned
        .iter()
        .position(|clusters| clusters.contains(&paths[0]))
        .expect("the first cluster has an owner");

    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut threads = Vec::new();
    for (t, (path, server)) in paths
        .iter()
        .flat_map(|p| replicas.iter().flatten().map(move |s| (p, s)))
        .enumerate()
    {
        let (client, path, seen) = (server.admin(), path.clone(), Arc::clone(&seen));
        threads.push(std::thread::spawn(move || {
            engine(client, path, format!("e{t}"), seen)
        }));
    }
    // Mid-burst: a third of the room taken.
    let room: usize = capacities().values().sum();
    while seen.lock().expect("seen").acked.len() < room * CLUSTERS / 3 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let killed_at = Instant::now();
    replicas[victim].take().expect("running").kill();
    for thread in threads {
        thread.join().expect("engine thread");
    }
    let seen = seen.lock().expect("seen");
    // How long the dead replica's cluster went without a decision: from
    // the kill to the first claim acknowledged by its new owner.
    let moved_after = seen
        .acked_at
        .iter()
        .filter(|(c, at)| c == &paths[0] && *at > killed_at)
        .map(|(_, at)| at.duration_since(killed_at))
        .min()
        .expect("the cluster decided again after the kill");

    let stored = stored_claims(&db);
    assert_no_overcommit(&stored);
    // Every acknowledged claim is stored, on the host acknowledged.
    for (key, host) in &seen.acked {
        assert_eq!(stored.get(key), Some(host), "acknowledged claim {key:?}");
    }
    // Whatever else is stored was in doubt (its answer was lost with the
    // replica), never a VM an engine was told was refused or not sent.
    for key in stored.keys().filter(|k| !seen.acked.contains_key(*k)) {
        assert!(seen.unknown.contains(key), "unacknowledged claim {key:?}");
    }
    // The dead replica's cluster kept deciding, on another replica: it
    // filled up after the kill.
    let placed = stored.keys().filter(|(c, _)| c == &paths[0]).count();
    assert_eq!(
        placed, room,
        "the dead replica's cluster filled up on the others"
    );
    let survivors: Vec<Vec<String>> = owners(&replicas.iter().flatten().collect::<Vec<_>>());
    assert!(
        survivors.iter().any(|owned| owned.contains(&paths[0])),
        "a survivor owns the first cluster: {survivors:?}"
    );
    eprintln!(
        "fleet: replica killed with SIGKILL; its cluster's first claim on a new owner \
         acknowledged {} ms after the kill (lease {LEASE_MS} ms); requests in doubt: {}; \
         503s by code: {:?}",
        moved_after.as_millis(),
        seen.unknown.len(),
        seen.refusals
    );
    assert!(
        moved_after < Duration::from_millis(LEASE_MS) + Duration::from_secs(60),
        "the cluster moved within a bound"
    );
}

/// A TCP relay between a replica and PostgreSQL that the test can cut
/// (every connection closed, new ones refused) and restore: the database
/// going away and coming back, as a replica sees it.
struct Relay {
    addr: std::net::SocketAddr,
    down: Arc<std::sync::atomic::AtomicBool>,
    open: Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl Relay {
    fn start(to: std::net::SocketAddr) -> Relay {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let addr = listener.local_addr().expect("relay address");
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (is_down, streams) = (Arc::clone(&down), Arc::clone(&open));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if is_down.load(Ordering::SeqCst) {
                    continue; // dropped: the connection closes at once
                }
                let Ok(server) = std::net::TcpStream::connect(to) else {
                    continue;
                };
                let mut held = streams.lock().expect("streams");
                for (from, into) in [(&client, &server), (&server, &client)] {
                    let (mut from, mut into) = (
                        from.try_clone().expect("clone"),
                        into.try_clone().expect("clone"),
                    );
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut into);
                        let _ = into.shutdown(std::net::Shutdown::Both);
                    });
                }
                held.push(client);
                held.push(server);
            }
        });
        Relay { addr, down, open }
    }

    /// The database is gone: every connection is cut, new ones refused.
    fn cut(&self) {
        self.down.store(true, std::sync::atomic::Ordering::SeqCst);
        for stream in self.open.lock().expect("streams").drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.down.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Polls `check` every 100 ms until it holds, for at most `within`.
fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_replica_answers_503_while_its_database_is_gone_and_recovers_by_itself() {
    let db = Database::create();
    // The replica reaches PostgreSQL through the relay.
    let authority = db
        .url
        .split_once('@')
        .and_then(|(_, rest)| rest.split_once('/'))
        .map(|(authority, _)| authority)
        .expect("host:port in the URL");
    let relay = Relay::start(authority.parse().expect("an address"));
    let through = db.url.replacen(authority, &relay.addr.to_string(), 1);
    let dir = tempfile::tempdir().expect("dir");
    let lease = LEASE_MS.to_string();
    let server = Server::start_on(
        through.as_ref(),
        dir.path(),
        &["--owner-lease-ms", &lease],
        &[("SANDPIPER_RETRY_WAIT_MS", "0")],
    );
    let admin = server.admin();
    let path = clusters(&admin, &[&server]).remove(0);
    let schedule =
        |vm_id: &str| admin.try_post(&format!("{path}/schedule"), &json!({ "vm": vm(vm_id) }));
    let placed = expect_status(&schedule("before").expect("answered"), 200);
    let host = placed["claims"][0]["host_id"].clone();

    relay.cut();
    eventually(Duration::from_secs(30), "healthz says not ready", || {
        server.client(None).get("/healthz").status == 503
    });
    let refused = schedule("during").expect("answered");
    let answer = refused.json();
    assert_eq!(refused.status, 503, "{answer:#}\n{}", server.log());
    assert_eq!(
        answer["error"]["code"], "database_unavailable",
        "{answer:#}"
    );
    assert!(
        refused
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("retry-after")),
        "Retry-After"
    );

    relay.restore();
    eventually(Duration::from_secs(30), "healthz is ready again", || {
        server.client(None).get("/healthz").status == 200
    });
    eventually(Duration::from_secs(30), "decisions again", || {
        schedule("after").is_ok_and(|r| r.status == 200 && r.json()["complete"] != false)
    });
    // What was acknowledged before the outage is still stored, once.
    let stored = stored_claims(&db);
    assert_eq!(
        stored
            .get(&(path.clone(), "before".to_owned()))
            .map(|h| json!(h)),
        Some(host)
    );
    assert!(!stored.contains_key(&(path.clone(), "during".to_owned())));
    assert!(stored.contains_key(&(path, "after".to_owned())));
}

/// An admin change made through one replica is in effect on the others
/// within about a second (docs/fleet.md): a unit uploaded through one runs
/// in a decision another owns, and a token revoked through one is refused
/// by another.
#[test]
fn a_change_made_through_one_replica_is_in_effect_on_the_others() {
    let db = Database::create();
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().expect("dir")).collect();
    let replicas = replicas(&db, &dirs);
    let (first, second) = (replicas[0].admin(), replicas[1].admin());

    // A unit uploaded through the first replica, in a policy made there.
    let wasm = crate::support::distinct_copy(crate::support::builtin_wasm("memory"), "fleet");
    let unit = expect_status(
        &first.post_wasm("/api/v1/schedulingpolicyunits?name=FleetMemory", &wasm),
        201,
    );
    let policy = expect_status(
        &first.post(
            "/api/v1/schedulingpolicies",
            &json!({ "name": "fleet-memory" }),
        ),
        201,
    );
    let policy = policy["id"].as_str().expect("policy id");
    expect_status(
        &first.post(
            &format!("/api/v1/schedulingpolicies/{policy}/filters"),
            &json!({ "scheduling_policy_unit": { "id": unit["id"] } }),
        ),
        201,
    );
    let cluster = expect_status(
        &first.post(
            "/api/v1/clusters",
            &json!({ "name": "fleet-memory", "scheduling_policy": { "id": policy } }),
        ),
        201,
    );
    let path = format!("/api/v1/clusters/{}", cluster["id"].as_str().expect("id"));
    // The second replica takes the cluster and decides with the unit.
    expect_status(
        &second.put(
            &format!("{path}/inventory"),
            &json!({ "generation": 1, "hosts": [HOSTS[0].json()] }),
        ),
        200,
    );
    let owned = owners(&[&replicas[0], &replicas[1]]);
    assert!(owned[1].contains(&path), "{owned:?}");
    let mut answer = Value::Null;
    eventually(
        Duration::from_secs(10),
        "the new unit runs on the second replica",
        || {
            let reply = second.post(&format!("{path}/schedule"), &json!({ "vm": vm("v1") }));
            answer = reply.json();
            reply.status == 200
        },
    );
    assert_eq!(answer["claims"][0]["host_id"], HOSTS[0].id, "{answer:#}");

    // A simulation of that cluster through the replica that does not own
    // it: a copy of the held inventory read from the database, with the
    // live claim counted, and the cluster left as it was.
    let simulated = expect_status(
        &first.post(
            "/api/v1/simulations",
            &json!({
                "cluster_id": cluster["id"],
                "policies": [policy],
                "trace": { "generate": { "seed": 1, "arrivals": 3, "arrivals_per_hour": 60,
                                         "mean_lifetime_s": 3600,
                                         "sizes": [{ "memory_mib": 512, "vcpus": 1 }] } },
            }),
        ),
        200,
    );
    assert_eq!(simulated["hosts"], 1, "{simulated:#}");
    assert_eq!(simulated["policies"][0]["placed"], 3, "{simulated:#}");
    let claims = expect_status(&second.get(&format!("{path}/claims")), 200);
    assert_eq!(
        claims["claims"].as_array().map(Vec::len),
        Some(1),
        "{claims:#}"
    );

    // A token made and then revoked through the first replica.
    let token = expect_status(
        &first.post(
            "/api/v1/tokens",
            &json!({ "name": "fleet-reader", "role": "reader" }),
        ),
        201,
    );
    let reader = replicas[1].client(token["secret"].as_str());
    expect_status(&reader.get("/api/v1/clusters"), 200);
    expect_status(
        &first.delete(&format!(
            "/api/v1/tokens/{}",
            token["id"].as_str().expect("token id")
        )),
        204,
    );
    eventually(
        Duration::from_secs(10),
        "the revoked token is refused",
        || reader.get("/api/v1/clusters").status == 401,
    );
}
