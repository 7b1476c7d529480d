//! `JsonFilter`: rejects hosts that fail the request's JSON query.
//!
//! Behaviour from Nova's `nova/scheduler/filters/json_filter.py` (reference
//! notes §2.3). The query arrives in the hint `query` as JSON text, a
//! prefix expression:
//!
//! ```text
//! query := [] | [OP, arg, ...]          OP: = < > <= >= in not or and
//! arg   := query | "$name.key..." | any other JSON value
//! ```
//!
//! * An empty (or absent, or empty-text) query passes every host; so does
//!   an empty list used as an argument (it is true).
//! * Arguments are evaluated first, all of them: lists as sub-queries,
//!   strings starting with `$` as host variables, other strings and values
//!   as themselves. Those that come out as nothing (an unknown variable,
//!   `null`, the empty string) are **dropped** from the argument list.
//! * `=`, `<`, `>`, `<=`, `>=` hold when the first argument compares so
//!   with **every** other one, and never with fewer than two arguments;
//!   `in` when the first equals one of the others; `or` and `and` on
//!   Python truthiness; `not` gives the **list** of its arguments'
//!   negations, and a list is true when it is not empty (so `["and",
//!   ["not", true]]` holds, as in Nova).
//! * The host passes when the result is true; a list result passes when
//!   any element is true.
//!
//! Comparisons follow Python 3: numbers (and booleans, as 0 and 1) with
//! numbers, strings with strings by code point, lists element by element;
//! `=` and `in` between other kinds are false.
//!
//! Variables read our columns through Nova's `HostState` names
//! (`sandpiper_nova_ops::host_state`: `$free_ram_mb`, `$free_disk_mb`,
//! `$vcpus_total`, `$num_instances`, `$host`, `$host_ip`, …),
//! `$service.disabled`, `$capabilities.KEY` and `$stats.KEY` (a host
//! capability), any other `$a.b` as a capability path (`$cpu_info.vendor`
//! walks the JSON `cpu_info`), and, our addition, `$metrics.NAME` (a named
//! metric; absent where the host does not report it).
//!
//! Where we differ from Nova, and why:
//! * Nova's `stats` values are strings; our capabilities are too, but a
//!   capability whose whole text is a JSON number or `true`/`false` is read
//!   as that number or boolean, so `[">=", "$stats.gpus", 2]` can work.
//! * Where Nova raises (an unknown operator, more than one `query` hint,
//!   text that is not JSON, a top-level value that is not a list), every
//!   host is rejected with the reason; where it raises on one host's data
//!   (ordering a string against a number), that host fails with the reason.
//!   Nova aborts the whole request in both cases. A variable path into a
//!   number or a text (`$free_ram_mb.x`) finds nothing, so its argument is
//!   dropped, where Nova raises `AttributeError`.
//! * A top-level JSON string is refused; Nova would iterate its characters.
//!
//! Cost: the query is parsed once per call; each host evaluates the tree.

use std::cmp::Ordering;
use std::rc::Rc;
use std::sync::Arc;

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::hints::Hint;
use sandpiper_nova_ops::host_state::{
    CapabilityPath, Found, NumericAttribute, Source, service_disabled,
};
use serde_json::{Map, Value};

/// Hint carrying the query, JSON text.
pub const QUERY_HINT: &str = "query";
/// First name of a `$metrics.NAME` variable.
const METRICS: &str = "metrics";

/// The `JsonFilter` filter.
pub struct JsonFilter;

impl Unit for JsonFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "JsonFilter",
            "Rejects hosts that fail the JSON query in the request's `query` hint, Nova's prefix \
             grammar over host variables such as $free_ram_mb (Nova's JsonFilter).",
        )
        .applies_to([RequestProperty::Hint(QUERY_HINT.to_owned())])
        .per_host()
    }
}

/// An operator of the grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Equal,
    Less,
    Greater,
    In,
    LessOrEqual,
    GreaterOrEqual,
    Not,
    Or,
    And,
}

impl Op {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "=" => Op::Equal,
            "<" => Op::Less,
            ">" => Op::Greater,
            "in" => Op::In,
            "<=" => Op::LessOrEqual,
            ">=" => Op::GreaterOrEqual,
            "not" => Op::Not,
            "or" => Op::Or,
            "and" => Op::And,
            _ => return None,
        })
    }
}

/// A parsed query: true (empty) or an operator applied to arguments.
#[derive(Debug)]
enum Expr<'q> {
    True,
    Apply(Op, Vec<Arg<'q>>),
}

/// An argument, before evaluation. `null` and `""` are already dropped.
#[derive(Debug)]
enum Arg<'q> {
    Expr(Expr<'q>),
    /// A variable: an index into the call's [`Variables`].
    Var(usize),
    Literal(&'q Value),
}

/// Why a query cannot be evaluated at all.
fn parse<'q>(value: &'q Value, variables: &mut Vec<Source>) -> Result<Expr<'q>, String> {
    let items = match value {
        Value::Array(items) => items,
        _ => return Err("a query must be a JSON list".to_owned()),
    };
    let Some((first, rest)) = items.split_first() else {
        return Ok(Expr::True);
    };
    let op = first
        .as_str()
        .and_then(Op::from_name)
        .ok_or_else(|| format!("unknown operator {first}"))?;
    let mut args = Vec::with_capacity(rest.len());
    for arg in rest {
        match arg {
            Value::Array(_) => args.push(Arg::Expr(parse(arg, variables)?)),
            Value::Null => {}
            Value::String(text) if text.is_empty() => {}
            Value::String(text) if text.starts_with('$') => {
                let path: Vec<&str> = text[1..].split('.').collect();
                variables.push(variable_source(&path));
                args.push(Arg::Var(variables.len() - 1));
            }
            other => args.push(Arg::Literal(other)),
        }
    }
    Ok(Expr::Apply(op, args))
}

/// Where `$a.b.c` reads from: `capabilities.` and `stats.` name a
/// capability; `metrics.` a named metric (kept as a capability path whose
/// first name is `metrics`, resolved specially); the rest as
/// `ComputeCapabilitiesFilter` looks paths up.
fn variable_source(path: &[&str]) -> Source {
    match path {
        ["capabilities" | "stats", rest @ ..] if !rest.is_empty() => {
            Source::Capability(rest.iter().map(|s| (*s).to_owned()).collect())
        }
        // Metric names may hold dots (`cpu.percent`): the rest is the name.
        ["metrics", rest @ ..] if !rest.is_empty() => {
            Source::Capability(vec![METRICS.to_owned(), rest.join(".")])
        }
        _ => Source::of(path),
    }
}

/// A value during evaluation, Python-typed.
#[derive(Clone, Debug)]
enum Val<'a> {
    Bool(bool),
    Num(f64),
    Str(&'a str),
    Json(&'a Value),
    Shared(Rc<Value>),
    /// The result of `not`.
    List(Vec<Val<'a>>),
}

/// A comparison Python refuses (`TypeError`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Incomparable(&'static str, &'static str);

/// A borrowed, uniform view of a value for comparisons.
#[derive(Clone, Debug)]
enum View<'x> {
    None,
    Num(f64),
    Str(&'x str),
    Seq(Vec<View<'x>>),
    Dict(&'x Map<String, Value>),
}

impl View<'_> {
    fn kind(&self) -> &'static str {
        match self {
            View::None => "NoneType",
            View::Num(_) => "number",
            View::Str(_) => "str",
            View::Seq(_) => "list",
            View::Dict(_) => "dict",
        }
    }
}

fn json_view(value: &Value) -> View<'_> {
    match value {
        Value::Null => View::None,
        Value::Bool(b) => View::Num(f64::from(u8::from(*b))),
        Value::Number(n) => View::Num(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => View::Str(s),
        Value::Array(items) => View::Seq(items.iter().map(json_view).collect()),
        Value::Object(map) => View::Dict(map),
    }
}

impl<'a> Val<'a> {
    fn view(&self) -> View<'_> {
        match self {
            Val::Bool(b) => View::Num(f64::from(u8::from(*b))),
            Val::Num(n) => View::Num(*n),
            Val::Str(s) => View::Str(s),
            Val::Json(v) => json_view(v),
            Val::Shared(v) => json_view(v),
            Val::List(items) => View::Seq(items.iter().map(Val::view).collect()),
        }
    }

    /// Python's truthiness.
    fn truthy(&self) -> bool {
        match self {
            Val::Bool(b) => *b,
            Val::Num(n) => *n != 0.0,
            Val::Str(s) => !s.is_empty(),
            Val::Json(v) => json_truthy(v),
            Val::Shared(v) => json_truthy(v),
            Val::List(items) => !items.is_empty(),
        }
    }
}

fn json_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// Python's `==`.
fn equal(a: &View<'_>, b: &View<'_>) -> bool {
    match (a, b) {
        (View::None, View::None) => true,
        (View::Num(x), View::Num(y)) => x == y,
        (View::Str(x), View::Str(y)) => x == y,
        (View::Seq(x), View::Seq(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (View::Dict(x), View::Dict(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.get(k)
                        .is_some_and(|w| equal(&json_view(v), &json_view(w)))
                })
        }
        _ => false,
    }
}

/// Python's ordering: `None` when unordered (NaN), an error when Python
/// raises `TypeError`.
fn order(a: &View<'_>, b: &View<'_>) -> Result<Option<Ordering>, Incomparable> {
    match (a, b) {
        (View::Num(x), View::Num(y)) => Ok(x.partial_cmp(y)),
        (View::Str(x), View::Str(y)) => Ok(Some(x.cmp(y))),
        (View::Seq(x), View::Seq(y)) => {
            for (a, b) in x.iter().zip(y) {
                if !equal(a, b) {
                    return order(a, b);
                }
            }
            Ok(Some(x.len().cmp(&y.len())))
        }
        _ => Err(Incomparable(a.kind(), b.kind())),
    }
}

/// What one host's evaluation needs: the columns variables read.
struct Variables<'a> {
    hosts: Hosts<'a>,
    sources: Vec<Source>,
    /// Per variable: its capability path, when it reads one.
    paths: Vec<Option<CapabilityPath<'a>>>,
    /// Per variable: its named metric column, when it reads one.
    metrics: Vec<Option<Arc<Vec<f64>>>>,
    /// Per variable: decoded capability values by string id.
    memo: Vec<Vec<Option<Option<Rc<Value>>>>>,
}

impl<'a> Variables<'a> {
    fn new(hosts: Hosts<'a>, sources: Vec<Source>) -> Self {
        let mut paths = Vec::with_capacity(sources.len());
        let mut metrics = Vec::with_capacity(sources.len());
        let mut memo = Vec::with_capacity(sources.len());
        for source in &sources {
            let (path, metric) = match source {
                Source::Capability(path) if path.len() == 2 && path[0] == METRICS => {
                    (None, Some(hosts.named_metric(&path[1])))
                }
                Source::Capability(path) => (Some(CapabilityPath::new(&hosts, path)), None),
                _ => (None, None),
            };
            let strings = if path.is_some() {
                hosts.labels(HostLabels::Capabilities).strings.len()
            } else {
                0
            };
            paths.push(path);
            metrics.push(metric);
            memo.push(vec![None; strings]);
        }
        Variables {
            hosts,
            sources,
            paths,
            metrics,
            memo,
        }
    }

    /// Variable `index` on host `row`; `None` when it finds nothing.
    fn value(&mut self, index: usize, host: u32) -> Option<Val<'a>> {
        let row = host as usize;
        match &self.sources[index] {
            Source::Numeric(attribute) => Some(Val::Num(NumericAttribute::value(
                *attribute,
                &self.hosts,
                row,
            ))),
            Source::Text(text) => Some(Val::Str(self.hosts.texts(*text).get(row))),
            Source::ServiceDisabled => Some(Val::Bool(service_disabled(&self.hosts, row))),
            Source::Nothing => None,
            Source::Capability(_) => {
                if let Some(column) = &self.metrics[index] {
                    return column
                        .get(row)
                        .copied()
                        .filter(|v| !v.is_nan())
                        .map(Val::Num);
                }
                let path = self.paths[index].as_ref()?;
                let (id, walked) = match path.find(host)? {
                    Found::Flat(id) => (id, false),
                    Found::Root(id) => (id, true),
                };
                let slot = self.memo[index].get_mut(id as usize)?;
                let value = slot.get_or_insert_with(|| {
                    if walked {
                        path.walk(id).map(Rc::new)
                    } else {
                        Some(Rc::new(scalar(path.text(id))))
                    }
                });
                value.clone().map(Val::Shared)
            }
        }
    }
}

/// A capability's text as a value: a JSON number or boolean when it is
/// exactly one, else the text.
fn scalar(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ (Value::Number(_) | Value::Bool(_))) => value,
        _ => Value::String(text.to_owned()),
    }
}

/// Evaluates `expr` on host `host`. Arguments are cooked onto `stack`, a
/// buffer reused for every node and host, so evaluating allocates nothing
/// but the lists `not` builds.
fn eval<'a>(
    expr: &'a Expr<'a>,
    variables: &mut Variables<'a>,
    host: u32,
    stack: &mut Vec<Val<'a>>,
) -> Result<Val<'a>, Incomparable> {
    let (op, args) = match expr {
        Expr::True => return Ok(Val::Bool(true)),
        Expr::Apply(op, args) => (*op, args),
    };
    let base = stack.len();
    for arg in args {
        match arg {
            Arg::Expr(sub) => {
                let value = eval(sub, variables, host, stack);
                match value {
                    Ok(value) => stack.push(value),
                    Err(error) => {
                        stack.truncate(base);
                        return Err(error);
                    }
                }
            }
            Arg::Var(index) => {
                if let Some(value) = variables.value(*index, host) {
                    stack.push(value);
                }
            }
            Arg::Literal(value) => stack.push(literal(value)),
        }
    }
    let result = apply(op, &stack[base..]);
    stack.truncate(base);
    result
}

fn literal(value: &Value) -> Val<'_> {
    match value {
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => Val::Num(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Val::Str(s),
        other => Val::Json(other),
    }
}

/// Nova's `_op_compare` and the logical operators.
fn apply<'a>(op: Op, args: &[Val<'a>]) -> Result<Val<'a>, Incomparable> {
    let compare = |holds: fn(Option<Ordering>) -> bool| -> Result<Val<'a>, Incomparable> {
        let Some((first, rest)) = args.split_first() else {
            return Ok(Val::Bool(false));
        };
        if rest.is_empty() {
            return Ok(Val::Bool(false));
        }
        let first = first.view();
        // Python builds the whole list of failures, so every comparison
        // runs and any TypeError surfaces.
        let mut all = true;
        for other in rest {
            all &= holds(order(&first, &other.view())?);
        }
        Ok(Val::Bool(all))
    };
    match op {
        Op::Equal => {
            let Some((first, rest)) = args.split_first() else {
                return Ok(Val::Bool(false));
            };
            let first = first.view();
            Ok(Val::Bool(
                !rest.is_empty() && rest.iter().all(|other| equal(&first, &other.view())),
            ))
        }
        Op::In => {
            let Some((first, rest)) = args.split_first() else {
                return Ok(Val::Bool(false));
            };
            let first = first.view();
            Ok(Val::Bool(
                !rest.is_empty() && rest.iter().any(|other| equal(&first, &other.view())),
            ))
        }
        Op::Less => compare(|o| o == Some(Ordering::Less)),
        Op::Greater => compare(|o| o == Some(Ordering::Greater)),
        Op::LessOrEqual => compare(|o| matches!(o, Some(Ordering::Less | Ordering::Equal))),
        Op::GreaterOrEqual => compare(|o| matches!(o, Some(Ordering::Greater | Ordering::Equal))),
        Op::Not => Ok(Val::List(
            args.iter().map(|arg| Val::Bool(!arg.truthy())).collect(),
        )),
        Op::Or => Ok(Val::Bool(args.iter().any(Val::truthy))),
        Op::And => Ok(Val::Bool(args.iter().all(Val::truthy))),
    }
}

/// Nova's final test: a list passes when any element is true.
fn passes(result: &Val<'_>) -> bool {
    match result {
        Val::List(items) => items.iter().any(Val::truthy),
        other => other.truthy(),
    }
}

impl Filter for JsonFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let text = match Hint::of(&cx.request().hints, QUERY_HINT) {
            Hint::Absent => return rejections.into_vec(),
            Hint::One(text) => text,
            Hint::Many(_) => {
                rejections.reject_all(candidates, "more than one `query` hint");
                return rejections.into_vec();
            }
        };
        if text.is_empty() {
            return rejections.into_vec();
        }
        let query: Value = match serde_json::from_str(text) {
            Ok(query) => query,
            Err(error) => {
                rejections.reject_all(candidates, format!("the query is not JSON: {error}"));
                return rejections.into_vec();
            }
        };
        // Nova's `if not query: return True`, for every falsy JSON value.
        if !json_truthy(&query) {
            return rejections.into_vec();
        }
        let mut sources = Vec::new();
        let expr = match parse(&query, &mut sources) {
            Ok(expr) => expr,
            Err(error) => {
                rejections.reject_all(candidates, format!("invalid query: {error}"));
                return rejections.into_vec();
            }
        };
        let mut variables = Variables::new(cx.hosts(), sources);
        let mut stack = Vec::new();
        for &host in candidates {
            match eval(&expr, &mut variables, host, &mut stack) {
                Ok(result) if passes(&result) => {}
                Ok(_) => {
                    rejections.reject(host, "does not satisfy the query");
                }
                Err(Incomparable(a, b)) => {
                    rejections.reject(
                        host,
                        format!("the query orders a {a} against a {b}, which Python refuses"),
                    );
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(JsonFilter: filter);
