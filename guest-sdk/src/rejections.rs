//! A builder for a filter's answer: rejected hosts grouped by reason.
//!
//! The contract returns one `Rejection` per distinct reason, each host at
//! most once, so a filter that rejects 5,000 hosts for the same reason sends
//! that sentence once. Authors call [`Rejections::reject`] per host and never
//! build the groups themselves.

use std::collections::{HashMap, HashSet};

use crate::model::Rejection;

/// Host indices below this are remembered in a bitset (at most 128 KiB);
/// larger ones, which no real cluster has, in a hash set, so that a unit
/// passing a wild index cannot make the builder allocate half a gigabyte.
const DENSE_INDEX_LIMIT: u32 = 1 << 20;

/// Rejected hosts, grouped by reason in the order the reasons first appeared.
#[derive(Clone, Debug, Default)]
pub struct Rejections {
    groups: Vec<Rejection>,
    /// Position in `groups` of each reason.
    by_reason: HashMap<String, usize>,
    /// Which host indices below `DENSE_INDEX_LIMIT` are already rejected,
    /// one bit each.
    rejected: Vec<u64>,
    /// Rejected host indices at or above `DENSE_INDEX_LIMIT`.
    rejected_sparse: HashSet<u32>,
}

impl Rejections {
    pub fn new() -> Self {
        Self::default()
    }

    /// Rejects `host` for `reason`. A host already rejected keeps its first
    /// reason (a filter checking two conditions reports the first that
    /// failed); returns whether this call rejected it.
    pub fn reject(&mut self, host: u32, reason: impl AsRef<str>) -> bool {
        if !self.mark(host) {
            return false;
        }
        let reason = reason.as_ref();
        // Consecutive rejections usually share a reason: check the latest
        // group before hashing.
        let group = match self.groups.last() {
            Some(last) if last.reason == reason => self.groups.len() - 1,
            _ => match self.by_reason.get(reason) {
                Some(&group) => group,
                None => {
                    self.by_reason.insert(reason.to_owned(), self.groups.len());
                    self.groups.push(Rejection {
                        reason: reason.to_owned(),
                        hosts: Vec::new(),
                    });
                    self.groups.len() - 1
                }
            },
        };
        self.groups[group].hosts.push(host);
        true
    }

    /// Rejects every host in `hosts` for the same `reason`.
    pub fn reject_all(&mut self, hosts: &[u32], reason: impl AsRef<str>) {
        let reason = reason.as_ref();
        for &host in hosts {
            self.reject(host, reason);
        }
    }

    /// True when `host` has been rejected.
    pub fn is_rejected(&self, host: u32) -> bool {
        if host >= DENSE_INDEX_LIMIT {
            return self.rejected_sparse.contains(&host);
        }
        let (word, bit) = Self::position(host);
        self.rejected
            .get(word)
            .is_some_and(|bits| bits & (1 << bit) != 0)
    }

    /// Number of hosts rejected so far.
    pub fn len(&self) -> usize {
        self.groups.iter().map(|group| group.hosts.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The groups, ready to return from `Filter::filter`.
    pub fn into_vec(self) -> Vec<Rejection> {
        self.groups
    }

    fn position(host: u32) -> (usize, u32) {
        ((host / 64) as usize, host % 64)
    }

    /// Sets `host`'s bit; false when it was already set.
    fn mark(&mut self, host: u32) -> bool {
        if host >= DENSE_INDEX_LIMIT {
            return self.rejected_sparse.insert(host);
        }
        let (word, bit) = Self::position(host);
        if word >= self.rejected.len() {
            self.rejected.resize(word + 1, 0);
        }
        let was_set = self.rejected[word] & (1 << bit) != 0;
        self.rejected[word] |= 1 << bit;
        !was_set
    }
}

impl From<Rejections> for Vec<Rejection> {
    fn from(rejections: Rejections) -> Self {
        rejections.into_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_hosts_by_reason_in_first_seen_order() {
        let mut rejections = Rejections::new();
        assert!(rejections.reject(3, "not up"));
        assert!(rejections.reject(1, "too small"));
        assert!(rejections.reject(200, "not up"));
        assert!(rejections.reject(u32::MAX, "not up"));
        assert!(!rejections.reject(u32::MAX, "not up"));
        assert!(!rejections.reject(3, "too small"), "first reason wins");
        assert!(rejections.is_rejected(200) && !rejections.is_rejected(2));
        assert_eq!(rejections.len(), 4);
        assert_eq!(
            rejections.into_vec(),
            [
                Rejection {
                    reason: "not up".into(),
                    hosts: vec![3, 200, u32::MAX]
                },
                Rejection {
                    reason: "too small".into(),
                    hosts: vec![1]
                },
            ]
        );
    }

    #[test]
    fn nothing_rejected_is_an_empty_answer() {
        assert!(Rejections::new().into_vec().is_empty());
    }
}
