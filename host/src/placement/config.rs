//! The placement service's settings and their defaults (`sandpiper
//! serve`'s flags are in `args`).

use std::time::Duration;

use super::fairness::FairnessConfig;
use super::persist::Retention;
use super::sample::Sampling;

/// How long an unconfirmed claim holds its resources, seconds. A VM start
/// (image fetch, boot to "powering up") takes seconds to a couple of
/// minutes; ten minutes covers slow starts. Too short would free capacity
/// that is about to be used (a double booking); too long only parks
/// capacity after a lost message, which is the safe side.
pub const DEFAULT_CLAIM_TTL: Duration = Duration::from_secs(600);

/// How long a request waits for its cluster's lock before it is answered
/// 503. A decision holds it for about a millisecond at 10,000 hosts, so
/// ten seconds is thousands of decisions queued: past that, the caller is
/// better served by an answer it can retry than by a hung connection.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one decision may hold its cluster's lock before it stops
/// placing instances, answers 503 and claims nothing. 256 instances over
/// 10,000 hosts take well under a second with compiled units; ten seconds
/// leaves room for slow interpreted units while bounding the wait of
/// everyone queued behind.
pub const DEFAULT_MAX_HOLD: Duration = Duration::from_secs(10);

/// How long a request with no host waits for pending claims to resolve
/// before its one retry. oVirt waits at most one host refresh (3 s by
/// default) for the monitoring report that resolves a claim.
pub const DEFAULT_RETRY_WAIT: Duration = Duration::from_secs(3);

/// How often expired claims are swept even when no request arrives, so
/// that their rows are deleted and requests waiting to retry are woken.
/// Decisions drop expired claims themselves, so this only bounds how long
/// an expired claim lingers in listings: one second is plenty.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Decisions kept in the log at most this long, days. A month of history
/// answers "why did this VM land there" for any recent incident.
pub const DEFAULT_DECISIONS_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// The service's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacementConfig {
    pub claim_ttl: Duration,
    pub lock_timeout: Duration,
    pub max_hold: Duration,
    pub retry_wait: Duration,
    pub sweep_interval: Duration,
    pub retention: Retention,
    /// How many hosts a decision's first pick considers.
    pub sampling: Sampling,
    /// Whether per-host units' answers are reused between decisions, and
    /// a compact body's columns built over the cluster's last one.
    pub reuse_answers: bool,
    /// Per-cluster bounds on decisions in progress and their CPU work.
    pub fairness: FairnessConfig,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            claim_ttl: DEFAULT_CLAIM_TTL,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            max_hold: DEFAULT_MAX_HOLD,
            retry_wait: DEFAULT_RETRY_WAIT,
            sweep_interval: SWEEP_INTERVAL,
            retention: Retention {
                count: 1000,
                max_age: DEFAULT_DECISIONS_MAX_AGE,
            },
            sampling: Sampling::Adaptive,
            reuse_answers: true,
            fairness: FairnessConfig::default(),
        }
    }
}
