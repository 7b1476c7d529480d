//! The `sandpiper serve` flags of stateful placement, each with an
//! environment variable; the defaults and their reasons are the constants
//! of `service` and `place`.

use std::time::Duration;

use super::config::{self, PlacementConfig};
use super::fairness::{self, FairnessConfig};
use super::persist::Retention;
use super::sample::Sampling;

/// Placement settings of `sandpiper serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct PlacementArgs {
    /// Seconds an unconfirmed claim holds its resources.
    #[arg(long, env = "SANDPIPER_CLAIM_TTL_SECS", default_value_t = config::DEFAULT_CLAIM_TTL.as_secs())]
    pub claim_ttl_secs: u64,

    /// Milliseconds a request waits for its cluster's lock before a 503.
    #[arg(long, env = "SANDPIPER_LOCK_TIMEOUT_MS", default_value_t = millis(config::DEFAULT_LOCK_TIMEOUT))]
    pub lock_timeout_ms: u64,

    /// Milliseconds one decision may hold its cluster's lock.
    #[arg(long, env = "SANDPIPER_MAX_HOLD_MS", default_value_t = millis(config::DEFAULT_MAX_HOLD))]
    pub max_hold_ms: u64,

    /// Milliseconds a request with no host waits for pending claims to
    /// resolve before its one retry; 0 turns delay-and-retry off.
    #[arg(long, env = "SANDPIPER_RETRY_WAIT_MS", default_value_t = millis(config::DEFAULT_RETRY_WAIT))]
    pub retry_wait_ms: u64,

    /// Hosts a decision considers when the request names none: `adaptive`
    /// (kube-scheduler's share: 500 of 10,000), `all`, or a number.
    #[arg(long, env = "SANDPIPER_SAMPLE_HOSTS", default_value = "adaptive", value_parser = parse_sampling)]
    pub sample_hosts: Sampling,

    /// Reuse per-host units' answers for hosts that did not change since
    /// an earlier decision with the same request, and the columns built
    /// from a cluster's last compact body where the next one sends them
    /// again unchanged (`true` or `false`).
    #[arg(long, env = "SANDPIPER_REUSE_ANSWERS", default_value_t = true, action = clap::ArgAction::Set)]
    pub reuse_answers: bool,

    /// Days a logged decision is kept.
    #[arg(long, env = "SANDPIPER_DECISIONS_MAX_AGE_DAYS", default_value_t = config::DEFAULT_DECISIONS_MAX_AGE.as_secs() / 86_400)]
    pub decisions_max_age_days: u64,

    /// Decisions one cluster may have in progress before further ones are
    /// answered 503 `cluster_busy` at once.
    #[arg(long, env = "SANDPIPER_MAX_CLUSTER_DECISIONS", default_value_t = fairness::DEFAULT_MAX_IN_PROGRESS)]
    pub max_cluster_decisions: usize,

    /// Decisions whose units may run at once, server-wide; 0: one per core.
    #[arg(long, env = "SANDPIPER_SANDBOX_SLOTS", default_value_t = 0)]
    pub sandbox_slots: usize,

    /// Of those, how many one cluster may hold; 0: half of them, at least one.
    #[arg(long, env = "SANDPIPER_CLUSTER_SANDBOX_SLOTS", default_value_t = 0)]
    pub cluster_sandbox_slots: usize,
}

const fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn parse_sampling(text: &str) -> Result<Sampling, String> {
    match text {
        "adaptive" => Ok(Sampling::Adaptive),
        "all" => Ok(Sampling::All),
        n => n
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .map(Sampling::AtMost)
            .ok_or_else(|| format!("`{n}` is not `adaptive`, `all` or a positive number of hosts")),
    }
}

impl PlacementArgs {
    /// The service settings; `decisions_retained` is the server's count
    /// limit of the decisions log.
    pub fn config(&self, decisions_retained: u32) -> PlacementConfig {
        PlacementConfig {
            claim_ttl: Duration::from_secs(self.claim_ttl_secs),
            lock_timeout: Duration::from_millis(self.lock_timeout_ms),
            max_hold: Duration::from_millis(self.max_hold_ms),
            retry_wait: Duration::from_millis(self.retry_wait_ms),
            sweep_interval: config::SWEEP_INTERVAL,
            retention: Retention {
                count: decisions_retained,
                max_age: Duration::from_secs(self.decisions_max_age_days.saturating_mul(86_400)),
            },
            sampling: self.sample_hosts,
            reuse_answers: self.reuse_answers,
            fairness: self.fairness(),
        }
    }

    /// The fairness bounds; a slot count of 0 takes the default for the
    /// machine's cores.
    fn fairness(&self) -> FairnessConfig {
        let mut config = match self.sandbox_slots {
            0 => FairnessConfig::default(),
            slots => FairnessConfig::for_cores(slots),
        };
        config.max_in_progress = self.max_cluster_decisions.max(1);
        if self.cluster_sandbox_slots > 0 {
            config.cluster_sandbox_slots = self.cluster_sandbox_slots.min(config.sandbox_slots);
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_parses_its_three_forms() {
        assert_eq!(parse_sampling("adaptive"), Ok(Sampling::Adaptive));
        assert_eq!(parse_sampling("all"), Ok(Sampling::All));
        assert_eq!(parse_sampling("250"), Ok(Sampling::AtMost(250)));
        assert!(parse_sampling("0").is_err());
        assert!(parse_sampling("some").is_err());
    }
}
