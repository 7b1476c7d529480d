//! What Nova's built-in units share, written once: the flavor extra-spec
//! operator grammar ([`extra_specs`]), per-aggregate overrides of
//! configuration values ([`aggregates`]), the names Nova's filters use for a
//! host's state ([`host_state`]), scheduler hints ([`hints`]), the metrics
//! weight setting ([`weight_setting`]), and the Python rules all of these
//! inherit: how Python splits, parses numbers and prints values
//! ([`python`]).
//!
//! Behaviour is read from Nova's source (`nova/scheduler/filters/*.py`,
//! `nova/scheduler/utils.py`; our reference notes, `nova-scheduler.md`
//! §1–§2). Where Nova raises an exception in the middle of a request (a
//! non-numeric value under a numeric operator, say), these helpers return a
//! typed error instead, and the units fail the host or the request with a
//! reason: a unit must never trap on data.

pub mod aggregates;
pub mod capacity;
pub mod counts;
pub mod extra_specs;
pub mod hints;
pub mod host_state;
pub mod instances;
pub mod params;
pub mod python;
pub mod weighers;
pub mod weight_setting;
