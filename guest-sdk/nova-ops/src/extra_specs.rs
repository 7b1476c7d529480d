//! Nova's flavor extra-spec operator grammar (`extra_specs_ops.match`),
//! byte for byte, quirks included.
//!
//! A requirement is split on white space; when its first word is an
//! operator the rest are operands, otherwise the *whole, unsplit*
//! requirement must equal the value:
//!
//! | requirement | holds when |
//! |---|---|
//! | `= N` | `float(value) >= N` (yes, `=` means at least) |
//! | `== N`, `!= N`, `>= N`, `<= N` | numeric comparison of `float(value)` with `N` |
//! | `s== S`, `s!= S`, `s< S`, `s<= S`, `s> S`, `s>= S` | string comparison, code point order |
//! | `<in> S` | `S` is a substring of the value |
//! | `<all-in> S1 S2 …` | every `Si` is a substring of the value |
//! | `<or> A <or> B …` | the value equals one of `A`, `B`, … |
//! | anything else | the value equals the requirement exactly |
//!
//! Quirks kept from Nova: there is no `>` or `<` (`"> 2"` is a literal);
//! only the first operand counts (`"s== 123 456"` compares with `123`); an
//! operator without an operand never holds; `<or>` does not check its
//! separators (`"<or> a b c"` accepts `a` and `c`, not `b`); `<in>` is a
//! plain substring test, so on a printed list `"<in> ,"` can hold.
//!
//! Where we deliberately differ: Nova raises `ValueError` when a numeric
//! operator meets a value or operand that is not a number, and `IndexError`
//! for a bare `<or>`, which aborts the whole request; here both are a
//! [`MatchError`], and the units fail the host with that reason instead.

use crate::python;

/// A numeric operator; both sides go through Python's `float()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumericOp {
    /// `=`: at least (`float(value) >= operand`).
    AtLeast,
    /// `==`.
    Equal,
    /// `!=`.
    NotEqual,
    /// `>=`.
    GreaterOrEqual,
    /// `<=`.
    LessOrEqual,
}

/// A string operator, comparing code points as Python does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextOp {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

/// A parsed requirement, ready to be matched against many values.
#[derive(Clone, Debug, PartialEq)]
pub enum Requirement<'a> {
    /// No operator: the value must equal the whole requirement.
    Literal(&'a str),
    /// A numeric operator and its first operand, if any.
    Numeric(NumericOp, Option<&'a str>),
    /// A string operator and its first operand, if any.
    Text(TextOp, Option<&'a str>),
    /// `<in>` and its first operand, if any.
    In(Option<&'a str>),
    /// `<all-in>` and all its operands.
    AllIn(Vec<&'a str>),
    /// `<or>` and the words after it, separators included, as Nova walks
    /// them.
    Or(Vec<&'a str>),
}

/// Why a requirement could not be checked (where Nova raises).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MatchError {
    /// A numeric operator met text that `float()` rejects.
    NotANumber { text: String },
    /// `<or>` with nothing after it.
    EmptyOr,
}

impl std::fmt::Display for MatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MatchError::NotANumber { text } => {
                write!(f, "{text:?} is not a number for a numeric operator")
            }
            MatchError::EmptyOr => f.write_str("`<or>` has no operand"),
        }
    }
}

impl std::error::Error for MatchError {}

impl<'a> Requirement<'a> {
    /// Parses `req` as Nova's `match` does before comparing.
    pub fn parse(req: &'a str) -> Self {
        let mut words = python::split(req);
        let Some(op) = words.next() else {
            return Requirement::Literal(req);
        };
        let numeric = |op| Requirement::Numeric(op, python::split(req).nth(1));
        let text = |op| Requirement::Text(op, python::split(req).nth(1));
        match op {
            "=" => numeric(NumericOp::AtLeast),
            "==" => numeric(NumericOp::Equal),
            "!=" => numeric(NumericOp::NotEqual),
            ">=" => numeric(NumericOp::GreaterOrEqual),
            "<=" => numeric(NumericOp::LessOrEqual),
            "s==" => text(TextOp::Equal),
            "s!=" => text(TextOp::NotEqual),
            "s<" => text(TextOp::Less),
            "s<=" => text(TextOp::LessOrEqual),
            "s>" => text(TextOp::Greater),
            "s>=" => text(TextOp::GreaterOrEqual),
            "<in>" => Requirement::In(words.next()),
            "<all-in>" => Requirement::AllIn(words.collect()),
            "<or>" => Requirement::Or(words.collect()),
            _ => Requirement::Literal(req),
        }
    }

    /// True when the requirement uses a numeric operator, so that a caller
    /// holding a number can skip printing it.
    pub fn is_numeric(&self) -> bool {
        matches!(self, Requirement::Numeric(..))
    }

    /// Whether `value` satisfies the requirement.
    pub fn matches(&self, value: &str) -> Result<bool, MatchError> {
        match self {
            Requirement::Literal(req) => Ok(value == *req),
            Requirement::Numeric(op, operand) => {
                let Some(operand) = operand else {
                    return Ok(false);
                };
                // Python evaluates `float(value)` first, then the operand.
                let value = parse_number(value)?;
                compare_numbers(*op, value, parse_number(operand)?)
            }
            Requirement::Text(op, operand) => Ok(operand.is_some_and(|operand| match op {
                TextOp::Equal => value == operand,
                TextOp::NotEqual => value != operand,
                TextOp::Less => value < operand,
                TextOp::LessOrEqual => value <= operand,
                TextOp::Greater => value > operand,
                TextOp::GreaterOrEqual => value >= operand,
            })),
            Requirement::In(operand) => Ok(operand.is_some_and(|operand| value.contains(operand))),
            Requirement::AllIn(operands) => {
                Ok(!operands.is_empty() && operands.iter().all(|operand| value.contains(operand)))
            }
            Requirement::Or(words) => {
                // Nova pops a candidate, compares, then pops one word as the
                // separator without looking at it.
                if words.is_empty() {
                    return Err(MatchError::EmptyOr);
                }
                Ok(words.iter().step_by(2).any(|word| *word == value))
            }
        }
    }

    /// Whether the number `value` satisfies the requirement, as
    /// `matches(str(value))` would; prints the number only for operators
    /// that compare text.
    pub fn matches_number(&self, value: f64) -> Result<bool, MatchError> {
        match self {
            Requirement::Numeric(op, Some(operand)) => {
                compare_numbers(*op, value, parse_number(operand)?)
            }
            _ => self.matches(&python::number_str(value)),
        }
    }
}

/// `float(text)`, or the error naming the text.
fn parse_number(text: &str) -> Result<f64, MatchError> {
    python::float(text).ok_or_else(|| MatchError::NotANumber {
        text: text.to_owned(),
    })
}

fn compare_numbers(op: NumericOp, value: f64, operand: f64) -> Result<bool, MatchError> {
    Ok(match op {
        NumericOp::AtLeast | NumericOp::GreaterOrEqual => value >= operand,
        NumericOp::Equal => value == operand,
        NumericOp::NotEqual => value != operand,
        NumericOp::LessOrEqual => value <= operand,
    })
}

/// Nova's `extra_specs_ops.match(value, req)` in one call.
pub fn matches(value: &str, req: &str) -> Result<bool, MatchError> {
    Requirement::parse(req).matches(value)
}
