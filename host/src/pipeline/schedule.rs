//! One placement decision: run the policy's filters over the candidates,
//! score the survivors, combine the scores, pick the winner.
//!
//! The rules, in the order they apply:
//!
//! * Filters run one after another, each over the survivors of the previous
//!   one, and the chain stops as soon as no candidate is left. A filter's
//!   answer must only name candidates, each once; a filter that fails
//!   (trap, limit, invalid answer) ends the decision with an error naming it
//!   when it is fail-closed, and is skipped (and recorded) when fail-open.
//! * No survivor: the decision has no host, and the explain record lists
//!   every rejection with its reason. One survivor: it is chosen without
//!   calling any score unit (oVirt does the same; it saves the most time
//!   exactly when the filters were strict).
//! * Otherwise every score unit with a factor above 0 is called; one that
//!   fails or answers something unusable (wrong length, a non-finite value)
//!   is skipped and recorded when fail-open (a weight's default), and ends
//!   the decision with an error naming it when fail-closed. Scores combine
//!   by rank or normalised (see `combine`), the highest total wins.
//! * A unit that declares which requests it applies to (`applies-to` in
//!   the WIT, 0.2.0) is not called for a request with none of the declared
//!   properties (kube-scheduler's PreFilter `Skip`): a skipped filter
//!   rejects nothing, a skipped score is combined as the answer it
//!   promised (the same value for every candidate: equal ranks, which still
//!   add their points in rank mode, or no share in normalised mode), so a
//!   skip never changes a decision; the explain record says "skipped" and
//!   why. [`schedule_calling_every_unit`] decides without skipping, for the
//!   equality test and the benchmark.
//! * A unit that declares `per-host` may have its answers for unchanged
//!   hosts reused from earlier decisions ([`schedule_reusing`], see
//!   `reuse`): it is called only for the other candidates, or not at all,
//!   and the reused answers count exactly as fresh ones. The explain record
//!   says how many were reused; a filter's rejections are then grouped in
//!   candidate order.
//! * Given cores to borrow ([`schedule_with`], `parallel`), a decision
//!   calls a `per-host` filter over many candidates in chunks on several
//!   cores, and its weights side by side; the answers are joined and
//!   combined exactly as one call each would give them.
//! * **Ties** go to the candidate that comes first in candidate order — the
//!   order of the request's `candidates`, or host order when it gives none.
//!   Filters keep that order, so a caller that wants a different preference
//!   among equals expresses it by ordering the candidates.

use std::sync::Arc;
use std::time::Instant;

use sandpiper_model::Inventory;
use sandpiper_model::reason;
use sandpiper_model::{AppliesTo, KeyValue, Rejection, Request, Scores, UnitInfo, Vm};

use super::combine;
use super::degraded;
use super::explain::{
    Explain, FailureRecord, FilterRecord, Outcome, ScoreRecord, SnapshotRef, Standing,
};
use super::parallel::{self, Lender};
use super::params::{ParamError, ParamValues};
use super::policy::{Combination, OnFailure, Policy};
use super::reuse::{self, FilterAnswers, PASSES, Reuse, ScoreAnswers, Stamps};
use crate::unit::{CallResult, Called, ColumnsRead, Failed, Role, Unit, UnitError, Usage};

/// What to place and where it may go.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScheduleRequest {
    pub vm: Vm,
    /// Scheduler hints (Nova's `same_host`, `query`, ...); a list-valued hint
    /// repeats its key.
    pub hints: Vec<KeyValue>,
    /// Host indices the VM may go to, distinct, in order of preference among
    /// equals; `None` means every host of the snapshot, in snapshot order.
    pub candidates: Option<Vec<u32>>,
    /// The cluster's parameter overrides, which beat the policy's values.
    pub params: ParamValues,
}

/// A candidate and its total score.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Ranked {
    pub host: u32,
    pub total: f64,
}

/// The result of a decision.
#[derive(Clone, Debug)]
pub struct Decision {
    /// The winning host, `None` when every candidate was rejected.
    pub chosen: Option<u32>,
    /// The surviving candidates, best first, ties in candidate order. A
    /// single survivor is listed with total 0; empty when none survived.
    pub ranked: Vec<Ranked>,
    pub explain: Explain,
}

/// Why no decision could be made at all (as opposed to "no host fits",
/// which is a decision).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    #[error(transparent)]
    Params(#[from] ParamError),
    #[error("candidate host {host} is out of range: the snapshot has {host_count} hosts")]
    CandidateOutOfRange { host: u32, host_count: usize },
    #[error("candidate host {host} is listed twice")]
    DuplicateCandidate { host: u32 },
    #[error("the snapshot has {host_count} hosts, more than a host index can address")]
    TooManyHosts { host_count: usize },
    #[error("filter `{unit}` failed and the policy fails closed on it: {}", failed.error)]
    FilterFailed { unit: String, failed: Failed },
    /// A weight the policy fails closed on failed (trap, limit, NaN or
    /// infinite score, wrong length).
    #[error("weight `{unit}` failed and the policy fails closed on it: {}", failed.error)]
    ScoreFailed { unit: String, failed: Failed },
    /// A unit (any role, fail-open or not) hit its deadline because the
    /// machine starved it of CPU (`UnitError::Overloaded`). Deciding
    /// without it would make the machine's load a policy verdict, so the
    /// decision stops and the caller retries.
    #[error("unit `{unit}` {}", failed.error)]
    Overloaded { unit: String, failed: Failed },
}

/// Where a candidate stands while the filters run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    NotCandidate,
    Survivor,
    /// Rejected by the filter being checked.
    Rejecting,
    /// Rejected by an earlier filter.
    Rejected,
}

/// Places `request.vm` with `policy` over the snapshot `inventory`.
///
/// A decision's unit calls are counted in the process metrics once, from
/// its explain record (`degraded::observe`); a call that stops the
/// decision instead is counted where it stops it.
pub fn schedule(
    policy: &Policy,
    inventory: &Arc<Inventory>,
    request: &ScheduleRequest,
) -> Result<Decision, ScheduleError> {
    let decision = decide(policy, inventory, request, Skips::Allowed, None, None)?;
    degraded::observe(&decision.explain);
    Ok(decision)
}

/// [`schedule`], reusing the answers `reuse` kept of per-host units for
/// the hosts whose stamps did not change, and keeping this decision's
/// answers for the next. Stamps for another number of hosts than the
/// snapshot's are ignored: the decision is then made whole.
pub fn schedule_reusing(
    policy: &Policy,
    inventory: &Arc<Inventory>,
    request: &ScheduleRequest,
    reuse: Reuse<'_>,
) -> Result<Decision, ScheduleError> {
    schedule_with(
        policy,
        inventory,
        request,
        Means {
            reuse: Some(reuse),
            cores: None,
        },
    )
}

/// What a decision may use beyond calling every unit on the caller's
/// thread.
pub struct Means<'a> {
    /// Per-host units' answers kept from earlier decisions, reused for
    /// hosts whose stamps did not change ([`schedule_reusing`]).
    pub reuse: Option<Reuse<'a>>,
    /// Lends extra cores: per-host filters over many candidates are then
    /// called in chunks, and weights side by side (`parallel`).
    pub cores: Option<&'a dyn Lender>,
}

/// [`schedule`] with `means`: the same decision, sooner.
pub fn schedule_with(
    policy: &Policy,
    inventory: &Arc<Inventory>,
    request: &ScheduleRequest,
    means: Means<'_>,
) -> Result<Decision, ScheduleError> {
    let reuse = means
        .reuse
        .filter(|reuse| reuse.stamps.by_host.len() == inventory.host_count());
    let decision = decide(
        policy,
        inventory,
        request,
        Skips::Allowed,
        reuse,
        means.cores,
    )?;
    degraded::observe(&decision.explain);
    Ok(decision)
}

/// [`schedule`] calling every unit, even one that declared it has nothing
/// to say about the request: the decision as it was before units could be
/// skipped. For the test that skipping never changes a decision, and for
/// the benchmark that measures what skipping saves.
pub fn schedule_calling_every_unit(
    policy: &Policy,
    inventory: &Arc<Inventory>,
    request: &ScheduleRequest,
) -> Result<Decision, ScheduleError> {
    let decision = decide(policy, inventory, request, Skips::Never, None, None)?;
    degraded::observe(&decision.explain);
    Ok(decision)
}

/// Whether units may be skipped (see the module doc).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Skips {
    Allowed,
    Never,
}

/// Why `info`'s unit has nothing to say about `call`, or `None` when it
/// must run.
fn skip_reason(skips: Skips, info: &UnitInfo, call: &Request) -> Option<String> {
    match (&info.applies_to, skips) {
        (_, Skips::Never) | (AppliesTo::EveryRequest, _) => None,
        (AppliesTo::RequestsWith(properties), Skips::Allowed) => {
            if properties.iter().any(|p| p.present_in(call)) {
                return None;
            }
            let names: Vec<String> = properties.iter().map(|p| p.describe()).collect();
            Some(format!("the request has none of: {}", names.join(", ")))
        }
    }
}

fn decide(
    policy: &Policy,
    inventory: &Arc<Inventory>,
    request: &ScheduleRequest,
    skips: Skips,
    mut reuse: Option<Reuse<'_>>,
    lender: Option<&dyn Lender>,
) -> Result<Decision, ScheduleError> {
    let resolved = policy.param_table().resolve(&request.params)?;
    let host_count = inventory.host_count();
    if u32::try_from(host_count).is_err() {
        return Err(ScheduleError::TooManyHosts { host_count });
    }

    // One mark per host, so that checking candidates and filter answers is
    // a lookup, not a search.
    let mut marks = vec![Mark::NotCandidate; host_count];
    let mut survivors: Vec<u32> = match &request.candidates {
        None => (0..host_count as u32).collect(),
        Some(given) => {
            for &host in given {
                match marks.get_mut(host as usize) {
                    None => return Err(ScheduleError::CandidateOutOfRange { host, host_count }),
                    Some(Mark::Survivor) => return Err(ScheduleError::DuplicateCandidate { host }),
                    Some(mark) => *mark = Mark::Survivor,
                }
            }
            given.clone()
        }
    };
    if request.candidates.is_none() {
        marks.fill(Mark::Survivor);
    }

    let mut explain = Explain {
        combination: policy.combination(),
        candidates: survivors.len(),
        filters: Vec::with_capacity(policy.filters().len()),
        scored: Vec::new(),
        scores: Vec::new(),
        totals: Vec::new(),
        outcome: Outcome::NoHost,
        considered: None,
        hardware: None,
        inventory: SnapshotRef(Arc::clone(inventory)),
    };
    let mut call = Request {
        vm: request.vm.clone(),
        params: Vec::new(),
        hints: request.hints.clone(),
    };
    // The VM as the reuse cache compares requests, made once.
    let shape = reuse.as_ref().map(|_| reuse::shape_of(&request.vm));

    for (index, step) in policy.filters().iter().enumerate() {
        if survivors.is_empty() {
            break;
        }
        let unit = &step.unit;
        call.params = resolved.for_slot(policy.filter_slot(index)).to_vec();
        if let Some(reason) = skip_reason(skips, unit.info(), &call) {
            explain.filters.push(FilterRecord {
                unit: unit.info().name.clone(),
                position: step.position,
                on_failure: step.on_failure,
                input: survivors.len(),
                rejected: Vec::new(),
                survivors: survivors.len(),
                usage: Usage::default(),
                failure: None,
                skipped: Some(reason),
                reused: 0,
            });
            continue;
        }
        let asking = FilterCall {
            unit,
            inventory,
            call: &call,
            cores: lender,
        };
        let answer = match (&mut reuse, &shape) {
            (Some(reuse), Some(shape)) if unit.info().per_host => {
                let answers = reuse
                    .cache
                    .filter(unit, reuse.view, shape, &call, host_count);
                filter_reusing(&asking, &survivors, &mut marks, answers, reuse.stamps)
            }
            _ => filter_whole(&asking, &survivors, &mut marks),
        };
        let input = survivors.len();
        match answer {
            Ok(Filtered {
                mut rejected,
                usage,
                reused,
                ..
            }) => {
                survivors.retain(|&h| {
                    let mark = &mut marks[h as usize];
                    if *mark == Mark::Rejecting {
                        *mark = Mark::Rejected;
                    }
                    *mark == Mark::Survivor
                });
                rejected.retain(|r| !r.hosts.is_empty());
                explain.filters.push(FilterRecord {
                    unit: unit.info().name.clone(),
                    position: step.position,
                    on_failure: step.on_failure,
                    input,
                    rejected,
                    survivors: survivors.len(),
                    usage,
                    failure: None,
                    skipped: None,
                    reused,
                });
            }
            Err(failed) if failed.error.is_overload() => {
                let unit = unit.info().name.clone();
                degraded::observe_failed(&unit, Role::Filter, &failed);
                return Err(ScheduleError::Overloaded { unit, failed });
            }
            Err(failed) => match step.on_failure {
                OnFailure::FailClosed => {
                    degraded::observe_failed(&unit.info().name, Role::Filter, &failed);
                    return Err(ScheduleError::FilterFailed {
                        unit: unit.info().name.clone(),
                        failed,
                    });
                }
                OnFailure::FailOpen => {
                    let failure = FailureRecord::from(&failed);
                    explain.filters.push(FilterRecord {
                        unit: unit.info().name.clone(),
                        position: step.position,
                        on_failure: step.on_failure,
                        input,
                        rejected: Vec::new(),
                        survivors: input,
                        usage: failed.usage,
                        failure: Some(failure),
                        skipped: None,
                        reused: 0,
                    });
                }
            },
        }
    }

    match survivors.as_slice() {
        [] => {
            explain.outcome = Outcome::NoHost;
            return Ok(Decision {
                chosen: None,
                ranked: Vec::new(),
                explain,
            });
        }
        &[only] => {
            explain.outcome = Outcome::SingleSurvivor { host: only };
            return Ok(Decision {
                chosen: Some(only),
                ranked: vec![Ranked {
                    host: only,
                    total: 0.0,
                }],
                explain,
            });
        }
        _ => {}
    }

    let n = survivors.len();
    let mut totals = vec![0.0; n];
    let mut buffers = combine::SortBuffers::take();
    // What each weight comes to before any is called: its parameters, or
    // why it is not called. Those called over every survivor may then be
    // called side by side (`parallel`); they combine in policy order.
    let mut plans: Vec<ScorePlan> = Vec::with_capacity(policy.scores().len());
    for (index, step) in policy.scores().iter().enumerate() {
        if step.factor == 0 {
            plans.push(ScorePlan::Unweighted);
            continue;
        }
        call.params = resolved.for_slot(policy.score_slot(index)).to_vec();
        plans.push(match skip_reason(skips, step.unit.info(), &call) {
            Some(reason) => ScorePlan::Skipped(reason),
            None => ScorePlan::Call(std::mem::take(&mut call.params)),
        });
    }
    let reusing = |unit: &Arc<dyn Unit>| reuse.is_some() && unit.info().per_host;
    let mut early = match lender {
        Some(lender) => call_side_by_side(
            policy, inventory, &call, &plans, &survivors, lender, reusing,
        ),
        None => Vec::new(),
    };
    for (index, step) in policy.scores().iter().enumerate() {
        let unit = &step.unit;
        let info = unit.info();
        let mut record = ScoreRecord {
            unit: info.name.clone(),
            factor: step.factor,
            score_order: info.score_order,
            called: false,
            usage: None,
            failure: None,
            floor: None,
            ceiling: None,
            raw: Vec::new(),
            standing: Standing::None,
            skipped: None,
            reused: 0,
        };
        call.params = match std::mem::replace(&mut plans[index], ScorePlan::Unweighted) {
            ScorePlan::Unweighted => {
                explain.scores.push(record);
                continue;
            }
            // A skipped score is the answer it promised, one value for all,
            // which stands every candidate alike: all ranked first, or all
            // normalised to 0 (an empty range gives no points).
            ScorePlan::Skipped(reason) => {
                record.skipped = Some(reason);
                record.standing = match policy.combination() {
                    Combination::Rank => {
                        let mut ranks = vec![0; n];
                        combine::rank_all_first(step.factor, &mut ranks, &mut totals);
                        Standing::Ranks(ranks)
                    }
                    Combination::Normalised => Standing::Normalised(vec![0.0; n]),
                };
                explain.scores.push(record);
                continue;
            }
            ScorePlan::Call(params) => params,
        };
        record.called = true;
        let answer = match (&mut reuse, &shape) {
            (Some(reuse), Some(shape)) if info.per_host => {
                let answers = reuse
                    .cache
                    .score(unit, reuse.view, shape, &call, host_count);
                score_reusing(unit, inventory, &call, &survivors, answers, reuse.stamps).map(
                    |(called, reused)| {
                        record.reused = reused;
                        called
                    },
                )
            }
            _ => match early.get_mut(index).and_then(Option::take) {
                Some(answer) => answer,
                None => unit.score(inventory, &call, &survivors),
            },
        };
        let answer = answer.and_then(|called| {
            combine::check_scores(&called.value, n).map_err(|reason| Failed {
                error: UnitError::InvalidOutput(reason),
                usage: called.usage,
            })?;
            Ok(called)
        });
        match answer {
            Err(failed) if failed.error.is_overload() => {
                let unit = info.name.clone();
                degraded::observe_failed(&unit, Role::Score, &failed);
                return Err(ScheduleError::Overloaded { unit, failed });
            }
            Err(failed) if step.on_failure == OnFailure::FailClosed => {
                let unit = info.name.clone();
                degraded::observe_failed(&unit, Role::Score, &failed);
                return Err(ScheduleError::ScoreFailed { unit, failed });
            }
            Err(failed) => {
                let failure = FailureRecord::from(&failed);
                record.usage = Some(failed.usage);
                record.failure = Some(failure);
            }
            Ok(called) => {
                let scores = called.value;
                record.standing = match policy.combination() {
                    Combination::Rank => {
                        let mut ranks = vec![0; n];
                        combine::rank(
                            &scores.values,
                            info.score_order,
                            step.factor,
                            &mut buffers,
                            &mut ranks,
                            &mut totals,
                        );
                        Standing::Ranks(ranks)
                    }
                    Combination::Normalised => {
                        let mut shares = vec![0.0; n];
                        combine::normalise(
                            &scores,
                            info.score_order,
                            step.factor,
                            &mut shares,
                            &mut totals,
                        );
                        Standing::Normalised(shares)
                    }
                };
                record.usage = Some(called.usage);
                record.floor = scores.floor;
                record.ceiling = scores.ceiling;
                record.raw = scores.values;
            }
        }
        explain.scores.push(record);
    }

    // Best first, equal totals in candidate order (the sort is stable).
    buffers.clear();
    buffers.extend(totals.iter().map(|&t| !combine::ascending_key(t)));
    buffers.sort();
    let mut ranked: Vec<Ranked> = Vec::with_capacity(n);
    buffers.for_each_sorted(|i| {
        ranked.push(Ranked {
            host: survivors[i as usize],
            total: totals[i as usize],
        })
    });
    buffers.give_back();
    let winner = ranked[0];
    let tied_with = ranked[1..]
        .iter()
        .take_while(|r| r.total == winner.total)
        .map(|r| r.host)
        .collect();
    explain.outcome = Outcome::Weighed {
        winner: winner.host,
        tied_with,
    };
    explain.scored = survivors;
    explain.totals = totals;
    Ok(Decision {
        chosen: Some(winner.host),
        ranked,
        explain,
    })
}

/// A filter's answer as the decision uses it.
struct Filtered {
    /// Rejected hosts grouped by reason, templates and figures as the unit
    /// gave them: sentences are written only when a reader asks
    /// (`FilterRecord::sentences`), most decisions never do.
    rejected: Vec<Rejection>,
    usage: Usage,
    read: ColumnsRead,
    /// Candidates whose verdict was reused, not asked for.
    reused: usize,
}

/// One filter as this decision asks it: the unit, the snapshot, the
/// request, and the cores the decision may borrow.
struct FilterCall<'a> {
    unit: &'a Arc<dyn Unit>,
    inventory: &'a Arc<Inventory>,
    call: &'a Request,
    cores: Option<&'a dyn Lender>,
}

/// Asks the filter about every candidate and marks the hosts it rejects.
fn filter_whole(
    asking: &FilterCall<'_>,
    survivors: &[u32],
    marks: &mut [Mark],
) -> Result<Filtered, Failed> {
    let called = call_filter(asking, survivors)?;
    check_rejections(&called.value, survivors, marks).map_err(|reason| Failed {
        error: UnitError::InvalidOutput(reason),
        usage: called.usage,
    })?;
    Ok(Filtered {
        rejected: called.value,
        usage: called.usage,
        read: called.read,
        reused: 0,
    })
}

/// Asks the filter about `candidates`: in one call, or, for a per-host
/// filter over many candidates when cores are lent, in one call per chunk
/// on several cores, joined into the answer one call gives (`parallel`).
/// The usage is the chunks' fuel and the time the decision waited.
fn call_filter(asking: &FilterCall<'_>, candidates: &[u32]) -> CallResult<Vec<Rejection>> {
    let FilterCall {
        unit,
        inventory,
        call,
        cores,
    } = *asking;
    let Some(lender) = cores.filter(|_| unit.info().per_host) else {
        return unit.filter(inventory, call, candidates);
    };
    let crew = parallel::worth_splitting(unit, candidates.len(), lender.worth())
        .then(|| parallel::Crew::gather(lender, usize::MAX))
        .flatten();
    let Some(crew) = crew else {
        let called = unit.filter(inventory, call, candidates);
        if let Ok(called) = &called {
            parallel::note_cost(unit, candidates.len(), called.usage.elapsed);
        }
        return called;
    };
    let started = Instant::now();
    let parts = parallel::split(candidates, crew.threads());
    let answers = crew.run(parts.len(), |i| unit.filter(inventory, call, parts[i]));
    let mut fuel = Some(0u64);
    let mut read = ColumnsRead::NONE;
    let mut rejections = Vec::with_capacity(answers.len());
    for answer in answers {
        let called = answer?;
        fuel = fuel
            .zip(called.usage.fuel)
            .map(|(a, b)| a.saturating_add(b));
        read = read.union(called.read);
        rejections.push(called.value);
    }
    Ok(Called {
        value: parallel::join_rejections(rejections),
        usage: Usage {
            fuel,
            elapsed: started.elapsed(),
        },
        read,
    })
}

/// What a weight comes to before any weight is called.
enum ScorePlan {
    /// Factor 0: not called, no say.
    Unweighted,
    /// Not called: the request has nothing it applies to.
    Skipped(String),
    /// Called with these parameters.
    Call(Vec<KeyValue>),
}

/// Calls side by side on lent cores, when the survivors are many, every
/// planned weight that is asked about all survivors (not one whose kept
/// answers are reused: `reusing`), each with `call` and its parameters;
/// their answers by policy position. Empty when nothing was called early.
fn call_side_by_side(
    policy: &Policy,
    inventory: &Arc<Inventory>,
    call: &Request,
    plans: &[ScorePlan],
    survivors: &[u32],
    lender: &dyn Lender,
    reusing: impl Fn(&Arc<dyn Unit>) -> bool,
) -> Vec<Option<CallResult<Scores>>> {
    if survivors.len() < parallel::MIN_SIDE_BY_SIDE_SURVIVORS {
        return Vec::new();
    }
    let calls: Vec<(usize, &[KeyValue])> = plans
        .iter()
        .enumerate()
        .filter_map(|(index, plan)| match plan {
            ScorePlan::Call(params) if !reusing(&policy.scores()[index].unit) => {
                Some((index, params.as_slice()))
            }
            _ => None,
        })
        .collect();
    if calls.len() < 2 {
        return Vec::new();
    }
    let Some(crew) = parallel::Crew::gather(lender, calls.len() - 1) else {
        return Vec::new();
    };
    // Each call its own request: they run at once.
    let requests: Vec<Request> = calls
        .iter()
        .map(|(_, params)| Request {
            vm: call.vm.clone(),
            params: params.to_vec(),
            hints: call.hints.clone(),
        })
        .collect();
    let answers = crew.run(calls.len(), |i| {
        policy.scores()[calls[i].0]
            .unit
            .score(inventory, &requests[i], survivors)
    });
    let mut early: Vec<Option<CallResult<Scores>>> = (0..plans.len()).map(|_| None).collect();
    for ((index, _), answer) in calls.iter().zip(answers) {
        early[*index] = Some(answer);
    }
    early
}

/// Asks a per-host filter only about the candidates with no kept verdict
/// for their stamp, keeps its fresh verdicts, and marks every rejected
/// host, fresh or kept. When something was reused, the rejections are
/// grouped by template in candidate order.
fn filter_reusing(
    asking: &FilterCall<'_>,
    survivors: &[u32],
    marks: &mut [Mark],
    answers: &mut FilterAnswers,
    stamps: Stamps<'_>,
) -> Result<Filtered, Failed> {
    answers.trim();
    // Each candidate's kept verdict, or `ASKED`, looked up once: a kept
    // answer and its stamp are tens of bytes a host, and walking them
    // twice cost more than walking this.
    const ASKED: u32 = PASSES - 1;
    let mut ask: Vec<u32> = Vec::new();
    let verdicts: Vec<u32> = survivors
        .iter()
        .map(|&h| {
            answers.verdict(h, &stamps).unwrap_or_else(|| {
                ask.push(h);
                ASKED
            })
        })
        .collect();
    let reused = survivors.len() - ask.len();
    let mut usage = Usage::default();
    let mut read = ColumnsRead::NONE;
    // The fresh rejections, by host.
    let mut fresh_rejections: Vec<(u32, u32)> = Vec::new();
    if !ask.is_empty() {
        let fresh = filter_whole(asking, &ask, marks)?;
        for &h in &ask {
            answers.put(h, stamps.keep(h, fresh.read), None);
        }
        for group in &fresh.rejected {
            // The figures were checked: as many per host as placeholders.
            let per_host = group.figures.len() / group.hosts.len().max(1);
            let template = answers.template_index(&group.reason, per_host);
            for (i, &h) in group.hosts.iter().enumerate() {
                let figures = &group.figures[i * per_host..(i + 1) * per_host];
                let rejection = answers.keep_rejection(template, figures);
                answers.reject(h, rejection);
                if reused > 0 {
                    fresh_rejections.push((h, rejection));
                }
            }
        }
        if reused == 0 {
            // Nothing reused: the answer as the unit gave it.
            return Ok(fresh);
        }
        usage = fresh.usage;
        read = fresh.read;
        fresh_rejections.sort_unstable();
    }
    // Every verdict, fresh or kept, in candidate order, one group per
    // template (by its index, so no text is hashed per host), each host's
    // figures after the last.
    let mut rejected: Vec<Rejection> = Vec::new();
    let mut group_of = vec![usize::MAX; answers.template_count()];
    for (&h, &verdict) in survivors.iter().zip(&verdicts) {
        let verdict = match verdict {
            ASKED => match fresh_rejections.binary_search_by_key(&h, |&(host, _)| host) {
                Ok(at) => fresh_rejections[at].1,
                Err(_) => PASSES,
            },
            kept => kept,
        };
        if verdict == PASSES {
            continue;
        }
        marks[h as usize] = Mark::Rejecting;
        let (template, figures) = answers.rejection(verdict);
        let at = &mut group_of[template as usize];
        if *at == usize::MAX {
            rejected.push(Rejection::new(answers.template(template), Vec::new()));
            *at = rejected.len() - 1;
        }
        let group = &mut rejected[*at];
        group.hosts.push(h);
        group.figures.extend_from_slice(figures);
    }
    Ok(Filtered {
        rejected,
        usage,
        read,
        reused,
    })
}

/// Asks a per-host score only about the candidates with no kept value for
/// their stamp and keeps its fresh values; returns every candidate's value
/// and how many were reused. If the unit's floor or ceiling differ from
/// the kept values' (a broken promise), it is asked about every candidate.
fn score_reusing(
    unit: &Arc<dyn Unit>,
    inventory: &Arc<Inventory>,
    call: &Request,
    survivors: &[u32],
    answers: &mut ScoreAnswers,
    stamps: Stamps<'_>,
) -> Result<(Called<Scores>, usize), Failed> {
    let n = survivors.len();
    let mut values = vec![0.0; n];
    let mut ask_at = Vec::new();
    for (i, &h) in survivors.iter().enumerate() {
        match answers.get(h, &stamps) {
            Some(value) => values[i] = value,
            None => ask_at.push(i),
        }
    }
    if ask_at.is_empty() {
        let (floor, ceiling) = answers.bounds().unwrap_or_default();
        let value = Scores {
            values,
            floor,
            ceiling,
        };
        return Ok((
            Called {
                value,
                usage: Usage::default(),
                read: ColumnsRead::NONE,
            },
            n,
        ));
    }
    let ask: Vec<u32> = ask_at.iter().map(|&i| survivors[i]).collect();
    let called = checked_score(unit, inventory, call, &ask)?;
    let bounds = (called.value.floor, called.value.ceiling);
    if ask.len() < n
        && answers
            .bounds()
            .is_some_and(|kept| !reuse::same_bounds(kept, bounds))
    {
        // Keeping these answers forgets the ones kept with other bounds.
        let called = checked_score(unit, inventory, call, survivors)?;
        let bounds = (called.value.floor, called.value.ceiling);
        let fresh = survivors.iter().zip(&called.value.values);
        let read = called.read;
        answers.put(fresh.map(|(&h, &v)| (h, stamps.keep(h, read), v)), bounds);
        return Ok((called, 0));
    }
    let fresh = ask.iter().zip(&called.value.values);
    let read = called.read;
    answers.put(fresh.map(|(&h, &v)| (h, stamps.keep(h, read), v)), bounds);
    for (&i, &v) in ask_at.iter().zip(&called.value.values) {
        values[i] = v;
    }
    let value = Scores {
        values,
        floor: bounds.0,
        ceiling: bounds.1,
    };
    Ok((
        Called {
            value,
            usage: called.usage,
            read: called.read,
        },
        n - ask.len(),
    ))
}

/// A score call whose answer was checked (one finite value per candidate),
/// so that only checked values are kept.
fn checked_score(
    unit: &Arc<dyn Unit>,
    inventory: &Arc<Inventory>,
    call: &Request,
    candidates: &[u32],
) -> CallResult<Scores> {
    let called = unit.score(inventory, call, candidates)?;
    combine::check_scores(&called.value, candidates.len()).map_err(|reason| Failed {
        error: UnitError::InvalidOutput(reason),
        usage: called.usage,
    })?;
    Ok(called)
}

/// Checks a filter's answer against the current survivors and marks the
/// hosts it rejects `Rejecting`. On error every mark is restored, so that a
/// skipped (fail-open) filter leaves the survivors as they were.
fn check_rejections(
    rejections: &[Rejection],
    survivors: &[u32],
    marks: &mut [Mark],
) -> Result<(), String> {
    let mut outcome = Ok(());
    'groups: for group in rejections {
        if let Err(reason) = reason::check(&group.reason, group.hosts.len(), group.figures.len()) {
            outcome = Err(reason);
            break 'groups;
        }
        for &host in &group.hosts {
            match marks.get(host as usize) {
                Some(Mark::Survivor) => marks[host as usize] = Mark::Rejecting,
                Some(Mark::Rejecting) => {
                    outcome = Err(format!("host {host} is rejected twice"));
                    break 'groups;
                }
                _ => {
                    outcome = Err(format!("host {host} is not a candidate"));
                    break 'groups;
                }
            }
        }
    }
    if outcome.is_err() {
        for &host in survivors {
            marks[host as usize] = Mark::Survivor;
        }
    }
    outcome
}
