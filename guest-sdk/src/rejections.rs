//! A builder for a filter's answer: rejected hosts grouped by reason.
//!
//! The contract returns one `Rejection` per distinct reason, each host at
//! most once, so a filter that rejects 5,000 hosts for the same reason sends
//! that sentence once. Authors call [`Rejections::reject`] per host and never
//! build the groups themselves.
//!
//! A reason whose figures vary by host ("needs 4096 MiB, 1024 MiB free")
//! is better sent as a template and figures, [`Rejections::reject_with`]:
//! the unit formats nothing and sends one string for every such host, and
//! the host writes the sentences only when someone reads them
//! (`sandpiper_model::reason`).
//!
//! A filter rejecting many hosts for a reason it knows before its loop
//! names it once, [`Rejections::reason`], and rejects by the handle,
//! [`Rejections::reject_for`]: [`Rejections::reject`] compares the text
//! with the last reason's for every host, which in the sandbox was half of
//! `ServerGroupAffinityFilter`'s time (docs/unit-costs.md).

use crate::collections::{HashMap, HashSet};

use crate::model::Rejection;

/// Host indices below this are remembered in a bitset (at most 128 KiB);
/// larger ones, which no real cluster has, in a hash set, so that a unit
/// passing a wild index cannot make the builder allocate half a gigabyte.
const DENSE_INDEX_LIMIT: u32 = 1 << 20;

/// Reasons of one kind whose group a rejection finds by comparing texts
/// one after another; past this many, by hashing.
///
/// A unit has a handful of reasons (`Memory` eight templates, of which a
/// decision uses two or three, alternating from host to host), and
/// comparing a text with a few others of mostly different lengths costs
/// far less in the sandbox than hashing it: SipHash over the whole text,
/// then `memcmp` on the key found. Hashing is for units that write their
/// figures into their reasons, where every host may have its own.
const SCANNED_REASONS: usize = 16;

/// Rejected hosts, grouped by reason in the order the reasons first
/// appeared (a named reason appears when it is named).
#[derive(Clone, Debug, Default)]
pub struct Rejections {
    groups: Vec<Rejection>,
    /// The plain reasons' groups.
    plain: ReasonIndex,
    /// The templates' groups (kept apart: the same text is a plain
    /// sentence without figures and a template with them).
    templates: ReasonIndex,
    /// Which host indices below `DENSE_INDEX_LIMIT` are already rejected,
    /// one bit each.
    rejected: Vec<u64>,
    /// Rejected host indices at or above `DENSE_INDEX_LIMIT`.
    rejected_sparse: HashSet<u32>,
}

/// A reason named once, to reject hosts for without comparing its text
/// each time; see [`Rejections::reason`]. It belongs to the [`Rejections`]
/// that named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reason(usize);

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
        let group = self.plain.group(&mut self.groups, reason.as_ref());
        self.groups[group].hosts.push(host);
        true
    }

    /// Rejects `host` for `template` with its own `figures`, one per `{}`
    /// placeholder of the template (see `types.rejection` in the WIT). A
    /// host already rejected keeps its first reason; returns whether this
    /// call rejected it.
    pub fn reject_with(&mut self, host: u32, template: &str, figures: &[f64]) -> bool {
        if !self.mark(host) {
            return false;
        }
        let group = self.templates.group(&mut self.groups, template);
        let group = &mut self.groups[group];
        group.hosts.push(host);
        group.figures.extend_from_slice(figures);
        true
    }

    /// Names `text` as a reason to reject hosts for with
    /// [`Rejections::reject_for`]: its group, the same as `reject`'s for
    /// the same text, is made now, and left out of the answer if no host
    /// is rejected for it.
    pub fn reason(&mut self, text: impl AsRef<str>) -> Reason {
        Reason(self.plain.group(&mut self.groups, text.as_ref()))
    }

    /// [`Rejections::reject`] for a reason named by
    /// [`Rejections::reason`]: a host already rejected keeps its first
    /// reason; returns whether this call rejected it. A `Reason` belongs
    /// to the `Rejections` that named it.
    pub fn reject_for(&mut self, host: u32, reason: Reason) -> bool {
        if !self.mark(host) {
            return false;
        }
        self.groups[reason.0].hosts.push(host);
        true
    }

    /// Rejects every host in `hosts` for the same `reason`.
    pub fn reject_all(&mut self, hosts: &[u32], reason: impl AsRef<str>) {
        let reason = self.reason(reason.as_ref());
        for &host in hosts {
            self.reject_for(host, reason);
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
        self.groups.iter().all(|group| group.hosts.is_empty())
    }

    /// The groups, ready to return from `Filter::filter`: without those of
    /// reasons named but never used.
    pub fn into_vec(mut self) -> Vec<Rejection> {
        self.groups.retain(|group| !group.hosts.is_empty());
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

/// Where the groups of one kind of reason are in [`Rejections`]' groups.
#[derive(Clone, Debug, Default)]
struct ReasonIndex {
    /// The kind's groups, first seen first.
    groups: Vec<usize>,
    /// The same by text, once there are more than [`SCANNED_REASONS`].
    by_text: HashMap<String, usize>,
    /// The group the kind's latest rejection used: consecutive rejections
    /// often share a reason, so it is compared first.
    last: Option<usize>,
}

impl ReasonIndex {
    /// The position in `groups` of `text`'s group, added if new.
    ///
    /// Inlined so that a unit's constant reason is compared as a constant
    /// (its length known, its words unrolled): not inlined, `CPU` burnt
    /// about a tenth more fuel than with the hashing this replaced.
    #[inline(always)]
    fn group(&mut self, groups: &mut Vec<Rejection>, text: &str) -> usize {
        let found = match self.last {
            Some(last) if same_text(&groups[last].reason, text) => Some(last),
            _ if self.by_text.is_empty() => self
                .groups
                .iter()
                .copied()
                .find(|&group| same_text(&groups[group].reason, text)),
            _ => self.by_text.get(text).copied(),
        };
        let group = found.unwrap_or_else(|| {
            groups.push(Rejection::new(text, Vec::new()));
            let group = groups.len() - 1;
            self.groups.push(group);
            if self.groups.len() > SCANNED_REASONS {
                // From now on by hashing: every group of the kind, the
                // earlier ones too the first time.
                for &group in &self.groups[self.by_text.len()..] {
                    self.by_text.insert(groups[group].reason.clone(), group);
                }
            }
            group
        });
        self.last = Some(group);
        group
    }
}

/// `a == b`. A filter compares each rejected host's reason with the
/// previous one, and text equality calls `memcmp`, which WebAssembly's libc
/// runs a byte at a time: that was most of `reject_with`'s time for
/// `Memory` and `CPU` in the sandbox. There this compares eight bytes at a
/// time; natively the platform's `memcmp` is faster than that.
fn same_text(a: &str, b: &str) -> bool {
    if cfg!(target_arch = "wasm32") {
        same_text_by_words(a, b)
    } else {
        a == b
    }
}

fn same_text_by_words(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let (mut a_words, mut b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("eight bytes"));
    a_words
        .by_ref()
        .zip(b_words.by_ref())
        .all(|(x, y)| word(x) == word(y))
        && a_words
            .remainder()
            .iter()
            .zip(b_words.remainder())
            .all(|(x, y)| x == y)
}

impl From<Rejections> for Vec<Rejection> {
    fn from(rejections: Rejections) -> Self {
        rejections.into_vec()
    }
}

/// Reasons written once per distinct key and shared by every host with it.
///
/// Where a sentence names what a host lacks or breaks (the flags it is
/// missing, the groups it breaks) and is not a template with figures,
/// formatting it for every rejected host costs more than judging the host;
/// hosts with the same key share one sentence. Keys are found as
/// [`Rejections`] finds reasons: compared one after another while there
/// are a few (`SCANNED_REASONS`), hashed past that, so many distinct keys
/// stay linear.
pub struct Sentences<K, V = String> {
    written: Vec<(K, V)>,
    index: HashMap<K, usize>,
}

impl<K: std::hash::Hash + Eq + Clone, V> Sentences<K, V> {
    /// No sentence written yet.
    pub fn new() -> Self {
        Sentences {
            written: Vec::new(),
            index: HashMap::default(),
        }
    }

    /// The sentence for `key`, written by `write` the first time: the text,
    /// or, in a `Sentences<K, Reason>`, the reason named for it
    /// ([`Rejections::reason`]), so its hosts are rejected by handle.
    pub fn get<Q>(&mut self, key: &Q, write: impl FnOnce() -> V) -> &V
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let found = if self.written.len() <= SCANNED_REASONS {
            self.written.iter().position(|(k, _)| k.borrow() == key)
        } else {
            self.index.get(key).copied()
        };
        let at = match found {
            Some(at) => at,
            None => {
                let at = self.written.len();
                self.written.push((key.to_owned(), write()));
                if at == SCANNED_REASONS {
                    // Past the scanned few from now on: index every key.
                    for (i, (k, _)) in self.written.iter().enumerate() {
                        self.index.insert(k.clone(), i);
                    }
                } else if at > SCANNED_REASONS {
                    self.index.insert(key.to_owned(), at);
                }
                at
            }
        };
        &self.written[at].1
    }
}

impl<K: std::hash::Hash + Eq + Clone, V> Default for Sentences<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_are_written_once_per_key_scanned_or_hashed() {
        let mut sentences: Sentences<Vec<u32>> = Sentences::new();
        let mut writes = 0;
        // Forty distinct keys, each asked for twice in a row and then in
        // two more rounds: past SCANNED_REASONS of them the keys are found
        // by hashing, the key that crosses the line included.
        for round in 0..3 {
            for n in 0..40u32 {
                let key = vec![n, n + 1];
                for _ in 0..if round == 0 { 2 } else { 1 } {
                    let text = sentences.get(key.as_slice(), || {
                        writes += 1;
                        format!("{n}")
                    });
                    assert_eq!(*text, n.to_string(), "round {round}");
                }
            }
        }
        assert_eq!(writes, 40);
    }

    #[test]
    fn sentences_can_hold_named_reasons() {
        let mut rejections = Rejections::new();
        let mut reasons: Sentences<Vec<u32>, Reason> = Sentences::new();
        for host in 0..6u32 {
            let key = vec![host % 2];
            let reason = *reasons.get(key.as_slice(), || {
                rejections.reason(format!("lacks {}", host % 2))
            });
            rejections.reject_for(host, reason);
        }
        assert_eq!(
            rejections.into_vec(),
            [
                Rejection::new("lacks 0", vec![0, 2, 4]),
                Rejection::new("lacks 1", vec![1, 3, 5]),
            ]
        );
    }

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
                Rejection::new("not up", vec![3, 200, u32::MAX]),
                Rejection::new("too small", vec![1]),
            ]
        );
    }

    #[test]
    fn templates_group_their_hosts_figures_in_host_order() {
        let mut rejections = Rejections::new();
        assert!(rejections.reject_with(4, "needs {} MiB, {} free", &[8.0, 2.0]));
        assert!(rejections.reject(5, "needs {} MiB, {} free"));
        assert!(rejections.reject_with(6, "needs {} MiB, {} free", &[8.0, 3.0]));
        assert!(!rejections.reject_with(4, "needs {} MiB, {} free", &[1.0, 1.0]));
        let groups = rejections.into_vec();
        assert_eq!(groups.len(), 2, "the plain sentence is a group of its own");
        assert_eq!(groups[0].hosts, [4, 6]);
        assert_eq!(groups[0].figures, [8.0, 2.0, 8.0, 3.0]);
        assert_eq!(groups[1], Rejection::new("needs {} MiB, {} free", vec![5]));
    }

    #[test]
    fn many_reasons_group_alike_whether_scanned_or_hashed() {
        let reasons = 2 * SCANNED_REASONS + 3;
        let mut rejections = Rejections::new();
        for host in 0..3 * reasons as u32 {
            let reason = format!("reason {}", host as usize % reasons);
            if host % 2 == 0 {
                assert!(rejections.reject(host, &reason));
            } else {
                assert!(rejections.reject_with(host, &reason, &[f64::from(host)]));
            }
        }
        let groups = rejections.into_vec();
        // Each reason twice over (plain and template: `reasons` is odd,
        // so each text comes as both), in first-seen order.
        assert_eq!(groups.len(), 2 * reasons);
        for group in &groups {
            let text = group.reason.strip_prefix("reason ").expect("a reason");
            let reason: u32 = text.parse().expect("a number");
            let kind = group.hosts[0] % 2;
            let hosts: Vec<u32> = (0..3)
                .map(|round| reason + round * reasons as u32)
                .filter(|host| host % 2 == kind)
                .collect();
            assert_eq!(group.hosts, hosts, "{}", group.reason);
            let figures: Vec<f64> = if kind == 1 {
                hosts.iter().map(|&h| f64::from(h)).collect()
            } else {
                Vec::new()
            };
            assert_eq!(group.figures, figures, "{}", group.reason);
        }
    }

    #[test]
    fn comparing_by_words_is_text_equality() {
        let texts = [
            "",
            "a",
            "b",
            "abcdefgh",
            "abcdefgi",
            "abcdefghi",
            "abcdefghj",
            "bbcdefghi",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(same_text_by_words(a, b), a == b, "{a:?} and {b:?}");
            }
        }
    }

    #[test]
    fn named_reasons_share_groups_with_plain_ones_unused_ones_left_out() {
        let mut rejections = Rejections::new();
        let down = rejections.reason("down");
        let small = rejections.reason("too small");
        let unused = rejections.reason("never used");
        assert!(rejections.is_empty());
        assert!(rejections.reject(7, "first"));
        assert!(rejections.reject_for(3, small));
        assert!(rejections.reject(4, "down"));
        assert!(rejections.reject_for(5, down));
        assert!(!rejections.reject_for(3, down), "first reason wins");
        assert!(rejections.reject_for(u32::MAX, small));
        assert_ne!(down, unused);
        assert_eq!(rejections.len(), 5);
        assert_eq!(
            rejections.into_vec(),
            [
                Rejection::new("down", vec![4, 5]),
                Rejection::new("too small", vec![3, u32::MAX]),
                Rejection::new("first", vec![7]),
            ]
        );
    }

    #[test]
    fn nothing_rejected_is_an_empty_answer() {
        assert!(Rejections::new().into_vec().is_empty());
    }
}
