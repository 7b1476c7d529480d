//! Incremental decisions: a per-host unit's answers kept between decisions
//! and reused for the hosts that did not change.
//!
//! A unit that declares `per-host` (WIT 0.2.0) promises that its answer for
//! a host depends only on that host's row, the VMs on it, its index and the
//! request apart from the VM's id and name. So an answer stays valid while
//! three things stay the same:
//!
//! * **the unit**: the very unit object of the policy (a new version of a
//!   unit, or a policy rebuilt with it, is a new object; the cache holds a
//!   reference to each, so an address is never reused for another unit);
//! * **the request's shape**: the VM without its id and name, the unit's
//!   parameters and the hints, compared whole;
//! * **the host's row**: its [`Stamp`], which the caller gives for every
//!   host of the snapshot — a number that changes whenever anything a unit
//!   can read about the host changes (the held inventory renews it when a
//!   report changes the host, and adds a fingerprint of the claims pending
//!   on it). [`Stamp::NONE`] means "do not reuse". The claims' part counts
//!   only for answers whose call read a column the claims change
//!   ([`Stamps::claimed_columns`]; a sandboxed call's reads are recorded
//!   exactly, [`ColumnsRead`]): a unit that never read them gave the same
//!   answer whatever was claimed, so a decision's claims do not make it
//!   ask again about the host just placed on (Nova's `ComputeFilter`
//!   reads only the hosts' statuses).
//!
//! Answers are kept per *view* (the caller's name for which hosts the
//! snapshot's rows are: every held host, or one window of them), by row:
//! the row is the host's index, which the promise lets a unit look at.
//!
//! The pipeline then calls the unit only for the hosts with no valid
//! answer, or not at all; reused answers are combined exactly as fresh
//! ones, and the explain record counts them. A score unit whose floor or
//! ceiling changes for the same request broke its promise: its answers are
//! dropped and it is called for every candidate.
//!
//! The cache is bounded by the answers it holds ([`MAX_ANSWERS`]); the
//! least recently used entry goes first.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sandpiper_model::Inventory;
use sandpiper_model::fingerprint::{ColumnShares, host_fingerprints, host_fingerprints_kept};
use sandpiper_model::{KeyValue, Request, Vm};

use crate::unit::{ColumnsRead, Role, Unit};

/// What identifies the content of a host row, for reuse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// The host as reported: unique in the process, renewed with each
    /// change ([`fresh_stamps`]); 0 for "never reuse".
    pub reported: u64,
    /// A fingerprint of the claims pending on the host; 0 for none.
    pub claimed: u64,
}

impl Stamp {
    /// A row whose answers must not be reused or kept.
    pub const NONE: Stamp = Stamp {
        reported: 0,
        claimed: 0,
    };

    /// Whether answers for this row may be kept and reused.
    pub fn reusable(self) -> bool {
        self.reported != 0
    }
}

/// The stamp an answer was kept for, and whether the call that gave it read
/// a column the stamp's `claimed` part stands for
/// ([`Stamps::claimed_columns`]).
#[derive(Clone, Copy, Debug)]
struct Kept {
    stamp: Stamp,
    read_claimed: bool,
}

impl Kept {
    const NONE: Kept = Kept {
        stamp: Stamp::NONE,
        read_claimed: true,
    };

    /// Whether the answer holds for a host stamped `now`: the same report,
    /// and the same claims unless the call never read what claims change.
    fn holds_for(self, now: Stamp) -> bool {
        now.reusable()
            && self.stamp.reported == now.reported
            && (!self.read_claimed || self.stamp.claimed == now.claimed)
    }
}

/// `count` reported stamps never handed out before in this process.
pub fn fresh_stamps(count: usize) -> std::ops::Range<u64> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let first = NEXT.fetch_add(count as u64, Ordering::Relaxed);
    first..first + count as u64
}

/// Stamps for hosts sent with a request rather than held: each host's
/// content fingerprint (`sandpiper_model::fingerprint`), so a host sent
/// again unchanged has the same stamp, and [`Stamp::NONE`] for a host
/// with hardware. Nothing is claimed on such hosts.
/// [`ReuseCache::content_stamps`] gives the same, hashing only the columns
/// it has not seen.
pub fn content_stamps(inventory: &Inventory) -> Vec<Stamp> {
    stamps_of(host_fingerprints(inventory))
}

fn stamps_of(fingerprints: Vec<Option<u64>>) -> Vec<Stamp> {
    fingerprints
        .into_iter()
        .map(|fingerprint| match fingerprint {
            // 0 means "never reuse": a fingerprint of 0 reads as 1.
            Some(content) => Stamp {
                reported: content.max(1),
                claimed: 0,
            },
            None => Stamp::NONE,
        })
        .collect()
}

/// What a decision may reuse: the cache and the stamps of the snapshot's
/// hosts, in a view the caller names.
pub struct Reuse<'a> {
    pub cache: &'a mut ReuseCache,
    /// Which hosts the snapshot's rows are (e.g. a window's first held
    /// row and length); answers are kept per view.
    pub view: (usize, usize),
    pub stamps: Stamps<'a>,
}

/// The stamps of a snapshot's hosts.
#[derive(Clone, Copy)]
pub struct Stamps<'a> {
    /// One per host of the snapshot.
    pub by_host: &'a [Stamp],
    /// The columns the stamps' `claimed` part stands for: those that
    /// change when only the claims on a host do. An answer from a call
    /// that read none of them holds whatever is claimed.
    /// [`ColumnsRead::ALL`] makes every answer depend on the claims.
    pub claimed_columns: ColumnsRead,
}

impl Stamps<'_> {
    /// Host `host`'s stamp.
    pub fn of(&self, host: u32) -> Stamp {
        self.by_host[host as usize]
    }

    /// Whether a call that read `read` read a column claims change.
    pub fn claims_read(&self, read: ColumnsRead) -> bool {
        read.overlaps(self.claimed_columns)
    }
}

/// The most answers (one per host per entry) a cache holds: about 24 MB,
/// plus what filters' entries keep of their rejections, at most two a row
/// before they are trimmed (8 bytes and the figures: 24 bytes for
/// `Memory`'s two, where its sentence, kept twice, took about 200).
pub const MAX_ANSWERS: usize = 1_000_000;

/// Kept answers of per-host units, for one cluster.
#[derive(Default)]
pub struct ReuseCache {
    entries: Vec<Entry>,
    tick: u64,
    /// The last inline snapshot's columns' shares of its hosts'
    /// fingerprints ([`ReuseCache::content_stamps`]): 8 bytes a row per
    /// column set, about 2 MB for 10,000 hosts and 30,000 VMs.
    shares: ColumnShares,
}

/// A per-host filter's kept verdicts, with each rejection's reason as the
/// unit gave it: a template and the host's figures, written out only when
/// a reader asks for sentences.
pub struct FilterAnswers {
    /// By row: the stamp the verdict was given for, and the index of its
    /// rejection in `rejections`, or [`PASSES`].
    verdicts: Vec<(Kept, u32)>,
    /// Each kept rejection: its template (an index into `templates`) and
    /// where its figures start in `figures`.
    rejections: Vec<(u32, u32)>,
    /// Every template kept, plain sentences included, with how many
    /// figures one host's sentence takes (0 for a plain sentence).
    templates: Vec<(String, usize)>,
    /// Template indices by text: plain sentences first, templates with
    /// figures second (the same text can be both: braces in a plain
    /// sentence are literal).
    by_text: [HashMap<String, u32>; 2],
    figures: Vec<f64>,
}

/// A verdict of "not rejected".
pub const PASSES: u32 = u32::MAX;

/// A per-host score's kept values.
pub struct ScoreAnswers {
    /// By row: the stamp the value was given for, and the value.
    values: Vec<(Kept, f64)>,
    /// The floor and ceiling the kept values came with; `None` while none
    /// is kept.
    bounds: Option<(Option<f64>, Option<f64>)>,
}

enum Answers {
    Filter(FilterAnswers),
    Score(ScoreAnswers),
}

impl Answers {
    fn len(&self) -> usize {
        match self {
            Answers::Filter(a) => a.verdicts.len(),
            Answers::Score(a) => a.values.len(),
        }
    }
}

struct Entry {
    unit: Arc<dyn Unit>,
    view: (usize, usize),
    vm: Arc<Vm>,
    params: Vec<KeyValue>,
    hints: Vec<KeyValue>,
    answers: Answers,
    used: u64,
}

/// The VM as the cache compares requests: without its id and name.
pub(super) fn shape_of(vm: &Vm) -> Arc<Vm> {
    Arc::new(Vm {
        id: String::new(),
        name: String::new(),
        ..vm.clone()
    })
}

fn same_unit(a: &Arc<dyn Unit>, b: &Arc<dyn Unit>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

impl ReuseCache {
    /// [`content_stamps`] of an inline snapshot. When `columns_kept` (a
    /// compact body's columns, kept as the cluster's last body for the
    /// next to share, `arrow_snapshot::LastBody`), each column's
    /// fingerprint shares are kept, and only the columns the last snapshot
    /// did not share are hashed. Otherwise (a JSON body's columns, which
    /// die with the decision) the shares are neither kept nor looked for,
    /// and those of earlier bodies are let go.
    pub fn content_stamps(&mut self, inventory: &Inventory, columns_kept: bool) -> Vec<Stamp> {
        if columns_kept {
            stamps_of(host_fingerprints_kept(inventory, &mut self.shares))
        } else {
            self.shares = ColumnShares::default();
            content_stamps(inventory)
        }
    }

    /// How many columns' shares the last [`ReuseCache::content_stamps`]
    /// took from the call before, and how many it kept.
    #[cfg(test)]
    pub(crate) fn fingerprint_columns(&self) -> (usize, usize) {
        (self.shares.reused(), self.shares.kept())
    }

    /// The kept verdicts of `unit` as a filter for requests shaped like
    /// `call` (its VM without id and name as `vm`, from `shape_of`) over `hosts` rows of
    /// `view`; an empty set when there are none yet.
    pub fn filter(
        &mut self,
        unit: &Arc<dyn Unit>,
        view: (usize, usize),
        vm: &Arc<Vm>,
        call: &Request,
        hosts: usize,
    ) -> &mut FilterAnswers {
        let entry = self.entry(unit, Role::Filter, view, vm, call, hosts);
        match &mut entry.answers {
            Answers::Filter(answers) => answers,
            Answers::Score(_) => unreachable!("entries are looked up by role"),
        }
    }

    /// The kept values of `unit` as a score; see [`ReuseCache::filter`].
    pub fn score(
        &mut self,
        unit: &Arc<dyn Unit>,
        view: (usize, usize),
        vm: &Arc<Vm>,
        call: &Request,
        hosts: usize,
    ) -> &mut ScoreAnswers {
        let entry = self.entry(unit, Role::Score, view, vm, call, hosts);
        match &mut entry.answers {
            Answers::Score(answers) => answers,
            Answers::Filter(_) => unreachable!("entries are looked up by role"),
        }
    }

    fn entry(
        &mut self,
        unit: &Arc<dyn Unit>,
        role: Role,
        view: (usize, usize),
        vm: &Arc<Vm>,
        call: &Request,
        hosts: usize,
    ) -> &mut Entry {
        self.tick += 1;
        let found = self.entries.iter().position(|e| {
            same_unit(&e.unit, unit)
                && matches!(
                    (&e.answers, role),
                    (Answers::Filter(_), Role::Filter) | (Answers::Score(_), Role::Score)
                )
                && e.view == view
                && e.answers.len() == hosts
                && (Arc::ptr_eq(&e.vm, vm) || *e.vm == **vm)
                && e.params == call.params
                && e.hints == call.hints
        });
        let at = match found {
            Some(at) => at,
            None => {
                let held =
                    |entries: &[Entry]| -> usize { entries.iter().map(|e| e.answers.len()).sum() };
                while !self.entries.is_empty() && held(&self.entries) + hosts > MAX_ANSWERS {
                    let oldest = (0..self.entries.len())
                        .min_by_key(|&i| self.entries[i].used)
                        .unwrap_or(0);
                    self.entries.swap_remove(oldest);
                }
                let answers = match role {
                    Role::Score => Answers::Score(ScoreAnswers {
                        values: vec![(Kept::NONE, 0.0); hosts],
                        bounds: None,
                    }),
                    _ => Answers::Filter(FilterAnswers {
                        verdicts: vec![(Kept::NONE, PASSES); hosts],
                        rejections: Vec::new(),
                        templates: Vec::new(),
                        by_text: Default::default(),
                        figures: Vec::new(),
                    }),
                };
                self.entries.push(Entry {
                    unit: Arc::clone(unit),
                    view,
                    vm: Arc::clone(vm),
                    params: call.params.clone(),
                    hints: call.hints.clone(),
                    answers,
                    used: 0,
                });
                self.entries.len() - 1
            }
        };
        let entry = &mut self.entries[at];
        entry.used = self.tick;
        entry
    }
}

impl FilterAnswers {
    /// The kept verdict on row `host` if it was given for `stamp`: the
    /// index of its rejection ([`FilterAnswers::rejection`]), or
    /// [`PASSES`].
    pub fn verdict(&self, host: u32, stamp: Stamp) -> Option<u32> {
        let &(kept, verdict) = self.verdicts.get(host as usize)?;
        kept.holds_for(stamp).then_some(verdict)
    }

    /// Rejection `index` (from [`FilterAnswers::verdict`] or
    /// [`FilterAnswers::keep_rejection`]): its template's index and its
    /// figures.
    pub fn rejection(&self, index: u32) -> (u32, &[f64]) {
        let (template, start) = self.rejections[index as usize];
        let per_host = self.templates[template as usize].1;
        let start = start as usize;
        (template, &self.figures[start..start + per_host])
    }

    /// Template `index` (from [`FilterAnswers::rejection`]).
    pub fn template(&self, index: u32) -> &str {
        &self.templates[index as usize].0
    }

    /// How many templates are kept: every template index is below it.
    pub fn template_count(&self) -> usize {
        self.templates.len()
    }

    /// The index of `template`, one host's sentence taking `per_host`
    /// figures (0: a plain sentence), kept now if new.
    pub fn template_index(&mut self, template: &str, per_host: usize) -> u32 {
        let by_text = &mut self.by_text[usize::from(per_host > 0)];
        if let Some(&at) = by_text.get(template) {
            return at;
        }
        let at = self.templates.len() as u32;
        self.templates.push((template.to_owned(), per_host));
        by_text.insert(template.to_owned(), at);
        at
    }

    /// Keeps one host's rejection for `template` (from
    /// [`FilterAnswers::template_index`]) with its `figures`, and returns
    /// its index for [`FilterAnswers::put`].
    pub fn keep_rejection(&mut self, template: u32, figures: &[f64]) -> u32 {
        debug_assert_eq!(figures.len(), self.templates[template as usize].1);
        let at = self.rejections.len() as u32;
        self.rejections.push((template, self.figures.len() as u32));
        self.figures.extend_from_slice(figures);
        at
    }

    /// Keeps a fresh verdict: `rejected_for` is the rejection's index
    /// (from [`FilterAnswers::keep_rejection`]), `None` for a pass;
    /// `read_claimed` says whether its call read a column claims change.
    pub fn put(&mut self, host: u32, stamp: Stamp, read_claimed: bool, rejected_for: Option<u32>) {
        if !stamp.reusable() {
            return;
        }
        if let Some(slot) = self.verdicts.get_mut(host as usize) {
            let kept = Kept {
                stamp,
                read_claimed,
            };
            *slot = (kept, rejected_for.unwrap_or(PASSES));
        }
    }

    /// Forgets every verdict when the rejections kept outgrow the rows
    /// (each fresh rejection is kept anew, and the ones it replaced are
    /// never looked up again).
    pub fn trim(&mut self) {
        if self.rejections.len() > 2 * self.verdicts.len() + 64 {
            self.rejections.clear();
            self.templates.clear();
            self.by_text.iter_mut().for_each(HashMap::clear);
            self.figures.clear();
            self.verdicts.fill((Kept::NONE, PASSES));
        }
    }
}

impl ScoreAnswers {
    /// The kept value of row `host` if it was given for `stamp`.
    pub fn get(&self, host: u32, stamp: Stamp) -> Option<f64> {
        let &(kept, value) = self.values.get(host as usize)?;
        kept.holds_for(stamp).then_some(value)
    }

    /// The floor and ceiling the kept values came with.
    pub fn bounds(&self) -> Option<(Option<f64>, Option<f64>)> {
        self.bounds
    }

    /// Keeps fresh values given with `bounds` by a call that read a column
    /// claims change, or not (`read_claimed`). Values kept with other
    /// bounds are forgotten first: the unit broke its promise, and nothing
    /// it said before can be trusted.
    pub fn put(
        &mut self,
        fresh: impl Iterator<Item = (u32, Stamp, f64)>,
        bounds: (Option<f64>, Option<f64>),
        read_claimed: bool,
    ) {
        if self.bounds.is_some_and(|kept| !same_bounds(kept, bounds)) {
            self.forget();
        }
        self.bounds = Some(bounds);
        for (host, stamp, value) in fresh {
            if stamp.reusable()
                && let Some(slot) = self.values.get_mut(host as usize)
            {
                let kept = Kept {
                    stamp,
                    read_claimed,
                };
                *slot = (kept, value);
            }
        }
    }

    /// Forgets every kept value.
    fn forget(&mut self) {
        self.values.fill((Kept::NONE, 0.0));
        self.bounds = None;
    }
}

/// Whether two (floor, ceiling) pairs are the same numbers, bit for bit.
pub fn same_bounds(a: (Option<f64>, Option<f64>), b: (Option<f64>, Option<f64>)) -> bool {
    let bits = |x: Option<f64>| x.map(f64::to_bits);
    bits(a.0) == bits(b.0) && bits(a.1) == bits(b.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers() -> FilterAnswers {
        FilterAnswers {
            verdicts: vec![(Kept::NONE, PASSES); 2],
            rejections: Vec::new(),
            templates: Vec::new(),
            by_text: Default::default(),
            figures: Vec::new(),
        }
    }

    #[test]
    fn an_answer_that_read_no_claims_outlives_a_claim_but_not_a_report() {
        let stamp = Stamp {
            reported: 7,
            claimed: 1,
        };
        let claimed_again = Stamp {
            claimed: 2,
            ..stamp
        };
        let reported_again = Stamp {
            reported: 8,
            ..stamp
        };
        let mut blind = answers();
        blind.put(0, stamp, false, None);
        assert_eq!(blind.verdict(0, stamp), Some(PASSES));
        assert_eq!(blind.verdict(0, claimed_again), Some(PASSES));
        assert_eq!(blind.verdict(0, reported_again), None);
        assert_eq!(blind.verdict(0, Stamp::NONE), None);

        let mut reading = answers();
        reading.put(0, stamp, true, None);
        assert_eq!(reading.verdict(0, stamp), Some(PASSES));
        assert_eq!(reading.verdict(0, claimed_again), None);
        // A row never answered holds nothing.
        assert_eq!(reading.verdict(1, stamp), None);
    }

    #[test]
    fn a_score_that_read_claims_is_asked_again_after_one() {
        let stamp = Stamp {
            reported: 3,
            claimed: 0,
        };
        let claimed = Stamp {
            claimed: 9,
            ..stamp
        };
        let mut scores = ScoreAnswers {
            values: vec![(Kept::NONE, 0.0); 1],
            bounds: None,
        };
        scores.put([(0, stamp, 4.0)].into_iter(), (None, None), true);
        assert_eq!(scores.get(0, stamp), Some(4.0));
        assert_eq!(scores.get(0, claimed), None);
        scores.put([(0, stamp, 5.0)].into_iter(), (None, None), false);
        assert_eq!(scores.get(0, claimed), Some(5.0));
    }
}
