//! oVirt's external scheduler protocol (the engine's
//! `ExternalSchedulerBrokerImpl`, which `ovirt-scheduler-proxy` served) as
//! a thin translation onto the one decision: the four XML-RPC methods are
//! read into typed calls ([`Method`]), the units a call names become an
//! ad-hoc policy of exactly those units with the call's properties as its
//! parameters, the hosts and the VM are taken from the held inventory of
//! the cluster the hosts belong to, and the decision
//! (`placement::pick_over`, or `PlacementService::balance_admitted`) is
//! read back as the protocol's answers ([`Reply`], [`discover`]). The
//! route is `api::ovirt`; docs/ovirt.md says how to connect the engine.
//!
//! Nothing is claimed: the engine runs its own units too and makes the
//! final choice, then reports the VM's host in the next inventory push.
//!
//! **Answer shape.** Every method but `discover` answers the proxy's
//! struct: `result_code` (0, or 1 when `plugin_errors` or `errors` has
//! something), `result`, and `plugin_errors` (unit name → messages) and
//! `errors` (messages) when not empty. The engine logs every message to
//! its audit log and still uses `result`.
//!
//! **When no decision can be made** (the hosts belong to no cluster,
//! a property value is refused, a unit fails closed), the answer is the
//! proxy's own for "all filters failed": `result_code` 1, the reason in
//! `errors`, and a `result` that decides nothing (every host sent, for
//! `runFilters`; no scores; no migration), so the engine goes on with its
//! own units rather than refusing to start the VM.

pub mod xmlrpc;

use std::collections::BTreeMap;

use dxr::Value;

use self::xmlrpc::{int, string};
use crate::pipeline::{Decision, ParamValues};
use crate::store::units::UnitRecord;

/// Which of its four methods the engine called, with its arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Method {
    Discover,
    RunFilters(Filters),
    RunCostFunctions(CostFunctions),
    RunLoadBalancing(Balance),
}

/// `runFilters(filters, hostIDs, vmID, properties)`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filters {
    pub filters: Vec<String>,
    pub hosts: Vec<String>,
    pub vm: String,
    pub properties: ParamValues,
}

/// `runCostFunctions([[name, factor], ...], hostIDs, vmID, properties)`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CostFunctions {
    pub functions: Vec<(String, u32)>,
    pub hosts: Vec<String>,
    pub vm: String,
    pub properties: ParamValues,
}

/// `runLoadBalancing(balance, hostIDs, properties)`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Balance {
    pub balance: String,
    pub hosts: Vec<String>,
    pub properties: ParamValues,
}

/// Why a well-formed XML-RPC call is not one of the four methods as the
/// engine calls them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MethodError {
    #[error(
        "no method `{0}`: this server answers discover, runFilters, runCostFunctions and \
         runLoadBalancing"
    )]
    Unknown(String),
    #[error("{method}: {message}")]
    Params {
        method: &'static str,
        message: String,
    },
}

impl MethodError {
    /// The fault code this error is answered with.
    pub fn code(&self) -> i32 {
        match self {
            MethodError::Unknown(_) => xmlrpc::code::METHOD_NOT_FOUND,
            MethodError::Params { .. } => xmlrpc::code::INVALID_PARAMS,
        }
    }
}

impl Method {
    /// Reads a call's method and parameters as the engine sends them.
    pub fn from_call(call: xmlrpc::Call) -> Result<Method, MethodError> {
        let xmlrpc::Call { method, params } = call;
        match method.as_str() {
            "discover" => {
                args::<0>("discover", params)?;
                Ok(Method::Discover)
            }
            "runFilters" => {
                let m = "runFilters";
                let [filters, hosts, vm, properties] = args(m, params)?;
                Ok(Method::RunFilters(Filters {
                    filters: strings(m, "filters", filters)?,
                    hosts: strings(m, "hostIDs", hosts)?,
                    vm: text(m, "vmID", vm)?,
                    properties: properties_of(m, properties)?,
                }))
            }
            "runCostFunctions" => {
                let m = "runCostFunctions";
                let [functions, hosts, vm, properties] = args(m, params)?;
                Ok(Method::RunCostFunctions(CostFunctions {
                    functions: factors(m, functions)?,
                    hosts: strings(m, "hostIDs", hosts)?,
                    vm: text(m, "vmID", vm)?,
                    properties: properties_of(m, properties)?,
                }))
            }
            "runLoadBalancing" => {
                let m = "runLoadBalancing";
                let [balance, hosts, properties] = args(m, params)?;
                Ok(Method::RunLoadBalancing(Balance {
                    balance: text(m, "balance", balance)?,
                    hosts: strings(m, "hostIDs", hosts)?,
                    properties: properties_of(m, properties)?,
                }))
            }
            _ => Err(MethodError::Unknown(method)),
        }
    }
}

/// Exactly `N` parameters.
fn args<const N: usize>(
    method: &'static str,
    params: Vec<Value>,
) -> Result<[Value; N], MethodError> {
    let given = params.len();
    params.try_into().map_err(|_| MethodError::Params {
        method,
        message: format!("takes {N} parameters, got {given}"),
    })
}

fn wrong(method: &'static str, what: &str, expected: &str) -> MethodError {
    MethodError::Params {
        method,
        message: format!("`{what}` must be {expected}"),
    }
}

fn text(method: &'static str, what: &str, value: Value) -> Result<String, MethodError> {
    match value {
        Value::String(s) => Ok(s),
        _ => Err(wrong(method, what, "a string")),
    }
}

fn strings(method: &'static str, what: &str, value: Value) -> Result<Vec<String>, MethodError> {
    let Value::Array(items) = value else {
        return Err(wrong(method, what, "an array of strings"));
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::String(s) => Ok(s),
            _ => Err(wrong(method, what, "an array of strings")),
        })
        .collect()
}

/// `[[name, factor], ...]`: the engine's `Pair<String, Integer>`s, each
/// written as a two-element array; factors are oVirt's, integers ≥ 0.
fn factors(method: &'static str, value: Value) -> Result<Vec<(String, u32)>, MethodError> {
    const EXPECTED: &str = "an array of [name, factor] pairs, factor an integer >= 0";
    let Value::Array(items) = value else {
        return Err(wrong(method, "cost_functions", EXPECTED));
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::Array(pair) => match <[Value; 2]>::try_from(pair) {
                Ok([Value::String(name), Value::Integer(factor)]) => u32::try_from(factor)
                    .map(|f| (name, f))
                    .map_err(|_| wrong(method, "cost_functions", EXPECTED)),
                _ => Err(wrong(method, "cost_functions", EXPECTED)),
            },
            _ => Err(wrong(method, "cost_functions", EXPECTED)),
        })
        .collect()
}

/// The cluster policy's properties: a struct of strings (the engine's
/// `Map<String, String>`). An empty string is taken as no properties, as
/// the proxy's own test client sends them.
fn properties_of(method: &'static str, value: Value) -> Result<ParamValues, MethodError> {
    const EXPECTED: &str = "a struct of string values";
    match value {
        Value::Struct(members) => members
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k, s)),
                _ => Err(wrong(method, "properties", EXPECTED)),
            })
            .collect(),
        Value::String(s) if s.is_empty() => Ok(ParamValues::new()),
        _ => Err(wrong(method, "properties", EXPECTED)),
    }
}

/// The answer to `runFilters`, `runCostFunctions` and `runLoadBalancing`:
/// the proxy's struct (see the module's doc).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reply {
    pub result: Vec<Value>,
    /// Messages per unit named in the call: unknown, disabled, or not of
    /// the role asked.
    pub plugin_errors: BTreeMap<String, Vec<String>>,
    /// Messages about the call itself: unknown host or VM ids, why no
    /// decision could be made.
    pub errors: Vec<String>,
}

/// `result_code` with nothing to report.
pub const RESULT_OK: i32 = 0;
/// `result_code` with something in `plugin_errors` or `errors`.
pub const RESULT_ERROR: i32 = 1;

impl Reply {
    /// Names in `plugin_errors` every unit that failed open in `decision`
    /// (left out of it rather than refusing the call), so the engine's
    /// audit log says why a filter kept every host or a weight counted
    /// for nothing.
    pub fn note_unit_failures(&mut self, decision: &Decision) {
        let explain = &decision.explain;
        let failed = explain
            .filters
            .iter()
            .filter_map(|f| Some((&f.unit, f.failure.as_ref()?)))
            .chain(
                explain
                    .scores
                    .iter()
                    .filter_map(|s| Some((&s.unit, s.failure.as_ref()?))),
            );
        for (unit, failure) in failed {
            self.plugin_errors
                .entry(unit.clone())
                .or_default()
                .push(format!("{} ({})", failure.message, failure.code));
        }
    }

    /// The struct the engine reads.
    pub fn into_value(self) -> Value {
        let failed = !self.plugin_errors.is_empty() || !self.errors.is_empty();
        let mut members = BTreeMap::new();
        members.insert(
            "result_code".to_owned(),
            int(if failed { RESULT_ERROR } else { RESULT_OK }),
        );
        members.insert("result".to_owned(), Value::Array(self.result));
        if !self.plugin_errors.is_empty() {
            let units = self
                .plugin_errors
                .into_iter()
                .map(|(unit, messages)| {
                    (
                        unit,
                        Value::Array(messages.into_iter().map(string).collect()),
                    )
                })
                .collect();
            members.insert("plugin_errors".to_owned(), Value::Struct(units));
        }
        if !self.errors.is_empty() {
            members.insert(
                "errors".to_owned(),
                Value::Array(self.errors.into_iter().map(string).collect()),
            );
        }
        Value::Struct(members)
    }

    /// Records a message about unit `unit`.
    pub fn plugin_error(&mut self, unit: &str, message: impl Into<String>) {
        self.plugin_errors
            .entry(unit.to_owned())
            .or_default()
            .push(message.into());
    }
}

/// The `result` of a `runLoadBalancing` that proposes nothing: the
/// proxy's `['', []]`, which the engine reads as "no VM to migrate".
pub fn no_migration() -> Vec<Value> {
    vec![string(""), Value::Array(Vec::new())]
}

/// The answer to `discover`: every enabled unit under each role it
/// exports, `{"filters": {name: [description, properties]}, "scores":
/// ..., "balance": ...}`, `properties` in the engine's custom-properties
/// syntax (`key=regex;key2=regex2`, [`properties_regex`]).
pub fn discover(units: &[UnitRecord]) -> Value {
    let mut filters = BTreeMap::new();
    let mut scores = BTreeMap::new();
    let mut balance = BTreeMap::new();
    for unit in units.iter().filter(|u| u.enabled) {
        let entry = Value::Array(vec![
            string(unit.description.clone()),
            string(properties_regex(unit)),
        ]);
        for (exported, map) in [
            (unit.exports.filter, &mut filters),
            (unit.exports.score, &mut scores),
            (unit.exports.balance, &mut balance),
        ] {
            if exported {
                map.insert(unit.name.clone(), entry.clone());
            }
        }
    }
    Value::Struct(BTreeMap::from([
        ("filters".to_owned(), Value::Struct(filters)),
        ("scores".to_owned(), Value::Struct(scores)),
        ("balance".to_owned(), Value::Struct(balance)),
    ]))
}

/// A unit's parameters as the engine's custom-properties string,
/// `key=regex;key2=regex2`. The engine refuses a whole unit whose string
/// breaks its syntax (keys of `[a-zA-Z0-9_]`, regexes without `;`), so a
/// parameter that cannot be written so is left out: the engine then
/// offers no value for it and the unit uses its default.
pub fn properties_regex(unit: &UnitRecord) -> String {
    unit.params
        .iter()
        .filter(|p| {
            !p.name.is_empty()
                && p.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !p.pattern.contains(';')
        })
        .map(|p| format!("{}={}", p.name, p.pattern))
        .collect::<Vec<_>>()
        .join(";")
}

/// The hosts `decision` kept, in the order `asked`: `runFilters`'s
/// `result`.
pub fn passed(decision: &Decision, asked: &[String]) -> Vec<Value> {
    let kept: std::collections::HashSet<String> = decision
        .ranked
        .iter()
        .map(|r| decision.explain.host_id(r.host))
        .collect();
    asked
        .iter()
        .filter(|id| kept.contains(*id))
        .map(|id| string(id.clone()))
        .collect()
}

/// `runCostFunctions`'s `result`: `[hostID, cost]` for every host the
/// decision ranked, in the order `asked`. The cost is the host's place in
/// the policy's ranking as an oVirt weight (lower is better): 0 for the
/// best total, one more for each worse distinct total, equal totals
/// alike. The engine ranks an external result again before weighing it,
/// so the order is all that counts, and it is kept exactly.
pub fn costs(decision: &Decision, asked: &[String]) -> Vec<Value> {
    let mut by_host = std::collections::HashMap::new();
    let mut rank = 0i32;
    for (i, r) in decision.ranked.iter().enumerate() {
        if i > 0 && decision.ranked[i - 1].total != r.total {
            rank += 1;
        }
        by_host.insert(decision.explain.host_id(r.host), rank);
    }
    asked
        .iter()
        .filter_map(|id| {
            by_host
                .get(id)
                .map(|&cost| Value::Array(vec![string(id.clone()), int(cost)]))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(method: &str, params: Vec<Value>) -> xmlrpc::Call {
        xmlrpc::Call {
            method: method.to_owned(),
            params,
        }
    }

    fn strs(items: &[&str]) -> Value {
        Value::Array(items.iter().map(|s| string(*s)).collect())
    }

    #[test]
    fn the_four_methods_are_read_as_the_engine_sends_them() {
        assert_eq!(
            Method::from_call(call("discover", vec![])),
            Ok(Method::Discover)
        );
        let props = Value::Struct(BTreeMap::from([(
            "HighUtilization".to_owned(),
            string("80"),
        )]));
        let filters = Method::from_call(call(
            "runFilters",
            vec![
                strs(&["Memory"]),
                strs(&["h1", "h2"]),
                string("vm"),
                props.clone(),
            ],
        ))
        .expect("runFilters");
        let Method::RunFilters(f) = filters else {
            panic!("not runFilters")
        };
        assert_eq!(f.filters, ["Memory"]);
        assert_eq!(f.properties["HighUtilization"], "80");
        let pair = Value::Array(vec![string("OptimalForEvenGuestDistribution"), int(2)]);
        let Ok(Method::RunCostFunctions(c)) = Method::from_call(call(
            "runCostFunctions",
            vec![
                Value::Array(vec![pair]),
                strs(&["h1"]),
                string("vm"),
                string(""),
            ],
        )) else {
            panic!("runCostFunctions")
        };
        assert_eq!(
            c.functions,
            [("OptimalForEvenGuestDistribution".to_owned(), 2)]
        );
        assert!(c.properties.is_empty());
        let Ok(Method::RunLoadBalancing(b)) = Method::from_call(call(
            "runLoadBalancing",
            vec![string("OptimalForEvenDistribution"), strs(&["h1"]), props],
        )) else {
            panic!("runLoadBalancing")
        };
        assert_eq!(b.balance, "OptimalForEvenDistribution");
    }

    #[test]
    fn wrong_calls_say_what_is_wrong() {
        assert_eq!(
            Method::from_call(call("runFilter", vec![])),
            Err(MethodError::Unknown("runFilter".to_owned()))
        );
        let e = Method::from_call(call("runFilters", vec![strs(&["a"])])).expect_err("arity");
        assert_eq!(e.to_string(), "runFilters: takes 4 parameters, got 1");
        let e = Method::from_call(call(
            "runCostFunctions",
            vec![
                Value::Array(vec![Value::Array(vec![string("x"), int(-1)])]),
                strs(&[]),
                string("vm"),
                string(""),
            ],
        ))
        .expect_err("negative factor");
        assert!(e.to_string().contains("factor an integer >= 0"), "{e}");
        assert_eq!(e.code(), xmlrpc::code::INVALID_PARAMS);
    }

    #[test]
    fn a_reply_has_the_proxys_shape() {
        let ok = Reply {
            result: vec![string("h1")],
            ..Reply::default()
        }
        .into_value();
        let Value::Struct(members) = ok else {
            panic!("{ok:?}")
        };
        assert_eq!(members["result_code"], int(0));
        assert!(!members.contains_key("errors") && !members.contains_key("plugin_errors"));
        let mut failed = Reply::default();
        failed.plugin_error("Nope", "plugin not found: 'Nope'");
        let Value::Struct(members) = failed.into_value() else {
            panic!()
        };
        assert_eq!(members["result_code"], int(1));
        assert!(members.contains_key("plugin_errors"));
    }
}
