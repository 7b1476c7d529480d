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
//!   reads only the hosts' statuses). Hosts sent inline are stamped by
//!   their content, and their fingerprints are kept in parts
//!   ([`RowFingerprints`]): an answer there also keeps the host's
//!   fingerprint over only the columns its call read, and holds while
//!   that does, whatever else changed (a host reporting new free memory
//!   is not asked again by a filter that reads only statuses).
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
use sandpiper_model::fingerprint::{
    ColumnShares, RowFingerprints, host_fingerprints, host_fingerprints_kept,
};
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

/// What an answer is kept with ([`Stamps::keep`]): the stamp it was
/// given for, what its call read, and, for a host sent inline, the host's
/// fingerprint over only those columns.
#[derive(Clone, Copy, Debug)]
pub struct Kept {
    stamp: Stamp,
    read: ColumnsRead,
    /// [`RowFingerprints::over`] the columns `read` names; 0 for none
    /// (a held host, whose stamp changes with any report).
    read_fingerprint: u64,
}

impl Kept {
    const NONE: Kept = Kept {
        stamp: Stamp::NONE,
        read: ColumnsRead::ALL,
        read_fingerprint: 0,
    };
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
pub fn content_stamps(inventory: &Inventory) -> ContentStamps {
    ContentStamps::of(host_fingerprints(inventory))
}

/// The stamps of hosts sent inline ([`content_stamps`]), and their
/// fingerprints in parts.
pub struct ContentStamps {
    by_host: Vec<Stamp>,
    rows: RowFingerprints,
}

impl ContentStamps {
    fn of(rows: RowFingerprints) -> ContentStamps {
        let by_host = rows
            .whole()
            .iter()
            .map(|&fingerprint| match fingerprint {
                Some(content) => Stamp {
                    reported: nonzero(content),
                    claimed: 0,
                },
                None => Stamp::NONE,
            })
            .collect();
        ContentStamps { by_host, rows }
    }

    /// One stamp per host.
    pub fn by_host(&self) -> &[Stamp] {
        &self.by_host
    }

    /// The stamps as a decision reuses answers by them.
    pub fn stamps(&self) -> Stamps<'_> {
        Stamps {
            by_host: &self.by_host,
            // Nothing is claimed on hosts sent inline.
            claimed_columns: ColumnsRead::NONE,
            rows: Some(&self.rows),
        }
    }
}

/// 0 means "never reuse": a fingerprint of 0 reads as 1.
fn nonzero(fingerprint: u64) -> u64 {
    fingerprint.max(1)
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
    /// The hosts' fingerprints in parts, for hosts stamped by their
    /// content ([`ContentStamps`]); `None` for held hosts.
    pub rows: Option<&'a RowFingerprints>,
}

impl Stamps<'_> {
    /// Host `host`'s stamp.
    pub fn of(&self, host: u32) -> Stamp {
        self.by_host[host as usize]
    }

    /// What to keep with an answer for `host` from a call that read
    /// `read`.
    pub fn keep(&self, host: u32, read: ColumnsRead) -> Kept {
        let stamp = self.of(host);
        if !stamp.reusable() {
            return Kept::NONE;
        }
        Kept {
            stamp,
            read,
            read_fingerprint: self.over(host, read).unwrap_or(0),
        }
    }

    /// Whether an answer kept as `kept` holds for `host` now: the same
    /// row (and the same claims, unless its call read nothing claims
    /// change), or, for a host sent inline, the same in every column its
    /// call read. Kept again under the row's new stamp in that case, so
    /// the next decision knows it at a glance.
    #[inline]
    fn holds(&self, host: u32, kept: &mut Kept) -> bool {
        let now = self.of(host);
        if !now.reusable() {
            return false;
        }
        if kept.stamp.reported == now.reported {
            return !kept.read.overlaps(self.claimed_columns) || kept.stamp.claimed == now.claimed;
        }
        kept.read_fingerprint != 0 && self.holds_by_read(host, now, kept)
    }

    /// [`Stamps::holds`] for a row that changed: rare, so kept out of the
    /// loop over every candidate.
    #[cold]
    #[inline(never)]
    fn holds_by_read(&self, host: u32, now: Stamp, kept: &mut Kept) -> bool {
        let holds = self.over(host, kept.read) == Some(kept.read_fingerprint);
        if holds {
            kept.stamp = now;
        }
        holds
    }

    /// Host `host`'s fingerprint over the columns `read` names, if it was
    /// sent inline.
    fn over(&self, host: u32, read: ColumnsRead) -> Option<u64> {
        let over = self.rows?.over(
            host as usize,
            |metric| read.read_host_metric(metric),
            read.read_vms(),
        );
        over.map(nonzero)
    }
}

/// The most answers (one per host per entry) a cache holds: about 40 MB,
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
    pub fn content_stamps(&mut self, inventory: &Inventory, columns_kept: bool) -> ContentStamps {
        if columns_kept {
            ContentStamps::of(host_fingerprints_kept(inventory, &mut self.shares))
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
    /// The kept verdict on row `host` if it holds for the host's stamp
    /// now: the index of its rejection ([`FilterAnswers::rejection`]), or
    /// [`PASSES`].
    pub fn verdict(&mut self, host: u32, stamps: &Stamps<'_>) -> Option<u32> {
        let (kept, verdict) = self.verdicts.get_mut(host as usize)?;
        stamps.holds(host, kept).then_some(*verdict)
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

    /// Keeps a fresh verdict ([`Stamps::keep`]): `rejected_for` is the
    /// rejection's index (from [`FilterAnswers::keep_rejection`]), `None`
    /// for a pass.
    pub fn put(&mut self, host: u32, kept: Kept, rejected_for: Option<u32>) {
        if let Some(slot) = self.verdicts.get_mut(host as usize) {
            *slot = (kept, rejected_for.unwrap_or(PASSES));
        }
    }

    /// Makes the verdict just kept for `host` ([`FilterAnswers::put`]) a
    /// rejection: `rejection` from [`FilterAnswers::keep_rejection`].
    pub fn reject(&mut self, host: u32, rejection: u32) {
        if let Some(slot) = self.verdicts.get_mut(host as usize) {
            slot.1 = rejection;
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
    /// The kept value of row `host` if it holds for the host's stamp now.
    pub fn get(&mut self, host: u32, stamps: &Stamps<'_>) -> Option<f64> {
        let (kept, value) = self.values.get_mut(host as usize)?;
        stamps.holds(host, kept).then_some(*value)
    }

    /// The floor and ceiling the kept values came with.
    pub fn bounds(&self) -> Option<(Option<f64>, Option<f64>)> {
        self.bounds
    }

    /// Keeps fresh values given with `bounds`, each with what
    /// [`Stamps::keep`] gave for it. Values kept with other bounds are
    /// forgotten first: the unit broke its promise, and nothing it said
    /// before can be trusted.
    pub fn put(
        &mut self,
        fresh: impl Iterator<Item = (u32, Kept, f64)>,
        bounds: (Option<f64>, Option<f64>),
    ) {
        if self.bounds.is_some_and(|kept| !same_bounds(kept, bounds)) {
            self.forget();
        }
        self.bounds = Some(bounds);
        for (host, kept, value) in fresh {
            if let Some(slot) = self.values.get_mut(host as usize) {
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
    use sandpiper_model::{HostMetric, HostStatus};

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

    /// What claims change here: a pending metric and the VMs.
    const CLAIMS: ColumnsRead = ColumnsRead::of(&[HostMetric::MemoryPendingMib], true, false);

    fn held(by_host: &[Stamp]) -> Stamps<'_> {
        Stamps {
            by_host,
            claimed_columns: CLAIMS,
            rows: None,
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
        let first = [stamp, stamp];
        let statuses_only = ColumnsRead::NONE;
        let mut blind = answers();
        blind.put(0, held(&first).keep(0, statuses_only), None);
        assert_eq!(blind.verdict(0, &held(&first)), Some(PASSES));
        assert_eq!(blind.verdict(0, &held(&[claimed_again])), Some(PASSES));
        assert_eq!(blind.verdict(0, &held(&[reported_again])), None);
        assert_eq!(blind.verdict(0, &held(&[Stamp::NONE])), None);

        let mut reading = answers();
        let pending = ColumnsRead::of(&[HostMetric::MemoryPendingMib], false, false);
        reading.put(0, held(&first).keep(0, pending), None);
        assert_eq!(reading.verdict(0, &held(&first)), Some(PASSES));
        assert_eq!(reading.verdict(0, &held(&[claimed_again])), None);
        // A row never answered holds nothing.
        assert_eq!(reading.verdict(1, &held(&first)), None);
    }

    #[test]
    fn a_score_that_read_claims_is_asked_again_after_one() {
        let stamp = Stamp {
            reported: 3,
            claimed: 0,
        };
        let claimed = [Stamp {
            claimed: 9,
            ..stamp
        }];
        let first = [stamp];
        let mut scores = ScoreAnswers {
            values: vec![(Kept::NONE, 0.0); 1],
            bounds: None,
        };
        let fresh = [(0, held(&first).keep(0, ColumnsRead::ALL), 4.0)];
        scores.put(fresh.into_iter(), (None, None));
        assert_eq!(scores.get(0, &held(&first)), Some(4.0));
        assert_eq!(scores.get(0, &held(&claimed)), None);
        let fresh = [(0, held(&first).keep(0, ColumnsRead::NONE), 5.0)];
        scores.put(fresh.into_iter(), (None, None));
        assert_eq!(scores.get(0, &held(&claimed)), Some(5.0));
    }

    /// Two hosts sent inline, with `free` as host 0's free memory and
    /// `status` as its status.
    fn inline(free: f64, status: HostStatus) -> Inventory {
        let mut inventory = Inventory::new(2, 0);
        let set = |inventory: &mut Inventory, metric, values| {
            inventory.set_host_metric(metric, values).expect("two rows");
        };
        set(&mut inventory, HostMetric::MemoryFreeMib, vec![free, 512.0]);
        set(&mut inventory, HostMetric::CpuCores, vec![8.0, 8.0]);
        let statuses = vec![status, HostStatus::Up];
        inventory.set_host_statuses(statuses).expect("two rows");
        inventory
    }

    /// An inline host's answer holds while the columns its call read do,
    /// and comes back to the fast path (the row's stamp) when it held by
    /// them.
    #[test]
    fn an_inline_answer_outlives_a_change_to_columns_its_call_did_not_read() {
        let first = content_stamps(&inline(1_024.0, HostStatus::Up));
        let memory = ColumnsRead::of(&[HostMetric::MemoryFreeMib], false, false);
        let mut blind = answers();
        let mut reading = answers();
        blind.put(0, first.stamps().keep(0, ColumnsRead::NONE), None);
        reading.put(0, first.stamps().keep(0, memory), None);

        let more_free = content_stamps(&inline(2_048.0, HostStatus::Up));
        assert_ne!(
            first.by_host()[0],
            more_free.by_host()[0],
            "the row changed"
        );
        assert_eq!(first.by_host()[1], more_free.by_host()[1]);
        assert_eq!(blind.verdict(0, &more_free.stamps()), Some(PASSES));
        assert_eq!(reading.verdict(0, &more_free.stamps()), None);
        // Held by what it read, the answer now carries the row's stamp.
        assert_eq!(blind.verdicts[0].0.stamp, more_free.by_host()[0]);

        let down = content_stamps(&inline(2_048.0, HostStatus::Down));
        assert_eq!(blind.verdict(0, &down.stamps()), None, "statuses are read");
        // Held hosts have no parts: a changed stamp is a changed row.
        let by_host = more_free.by_host();
        assert_eq!(blind.verdict(0, &held(by_host)), Some(PASSES));
        let mut held_blind = answers();
        held_blind.put(0, held(first.by_host()).keep(0, ColumnsRead::NONE), None);
        assert_eq!(held_blind.verdict(0, &held(by_host)), None);
    }
}
