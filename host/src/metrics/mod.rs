//! The process's metrics, served at `GET /metrics` in Prometheus' text
//! format (docs/metrics.md lists every one): the one registry, and the
//! functions the places that observe an event call to count it.
//!
//! Names follow kube-scheduler's where there is a counterpart
//! (`scheduler_scheduling_attempt_duration_seconds{profile,result}` is
//! `sandpiper_scheduling_attempt_duration_seconds{cluster,result}`).
//! Labels stay bounded: clusters, units and routes are what admins create
//! or the code declares; never a VM, a host, a request or a raw path.
//!
//! Nothing here takes a lock on the decision path: each thread keeps the
//! series it has used (a family's map is locked only the first time a
//! thread meets a label set), and counting is atomic adds
//! ([`AtomicHistogram`], `prometheus_client`'s counters and gauges).

mod histogram;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use uuid::Uuid;

pub use self::histogram::AtomicHistogram;
use crate::unit::{Role, Usage};

/// The `Content-Type` of the exposition: Prometheus' text format 0.0.4,
/// which every Prometheus-compatible scraper reads.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Bounds of a decision's duration, seconds: kube-scheduler's for the same
/// histogram (1 ms doubling to 16 s), so dashboards built for it read ours.
/// A decision over 10,000 held hosts takes about a millisecond; the lock
/// and hold limits stop at 10 s.
pub static DECISION_SECONDS: [f64; 15] = exponential::<15>(0.001, 2.0);

/// Bounds of one unit call's duration, seconds: 10 µs (a compiled unit
/// over a few hosts) doubling to about 5 s (past any deadline).
pub static UNIT_CALL_SECONDS: [f64; 20] = exponential::<20>(0.000_01, 2.0);

/// Bounds of one unit call's fuel: a thousand (a trivial call) quadrupling
/// to about four billion (past the default budget of a call over 10,000
/// hosts, ~55k per host for JavaScript).
pub static UNIT_FUEL: [f64; 12] = exponential::<12>(1000.0, 4.0);

/// Bounds of an HTTP request's duration, seconds: 1 ms doubling to 16 s,
/// as for decisions (most routes are decisions or answer faster).
pub static HTTP_SECONDS: [f64; 15] = exponential::<15>(0.001, 2.0);

/// Bounds of an upload's compile time, seconds: 10 ms doubling to about
/// 80 s (an 18 MB Python unit takes seconds; the compile child's own time
/// limit stops well before the last bound).
pub static COMPILE_SECONDS: [f64; 14] = exponential::<14>(0.01, 2.0);

/// `N` bounds from `start`, each `factor` times the one before.
const fn exponential<const N: usize>(start: f64, factor: f64) -> [f64; N] {
    let mut out = [0.0; N];
    let mut i = 0;
    let mut value = start;
    while i < N {
        out[i] = value;
        value *= factor;
        i += 1;
    }
    out
}

/// How a scheduling attempt ended, kube-scheduler's `result` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptResult {
    /// Every instance asked for was placed.
    Scheduled,
    /// The policy found no host for some instance (a 200 answer saying so).
    Unschedulable,
    /// The decision failed: a fail-closed unit failed, the cluster was
    /// busy, the request was refused once the cluster was known.
    Error,
}

impl AttemptResult {
    fn label(self) -> &'static str {
        match self {
            AttemptResult::Scheduled => "scheduled",
            AttemptResult::Unschedulable => "unschedulable",
            AttemptResult::Error => "error",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    cluster: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnitLabels {
    unit: String,
    role: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    unit: String,
    role: &'static str,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CompileLabels {
    result: &'static str,
}

type Histograms<L> = Family<L, AtomicHistogram, fn() -> AtomicHistogram>;

fn decision_histogram() -> AtomicHistogram {
    AtomicHistogram::new(&DECISION_SECONDS)
}
fn unit_call_histogram() -> AtomicHistogram {
    AtomicHistogram::new(&UNIT_CALL_SECONDS)
}
fn unit_fuel_histogram() -> AtomicHistogram {
    AtomicHistogram::new(&UNIT_FUEL)
}
fn http_histogram() -> AtomicHistogram {
    AtomicHistogram::new(&HTTP_SECONDS)
}
fn compile_histogram() -> AtomicHistogram {
    AtomicHistogram::new(&COMPILE_SECONDS)
}

/// Every metric of the process, registered once.
struct Metrics {
    registry: Registry,
    attempts: Histograms<AttemptLabels>,
    unit_seconds: Histograms<UnitLabels>,
    unit_fuel: Histograms<UnitLabels>,
    unit_failures: Family<FailureLabels, Counter>,
    unit_skipped: Family<FailureLabels, Counter>,
    inventory_hosts: Family<ClusterLabels, Gauge>,
    inventory_updated: Family<ClusterLabels, Gauge<f64, AtomicU64>>,
    claims_pending: Family<ClusterLabels, Gauge>,
    claims_expired: Counter,
    store_commits: Counter,
    store_committed_jobs: Counter,
    http_requests: Family<RequestLabels, Counter>,
    http_seconds: Histograms<RouteLabels>,
    compile_seconds: Histograms<CompileLabels>,
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("sandpiper");
        let attempts = Histograms::new_with_constructor(decision_histogram as fn() -> _);
        registry.register_with_unit(
            "scheduling_attempt_duration",
            "Scheduling decisions by cluster and result (scheduled, unschedulable, error), \
             from the request's arrival to its answer",
            Unit::Seconds,
            attempts.clone(),
        );
        let unit_seconds = Histograms::new_with_constructor(unit_call_histogram as fn() -> _);
        registry.register_with_unit(
            "unit_execution_duration",
            "Policy unit calls by unit and role (filter, score, balance), failed calls included",
            Unit::Seconds,
            unit_seconds.clone(),
        );
        let unit_fuel = Histograms::new_with_constructor(unit_fuel_histogram as fn() -> _);
        registry.register(
            "unit_execution_fuel",
            "Fuel (WebAssembly instructions, roughly) one sandboxed unit call used, by unit and role",
            unit_fuel.clone(),
        );
        let unit_failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "unit_execution_failures",
            "Failed unit calls by unit, role and kind (out_of_fuel, deadline_exceeded, \
             overloaded, memory_limit, stack_overflow, trap, invalid_output, ...)",
            unit_failures.clone(),
        );
        let unit_skipped = Family::<FailureLabels, Counter>::default();
        registry.register(
            "unit_executions_skipped",
            "Failed unit calls left out of a decision that went on (fail-open: the \
             decision answered degraded), by unit, role and kind",
            unit_skipped.clone(),
        );
        let inventory_hosts = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "inventory_hosts",
            "Hosts held for the cluster (its inventory's size)",
            inventory_hosts.clone(),
        );
        let inventory_updated = Family::<ClusterLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "inventory_last_update_timestamp_seconds",
            "When the cluster's inventory last changed through a snapshot or an update \
             (Unix time); its lag is time() minus this",
            inventory_updated.clone(),
        );
        let claims_pending = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "claims_pending",
            "Live claims of the cluster: placed by a decision, not yet covered by a report, \
             released or expired",
            claims_pending.clone(),
        );
        let claims_expired = Counter::default();
        registry.register(
            "claims_expired",
            "Claims that expired before the engine confirmed or released them",
            claims_expired.clone(),
        );
        let store_commits = Counter::default();
        registry.register(
            "store_commits",
            "Transactions the store's background writer committed",
            store_commits.clone(),
        );
        let store_committed_jobs = Counter::default();
        registry.register(
            "store_committed_jobs",
            "Writes (a decision's claims and log entry, a host report, ...) in the writer's \
             committed transactions; over store_commits, the writes a commit holds",
            store_committed_jobs.clone(),
        );
        let http_requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by method, route (the matched path template, `unmatched` for \
             none) and status",
            http_requests.clone(),
        );
        let http_seconds = Histograms::new_with_constructor(http_histogram as fn() -> _);
        registry.register_with_unit(
            "http_request_duration",
            "HTTP requests by method and route, until the response head",
            Unit::Seconds,
            http_seconds.clone(),
        );
        let compile_seconds = Histograms::new_with_constructor(compile_histogram as fn() -> _);
        registry.register_with_unit(
            "unit_compile_duration",
            "Uploaded modules validated and compiled (in the compile child), by result \
             (ok, rejected)",
            Unit::Seconds,
            compile_seconds.clone(),
        );
        Metrics {
            registry,
            attempts,
            unit_seconds,
            unit_fuel,
            unit_failures,
            unit_skipped,
            inventory_hosts,
            inventory_updated,
            claims_pending,
            claims_expired,
            store_commits,
            store_committed_jobs,
            http_requests,
            http_seconds,
            compile_seconds,
        }
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The exposition of every metric, in Prometheus' text format.
pub fn encode() -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &METRICS.registry)?;
    Ok(out)
}

/// A unit's series for one role, kept by each thread that used them.
#[derive(Clone)]
struct UnitSeries {
    seconds: AtomicHistogram,
    fuel: AtomicHistogram,
    /// (kind, failures, skipped), made at a kind's first failure.
    failures: Vec<(&'static str, Counter, Counter)>,
}

/// A cluster's series, kept by each thread that used them.
#[derive(Clone)]
struct ClusterSeries {
    /// By [`AttemptResult`], in declaration order.
    attempts: [AtomicHistogram; 3],
    hosts: Gauge,
    claims: Gauge,
}

/// The series this thread has used, so that it looks a family up (and
/// takes its lock) only once per label set.
#[derive(Default)]
struct Cache {
    /// By unit name, then by role (filter, score, balance).
    units: HashMap<String, [Option<UnitSeries>; 3]>,
    clusters: HashMap<Uuid, ClusterSeries>,
    /// By route, then (method, status); and by route and method.
    requests: HashMap<String, Vec<(String, u16, Counter)>>,
    request_seconds: HashMap<String, Vec<(String, AtomicHistogram)>>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

fn role_index(role: Role) -> usize {
    match role {
        Role::Filter => 0,
        Role::Score => 1,
        Role::Balance => 2,
    }
}

fn role_label(role: Role) -> &'static str {
    match role {
        Role::Filter => "filter",
        Role::Score => "score",
        Role::Balance => "balance",
    }
}

/// Runs `f` on this thread's series of `unit` in `role`.
fn with_unit<T>(unit: &str, role: Role, f: impl FnOnce(&mut UnitSeries) -> T) -> T {
    CACHE.with_borrow_mut(|cache| {
        let roles = match cache.units.get_mut(unit) {
            Some(roles) => roles,
            None => cache.units.entry(unit.to_owned()).or_default(),
        };
        let series = roles[role_index(role)].get_or_insert_with(|| {
            let labels = UnitLabels {
                unit: unit.to_owned(),
                role: role_label(role),
            };
            UnitSeries {
                seconds: METRICS.unit_seconds.get_or_create_owned(&labels),
                fuel: METRICS.unit_fuel.get_or_create_owned(&labels),
                failures: Vec::new(),
            }
        });
        f(series)
    })
}

/// Counts one unit call: its time and, for a sandboxed call, its fuel.
pub fn unit_call(unit: &str, role: Role, usage: &Usage) {
    with_unit(unit, role, |series| {
        series.seconds.observe(usage.elapsed.as_secs_f64());
        if let Some(fuel) = usage.fuel {
            series.fuel.observe(fuel as f64);
        }
    });
}

/// Counts one failed unit call of `kind` (`UnitError::code`); `skipped`:
/// the decision went on without it (fail-open).
pub fn unit_failed(unit: &str, role: Role, kind: &'static str, skipped: bool) {
    with_unit(unit, role, |series| {
        let position = series.failures.iter().position(|(k, ..)| *k == kind);
        let index = position.unwrap_or_else(|| {
            let labels = FailureLabels {
                unit: unit.to_owned(),
                role: role_label(role),
                kind,
            };
            series.failures.push((
                kind,
                METRICS.unit_failures.get_or_create_owned(&labels),
                METRICS.unit_skipped.get_or_create_owned(&labels),
            ));
            series.failures.len() - 1
        });
        let (_, failures, skipped_calls) = &series.failures[index];
        failures.inc();
        if skipped {
            skipped_calls.inc();
        }
    });
}

/// Runs `f` on this thread's series of the cluster `id`.
fn with_cluster<T>(id: Uuid, f: impl FnOnce(&ClusterSeries) -> T) -> T {
    CACHE.with_borrow_mut(|cache| {
        let series = cache.clusters.entry(id).or_insert_with(|| {
            let cluster = id.to_string();
            let attempt = |result: AttemptResult| {
                METRICS.attempts.get_or_create_owned(&AttemptLabels {
                    cluster: cluster.clone(),
                    result: result.label(),
                })
            };
            let labels = ClusterLabels {
                cluster: cluster.clone(),
            };
            ClusterSeries {
                attempts: [
                    attempt(AttemptResult::Scheduled),
                    attempt(AttemptResult::Unschedulable),
                    attempt(AttemptResult::Error),
                ],
                hosts: METRICS.inventory_hosts.get_or_create_owned(&labels),
                claims: METRICS.claims_pending.get_or_create_owned(&labels),
            }
        });
        f(series)
    })
}

/// A scheduling decision under way, for a cluster known to exist (an
/// unknown id must not become a label). Finished with its result, or
/// counted as an [`AttemptResult::Error`] when dropped unfinished (the
/// request failed on the way).
pub struct SchedulingAttempt {
    cluster: Uuid,
    started: Instant,
    finished: bool,
}

impl SchedulingAttempt {
    /// A decision for `cluster` whose request arrived at `started`.
    pub fn new(cluster: Uuid, started: Instant) -> Self {
        SchedulingAttempt {
            cluster,
            started,
            finished: false,
        }
    }

    /// Counts the decision with its result.
    pub fn finish(mut self, result: AttemptResult) {
        self.record(result);
    }

    fn record(&mut self, result: AttemptResult) {
        self.finished = true;
        let seconds = self.started.elapsed().as_secs_f64();
        let index = match result {
            AttemptResult::Scheduled => 0,
            AttemptResult::Unschedulable => 1,
            AttemptResult::Error => 2,
        };
        with_cluster(self.cluster, |series| {
            series.attempts[index].observe(seconds)
        });
    }
}

impl Drop for SchedulingAttempt {
    fn drop(&mut self) {
        if !self.finished {
            self.record(AttemptResult::Error);
        }
    }
}

/// What a cluster holds after a change: its hosts and live claims.
pub fn cluster_held(cluster: Uuid, hosts: usize, claims: usize) {
    with_cluster(cluster, |series| {
        series.hosts.set(i64::try_from(hosts).unwrap_or(i64::MAX));
        series.claims.set(i64::try_from(claims).unwrap_or(i64::MAX));
    });
}

/// The cluster's inventory changed now (a snapshot or an update applied).
/// Not on the decision path: looks the family up directly.
pub fn inventory_updated(cluster: Uuid) {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    METRICS
        .inventory_updated
        .get_or_create(&ClusterLabels {
            cluster: cluster.to_string(),
        })
        .set(now);
}

/// `n` claims expired.
pub fn claims_expired(n: usize) {
    if n > 0 {
        METRICS.claims_expired.inc_by(n as u64);
    }
}

/// The store's writer committed a transaction of `jobs` writes.
pub fn store_committed(jobs: usize) {
    METRICS.store_commits.inc();
    METRICS.store_committed_jobs.inc_by(jobs as u64);
}

/// The `route` label of a request that matched no route.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Counts one HTTP request: `route` is the matched path template (never
/// the raw path), `None` when no route matched.
pub fn http_request(method: &str, route: Option<&str>, status: u16, elapsed: Duration) {
    let route = route.unwrap_or(UNMATCHED_ROUTE);
    // An unknown method is one label value, not whatever a client sent.
    let method = match method {
        "GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS" => method,
        _ => "other",
    };
    CACHE.with_borrow_mut(|cache| {
        let counters = match cache.requests.get_mut(route) {
            Some(counters) => counters,
            None => cache.requests.entry(route.to_owned()).or_default(),
        };
        match counters
            .iter()
            .find(|(m, s, _)| m == method && *s == status)
        {
            Some((.., counter)) => {
                counter.inc();
            }
            None => {
                let counter = METRICS.http_requests.get_or_create_owned(&RequestLabels {
                    method: method.to_owned(),
                    route: route.to_owned(),
                    status,
                });
                counter.inc();
                counters.push((method.to_owned(), status, counter));
            }
        }
        let histograms = match cache.request_seconds.get_mut(route) {
            Some(histograms) => histograms,
            None => cache.request_seconds.entry(route.to_owned()).or_default(),
        };
        match histograms.iter().find(|(m, _)| m == method) {
            Some((_, h)) => h.observe(elapsed.as_secs_f64()),
            None => {
                let h = METRICS.http_seconds.get_or_create_owned(&RouteLabels {
                    method: method.to_owned(),
                    route: route.to_owned(),
                });
                h.observe(elapsed.as_secs_f64());
                histograms.push((method.to_owned(), h));
            }
        }
    });
}

/// Counts one upload's validation and compile, `ok` or `rejected`.
pub fn unit_compiled(ok: bool, elapsed: Duration) {
    let result = if ok { "ok" } else { "rejected" };
    METRICS
        .compile_seconds
        .get_or_create(&CompileLabels { result })
        .observe(elapsed.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_call_and_its_failure_are_exposed_with_bounded_labels() {
        let usage = Usage {
            fuel: Some(5000),
            elapsed: Duration::from_micros(30),
        };
        unit_call("MetricsTestUnit", Role::Score, &usage);
        unit_failed("MetricsTestUnit", Role::Score, "trap", true);
        let text = encode().expect("encodes");
        assert!(text.contains(
            "sandpiper_unit_execution_failures_total{unit=\"MetricsTestUnit\",role=\"score\",kind=\"trap\"} 1"
        ), "{text}");
        assert!(text.contains(
            "sandpiper_unit_executions_skipped_total{unit=\"MetricsTestUnit\",role=\"score\",kind=\"trap\"} 1"
        ), "{text}");
        assert!(text.contains(
            "sandpiper_unit_execution_fuel_bucket{unit=\"MetricsTestUnit\",role=\"score\",le=\"16000\"} 1"
        ), "{text}");
        assert!(text.contains("# TYPE sandpiper_unit_execution_duration_seconds histogram"));
    }

    #[test]
    fn an_attempt_dropped_unfinished_is_an_error() {
        let cluster = Uuid::new_v4();
        drop(SchedulingAttempt::new(cluster, Instant::now()));
        SchedulingAttempt::new(cluster, Instant::now()).finish(AttemptResult::Scheduled);
        let text = encode().expect("encodes");
        for result in ["error", "scheduled"] {
            let line = format!(
                "sandpiper_scheduling_attempt_duration_seconds_count{{cluster=\"{cluster}\",result=\"{result}\"}} 1"
            );
            assert!(text.contains(&line), "{line} in {text}");
        }
    }

    #[test]
    fn an_unknown_method_is_one_label_value() {
        http_request("BREW", None, 405, Duration::from_millis(1));
        let text = encode().expect("encodes");
        assert!(
            text.contains(
                "sandpiper_http_requests_total{method=\"other\",route=\"unmatched\",status=\"405\"}"
            ),
            "{text}"
        );
    }
}
