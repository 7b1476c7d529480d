//! How many of a cluster's held hosts a decision's first pick considers:
//! every host up to [`WHOLE_CLUSTER_HOSTS`], above that a rotating window
//! sized like kube-scheduler's `percentageOfNodesToScore` ([`Sampling`]),
//! and how a decision says what it considered ([`Sample`]).

use serde::Serialize;

use super::columns::Window;

/// Clusters of at most this many hosts are always considered whole, unless
/// the sampling is a fixed number: oVirt and Nova users expect the best
/// host, and at this size a decision over every host costs well under a
/// millisecond. Above it the adaptive sample applies (420 of 1,001 hosts,
/// 500 of 10,000) unless the server is configured with `all`.
pub const WHOLE_CLUSTER_HOSTS: usize = 1_000;

/// The adaptive sample never considers fewer hosts than this.
/// kube-scheduler's `minFeasibleNodesToFind`: a hundred candidates already
/// give the scores a real choice.
pub const MIN_SAMPLED_HOSTS: usize = 100;

/// The adaptive sample's share of the cluster at zero hosts, in percent,
/// falling by one point per [`SAMPLE_HOSTS_PER_POINT`] hosts down to
/// [`MIN_SAMPLE_PERCENT`]: kube-scheduler's `percentageOfNodesToScore`
/// default, which keeps the work per decision nearly flat as clusters grow
/// (5 % of 10,000 hosts is 500).
pub const BASE_SAMPLE_PERCENT: usize = 50;
/// See [`BASE_SAMPLE_PERCENT`].
pub const SAMPLE_HOSTS_PER_POINT: usize = 125;
/// See [`BASE_SAMPLE_PERCENT`].
pub const MIN_SAMPLE_PERCENT: usize = 5;

/// How many hosts the first pick of a decision considers when the request
/// names no candidates (kube-scheduler's `percentageOfNodesToScore`, Nova's
/// host subset). Each decision looks at the next window of hosts in
/// rotation, so every host is considered in turn; a window in which no host
/// survives the filters is widened to every host, so a sample never turns
/// "fits somewhere" into "fits nowhere". The price is that the winner is
/// the best of its window, not of the cluster: a policy that must see every
/// host (tight packing) sets `All`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sampling {
    /// Every host up to [`WHOLE_CLUSTER_HOSTS`]; above, kube-scheduler's
    /// adaptive share (see [`BASE_SAMPLE_PERCENT`]).
    #[default]
    Adaptive,
    /// Every host, every time.
    All,
    /// At most this many hosts (at least one).
    AtMost(u32),
}

impl Sampling {
    /// The window size for `hosts` eligible hosts.
    pub fn window(self, hosts: usize) -> usize {
        match self {
            Sampling::All => hosts,
            Sampling::AtMost(n) => (n as usize).clamp(1, hosts.max(1)).min(hosts),
            Sampling::Adaptive if hosts <= WHOLE_CLUSTER_HOSTS => hosts,
            Sampling::Adaptive => {
                let percent = BASE_SAMPLE_PERCENT
                    .saturating_sub(hosts / SAMPLE_HOSTS_PER_POINT)
                    .max(MIN_SAMPLE_PERCENT);
                (hosts * percent / 100).max(MIN_SAMPLED_HOSTS).min(hosts)
            }
        }
    }
}

impl std::fmt::Display for Sampling {
    /// The spelling of `SANDPIPER_SAMPLE_HOSTS`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sampling::Adaptive => f.write_str("adaptive"),
            Sampling::All => f.write_str("all"),
            Sampling::AtMost(n) => write!(f, "{n}"),
        }
    }
}

/// Which hosts a decision's first pick considered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// Hosts in the window.
    pub window: usize,
    /// Hosts held.
    pub eligible: usize,
    /// The window could not take every instance (or the VM refers to hosts
    /// outside it), so the decision was made again over every host.
    pub widened: bool,
    /// The same in words, as every pick's explain record says it:
    /// "considered 500 of 10000 hosts (sampled window 3 of 20: held hosts
    /// 1000 to 1499, ...)".
    pub considered: String,
}

impl Sample {
    pub(super) fn new(
        window: &Window,
        eligible: usize,
        (index, count): (usize, usize),
        sampling: Sampling,
    ) -> Self {
        Sample {
            window: window.len(),
            eligible,
            widened: false,
            considered: format!(
                "considered {} of {eligible} hosts (sampled window {} of {count}: held hosts {} to {}, \
                 rotating with each decision; SANDPIPER_SAMPLE_HOSTS={sampling}, `all` or an \
                 exhaustive request considers every host)",
                window.len(),
                index + 1,
                window.lo,
                window.hi.saturating_sub(1),
            ),
        }
    }

    pub(super) fn widen(&mut self) {
        self.widened = true;
        self.considered = format!(
            "considered all {} hosts: the sampled window of {} could not take every instance \
             (or the VM refers to hosts outside it), so the decision was made again over \
             every host",
            self.eligible, self.window
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adaptive_sample_follows_kube_scheduler() {
        assert_eq!(Sampling::Adaptive.window(99), 99);
        // Clusters up to WHOLE_CLUSTER_HOSTS are considered whole.
        assert_eq!(Sampling::Adaptive.window(150), 150);
        assert_eq!(Sampling::Adaptive.window(1_000), 1_000);
        assert_eq!(Sampling::Adaptive.window(1_001), 420);
        assert_eq!(Sampling::Adaptive.window(10_000), 500);
        assert_eq!(Sampling::Adaptive.window(100_000), 5_000);
        assert_eq!(Sampling::All.window(10_000), 10_000);
        assert_eq!(Sampling::AtMost(0).window(10), 1);
        assert_eq!(Sampling::AtMost(50).window(10), 10);
        assert_eq!(Sampling::AtMost(5).window(0), 0);
    }
}
