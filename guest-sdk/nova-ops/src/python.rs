//! Python's rules for the few things Nova's scheduler does with strings:
//! splitting on whitespace (`str.split()`), stripping (`str.strip()`),
//! parsing numbers (`float()`, `int()`) and printing values (`str()`,
//! `repr()`).
//!
//! Nova's filters compare host data as Python strings and numbers, so a
//! unit that wants to answer exactly as Nova does has to parse and print
//! exactly as Python does: `float(" 1_000 ")` is `1000.0`, `int("1.5")` is
//! an error, `str(1.0)` is `"1.0"` and `str(['aes', 'mmx'])` is
//! `"['aes', 'mmx']"` (which is what the extra-spec `<in>` operator searches).

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value;

/// Python's `str.isspace()` for one character: Unicode white space plus the
/// four ASCII information separators (`\x1c`–`\x1f`), which Python counts as
/// white space and Rust does not.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// `text.split()`: the words between runs of white space.
pub fn split(text: &str) -> impl Iterator<Item = &str> {
    text.split(is_space).filter(|word| !word.is_empty())
}

/// `text.strip()`.
pub fn strip(text: &str) -> &str {
    text.trim_matches(is_space)
}

/// Removes the underscores Python allows in a number literal (one at a
/// time, between two digits); `None` when an underscore is anywhere else.
fn without_underscores(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let before = i.checked_sub(1).map(|j| bytes[j]);
            let after = bytes.get(i + 1).copied();
            if !(before.is_some_and(|c| c.is_ascii_digit())
                && after.is_some_and(|c| c.is_ascii_digit()))
            {
                return None;
            }
        } else {
            out.push(char::from(b));
        }
    }
    Some(out)
}

/// Python's `float(text)`: surrounding white space ignored, underscores
/// between digits allowed, `inf`/`infinity`/`nan` in any case, with a sign.
/// `None` where Python raises `ValueError`.
///
/// Python also accepts non-ASCII decimal digits (`float("١")`); we do not.
pub fn float(text: &str) -> Option<f64> {
    let text = strip(text);
    if !text.is_ascii() || text.is_empty() {
        return None;
    }
    if text.contains('_') {
        without_underscores(text)?.parse().ok()
    } else {
        text.parse().ok()
    }
}

/// Python's `int(text)` (base 10): surrounding white space ignored, a sign,
/// ASCII digits with single underscores between them. `None` where Python
/// raises `ValueError` (`"1.5"`, `"1e3"`, `""`). Returned as `f64` because
/// units compare it with `f64` columns; integers above 2^53 lose precision.
pub fn int(text: &str) -> Option<f64> {
    let text = strip(text);
    let digits = text
        .strip_prefix('-')
        .or_else(|| text.strip_prefix('+'))
        .unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        return None;
    }
    let plain = without_underscores(text)?;
    plain.parse::<f64>().ok()
}

/// Python's `repr(x)` (and `str(x)`) of a float: the shortest digits that
/// read back as `x`, in positional notation with at least one decimal
/// (`1.0`, `0.0001`) when the decimal exponent is from -4 to 15, else in
/// scientific notation with a signed, at least two-digit exponent
/// (`1e+16`, `1.5e-05`).
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits Python uses,
    // as `d[.ddd]e<exp>`.
    let sci = format!("{x:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exponent) {
        let point = exponent + 1;
        let text = if point <= 0 {
            format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            let (whole, fraction) = digits.split_at(point as usize);
            format!("{whole}.{fraction}")
        };
        format!("{sign}{text}")
    } else {
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exponent.unsigned_abs())
    }
}

/// `str(x)` of a number Nova holds as an `int` when it is whole (free RAM,
/// hypervisor version) and as a `float` otherwise.
pub fn number_str(x: f64) -> String {
    /// Largest magnitude at which every whole `f64` is an exact integer.
    const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;
    if x.fract() == 0.0 && x.abs() <= EXACT_INTEGER_LIMIT {
        format!("{}", x as i64)
    } else {
        float_repr(x)
    }
}

/// Python's `repr()` of a string: single quotes unless the text holds a
/// single quote and no double quote; backslash, the quote and control
/// characters escaped.
pub fn repr_str(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_repr_str(text, &mut out);
    out
}

/// [`repr_str`], written at the end of `out`.
fn write_repr_str(text: &str, out: &mut String) {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {
                let code = u32::from(c);
                // Writing to a `String` cannot fail.
                let _ = if code < 0x100 {
                    write!(out, "\\x{code:02x}")
                } else {
                    write!(out, "\\u{code:04x}")
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Python's `str()` of a value decoded by `json.loads`: a string is itself,
/// everything else is printed as Python prints lists, dicts, `True`,
/// `None` and numbers.
///
/// One difference: Python keeps a JSON object's key order, we print keys
/// sorted (serde_json's map is ordered by key).
pub fn str_of_json(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(text) => Cow::Borrowed(text),
        other => Cow::Owned(repr_of_json(other)),
    }
}

/// Python's `repr()` of a value decoded by `json.loads`.
pub fn repr_of_json(value: &Value) -> String {
    let mut out = String::new();
    write_repr_of_json(value, &mut out);
    out
}

/// [`repr_of_json`], written at the end of `out`: one buffer for a whole
/// list or dict, not a string per item (a `cpu_info`'s features are
/// printed once per distinct text and check).
fn write_repr_of_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(number) => {
            // Writing to a `String` cannot fail.
            let _ = if let Some(i) = number.as_i64() {
                write!(out, "{i}")
            } else if let Some(u) = number.as_u64() {
                write!(out, "{u}")
            } else {
                out.push_str(&float_repr(number.as_f64().unwrap_or(f64::NAN)));
                Ok(())
            };
        }
        Value::String(text) => write_repr_str(text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr_of_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, value)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr_str(key, out);
                out.push_str(": ");
                write_repr_of_json(value, out);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_parse_as_python_parses_them() {
        for (text, want) in [
            ("1", Some(1.0)),
            (" 12 ", Some(12.0)),
            ("1e3", Some(1000.0)),
            ("010", Some(10.0)),
            ("1_000.5", Some(1000.5)),
            (".5", Some(0.5)),
            ("5.", Some(5.0)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("\x1c7\x1f", Some(7.0)),
            ("1__0", None),
            ("_1", None),
            ("1_", None),
            ("1_.5", None),
            ("", None),
            ("abc", None),
            ("0x10", None),
            ("1,5", None),
        ] {
            assert_eq!(float(text), want, "float({text:?})");
        }
        assert!(float("nan").is_some_and(f64::is_nan));
    }

    #[test]
    fn ints_parse_as_python_parses_them() {
        for (text, want) in [
            ("8", Some(8.0)),
            (" -3 ", Some(-3.0)),
            ("+0_1", Some(1.0)),
            ("010", Some(10.0)),
            ("1.5", None),
            ("1e3", None),
            ("", None),
            ("-", None),
            ("1__0", None),
        ] {
            assert_eq!(int(text), want, "int({text:?})");
        }
    }

    #[test]
    fn floats_print_as_python_prints_them() {
        for (x, want) in [
            (1.0, "1.0"),
            (2.5, "2.5"),
            (0.1, "0.1"),
            (-0.0001, "-0.0001"),
            (0.00001234, "1.234e-05"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (-1.5e300, "-1.5e+300"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(float_repr(x), want);
        }
        assert_eq!(number_str(1024.0), "1024");
        assert_eq!(number_str(0.5), "0.5");
    }

    #[test]
    fn json_values_print_as_python_prints_them() {
        let value: Value = serde_json::from_str(
            r#"{"features": ["aes", "mmx"], "ok": true, "n": null, "x": 1.0, "q": "it's"}"#,
        )
        .unwrap();
        assert_eq!(
            str_of_json(&value),
            r#"{'features': ['aes', 'mmx'], 'n': None, 'ok': True, 'q': "it's", 'x': 1.0}"#
        );
        assert_eq!(str_of_json(&Value::String("Intel".into())), "Intel");
        let escaped: Value = serde_json::from_str(
            r#"["a\\b", "l\n\t\r", "\u0001", "\u0085", 18446744073709551615, -3, "x'y\"z"]"#,
        )
        .unwrap();
        assert_eq!(
            str_of_json(&escaped),
            r#"['a\\b', 'l\n\t\r', '\x01', '\x85', 18446744073709551615, -3, 'x\'y"z']"#
        );
    }

    #[test]
    fn split_and_strip_use_python_white_space() {
        assert_eq!(
            split(" s==\t 123\u{3000}456 ").collect::<Vec<_>>(),
            ["s==", "123", "456"]
        );
        assert_eq!(strip("\x1e x \n"), "x");
    }
}
