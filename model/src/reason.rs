//! Rejection reasons with figures (`types.rejection`, new in WIT 0.2.0): a
//! template such as `needs {} MiB, {} MiB free` and, per rejected host, as
//! many figures as it has placeholders. The one place that counts a
//! template's placeholders and writes its sentences, for the host and for
//! native runs alike.
//!
//! Why: a filter giving every rejected host its own sentence formatted
//! numbers and built a string per host inside the sandbox, and every string
//! crossed the boundary; with figures it sends one template and numbers,
//! and the host writes sentences natively.

use std::collections::HashMap;
use std::fmt::Write;

use crate::Rejection;

/// Where a template is malformed: a lone `{` or `}` (write `{{` and `}}`
/// for the braces themselves), or `{` followed by anything but `}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    /// Byte offset of the offending brace.
    pub at: usize,
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the reason has a lone brace at byte {} (a figure is `{{}}`, a brace is `{{{{` or `}}}}`)",
            self.at
        )
    }
}

impl std::error::Error for TemplateError {}

/// One piece of a parsed template.
enum Piece<'a> {
    Text(&'a str),
    Figure,
}

/// Calls `each` with the template's pieces in order.
fn parse<'a>(template: &'a str, mut each: impl FnMut(Piece<'a>)) -> Result<(), TemplateError> {
    let bytes = template.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'{', Some(b'}')) | (b'{', Some(b'{')) | (b'}', Some(b'}')) => {
                each(Piece::Text(&template[start..i]));
                if bytes[i] == b'{' && bytes[i + 1] == b'}' {
                    each(Piece::Figure);
                } else {
                    each(Piece::Text(&template[i..i + 1]));
                }
                i += 2;
                start = i;
            }
            (b'{' | b'}', _) => return Err(TemplateError { at: i }),
            _ => i += 1,
        }
    }
    each(Piece::Text(&template[start..]));
    Ok(())
}

/// How many figures one host's sentence takes.
pub fn placeholders(template: &str) -> Result<usize, TemplateError> {
    let mut count = 0;
    parse(template, |piece| {
        if let Piece::Figure = piece {
            count += 1;
        }
    })?;
    Ok(count)
}

/// Writes the sentence for one host: `template` with `figures` in its
/// placeholders, each as the shortest decimal that reads back as the same
/// number (`4096`, `0.5`). Missing figures are written as `?`; a malformed
/// template is written as it is.
pub fn render(template: &str, figures: &[f64]) -> String {
    let mut out = String::with_capacity(template.len() + 8 * figures.len());
    match pieces(template) {
        Ok(pieces) => render_into(&mut out, &pieces, figures),
        Err(_) => out.push_str(template),
    }
    out
}

/// A template's pieces, parsed once for all the hosts of its group.
fn pieces(template: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut pieces = Vec::new();
    parse(template, |piece| pieces.push(piece))?;
    Ok(pieces)
}

/// Appends one host's sentence to `out`.
fn render_into(out: &mut String, pieces: &[Piece<'_>], figures: &[f64]) {
    let mut next = figures.iter();
    for piece in pieces {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Figure => match next.next() {
                Some(&figure) => write_figure(out, figure),
                None => out.push('?'),
            },
        }
    }
}

/// Appends `figure` as `{}` writes an `f64`, whole numbers (most figures:
/// MiB, counts) through integer formatting, several times faster: the
/// host writes thousands of sentences a decision.
fn write_figure(out: &mut String, figure: f64) {
    // Every whole number below 2^53 is exact as an f64 and as an i64, and
    // `{}` writes such an f64 as its digits; `-0` keeps its sign.
    if figure.fract() == 0.0 && figure.abs() < 9_007_199_254_740_992.0 {
        if figure == 0.0 && figure.is_sign_negative() {
            out.push_str("-0");
        } else {
            let _ = write!(out, "{}", figure as i64);
        }
    } else {
        let _ = write!(out, "{figure}");
    }
}

/// Checks a rejection's figures against its template and host count: the
/// host's check of a unit's answer. With no figures the reason is a plain
/// sentence, braces and all, as in WIT 0.1.0.
pub fn check(template: &str, hosts: usize, figures: usize) -> Result<(), String> {
    if figures == 0 {
        return Ok(());
    }
    let per_host = placeholders(template).map_err(|e| e.to_string())?;
    let expected = per_host.saturating_mul(hosts);
    if figures != expected {
        return Err(format!(
            "the reason `{template}` takes {per_host} figures per host, so {expected} for \
             {hosts} hosts, but {figures} were given"
        ));
    }
    Ok(())
}

/// The hosts of one rejection group that share a sentence, found by their
/// figures without writing it. A decision keeps what a filter answered,
/// templates and figures, and only the sentences a reader shows are
/// written: a summary lists eight of thousands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sentence {
    /// The group, as an index into the rejections given to [`sentences`].
    pub group: usize,
    /// Where in that group the first of these hosts is: its figures are
    /// the sentence's.
    first: usize,
    /// The hosts, in the group's order.
    pub hosts: Vec<u32>,
}

impl Sentence {
    /// Writes the sentence; `rejections` are the ones it was found in.
    pub fn render(&self, rejections: &[Rejection]) -> String {
        let group = &rejections[self.group];
        if group.figures.is_empty() {
            return group.reason.clone();
        }
        let per_host = placeholders(&group.reason).unwrap_or(0);
        let figures = group
            .figures
            .get(self.first * per_host..(self.first + 1) * per_host)
            .unwrap_or(&[]);
        render(&group.reason, figures)
    }
}

/// A figure as the key of its sentence: its bits, every NaN as one (they
/// all write as `NaN`). Distinct keys write distinct sentences: a whole
/// figure is written as its integer, any other as the shortest decimal
/// that reads back as it, and `-0` keeps its sign.
fn figure_key(figure: f64) -> u64 {
    if figure.is_nan() {
        f64::NAN.to_bits()
    } else {
        figure.to_bits()
    }
}

/// Every rejected host grouped by sentence, without writing one: the
/// groups in order, each group's sentences in the order they first appear.
/// A group without figures is one sentence; a group whose template is
/// malformed is one sentence, the template as it is. The figures must have
/// been checked ([`check`]).
pub fn sentences(rejections: &[Rejection]) -> Vec<Sentence> {
    let mut out = Vec::with_capacity(rejections.len());
    for (group, rejection) in rejections.iter().enumerate() {
        let per_host = match placeholders(&rejection.reason) {
            Ok(n) if n > 0 && !rejection.figures.is_empty() => n,
            _ => {
                out.push(Sentence {
                    group,
                    first: 0,
                    hosts: rejection.hosts.clone(),
                });
                continue;
            }
        };
        let keys: Vec<u64> = rejection.figures.iter().map(|&f| figure_key(f)).collect();
        // Each distinct run of figures once, as the key; its hosts by the
        // order it first appeared.
        let mut by_figures: HashMap<&[u64], usize> = HashMap::new();
        let base = out.len();
        for (i, &host) in rejection.hosts.iter().enumerate() {
            let key = keys.get(i * per_host..(i + 1) * per_host).unwrap_or(&[]);
            let at = *by_figures.entry(key).or_insert_with(|| {
                out.push(Sentence {
                    group,
                    first: i,
                    hosts: Vec::new(),
                });
                out.len() - 1
            });
            out[at].hosts.push(host);
        }
        debug_assert!(out.len() > base || rejection.hosts.is_empty());
    }
    out
}

/// Writes out a filter's answer as plain sentences: each group with
/// figures becomes one group per distinct sentence, in the order the
/// sentences first appear; groups without figures are kept as they are.
/// The figures must have been checked ([`check`]).
pub fn into_sentences(rejections: Vec<Rejection>) -> Vec<Rejection> {
    if rejections.iter().all(|r| r.figures.is_empty()) {
        return rejections;
    }
    // Each template parsed once for all the sentences of its group.
    let parsed: Vec<Option<(Vec<Piece<'_>>, usize)>> = rejections
        .iter()
        .map(|r| {
            let pieces = pieces(&r.reason).ok().filter(|_| !r.figures.is_empty())?;
            let per_host = pieces
                .iter()
                .filter(|piece| matches!(piece, Piece::Figure))
                .count();
            Some((pieces, per_host))
        })
        .collect();
    sentences(&rejections)
        .into_iter()
        .map(|sentence| {
            let group = &rejections[sentence.group];
            let reason = match &parsed[sentence.group] {
                Some((pieces, per_host)) => {
                    let at = sentence.first * per_host;
                    let figures = group.figures.get(at..at + per_host).unwrap_or(&[]);
                    let mut out = String::with_capacity(group.reason.len() + 8 * per_host);
                    render_into(&mut out, pieces, figures);
                    out
                }
                None => group.reason.clone(),
            };
            Rejection::new(reason, sentence.hosts)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_become_one_group_per_sentence() {
        let answer = vec![
            Rejection::new("not up", vec![9]),
            Rejection {
                reason: "needs {} MiB, {} free".to_owned(),
                hosts: vec![1, 2, 3],
                figures: vec![8.0, 1.0, 8.0, 2.0, 8.0, 1.0],
            },
        ];
        assert_eq!(
            into_sentences(answer),
            [
                Rejection::new("not up", vec![9]),
                Rejection::new("needs 8 MiB, 1 free", vec![1, 3]),
                Rejection::new("needs 8 MiB, 2 free", vec![2]),
            ]
        );
    }

    #[test]
    fn grouping_by_figures_is_grouping_by_sentence() {
        // Figures that write alike or nearly so: NaNs with other payloads
        // and signs, both zeros, a whole number and its neighbours.
        let odd = [
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff8_0000_0000_0001),
            0.0,
            -0.0,
            4096.0,
            4_096.000_000_000_001,
            4_095.999_999_999_999,
            0.1 + 0.2,
            0.3,
            f64::INFINITY,
        ];
        let mut figures = Vec::new();
        let mut hosts = Vec::new();
        for (host, (a, b)) in odd
            .iter()
            .flat_map(|&a| odd.iter().map(move |&b| (a, b)))
            .chain(odd.iter().map(|&a| (a, 1.0)))
            .enumerate()
        {
            hosts.push(host as u32);
            figures.extend([a, b]);
        }
        let answer = vec![
            Rejection::new("not up", vec![1000, 1001]),
            Rejection {
                reason: "needs {} MiB, {} free".to_owned(),
                hosts: hosts.clone(),
                figures: figures.clone(),
            },
        ];
        // The reference: write every host's sentence and group the text.
        let mut expected: Vec<(String, Vec<u32>)> = vec![("not up".to_owned(), vec![1000, 1001])];
        for (i, &host) in hosts.iter().enumerate() {
            let sentence = render("needs {} MiB, {} free", &figures[2 * i..2 * i + 2]);
            match expected.iter_mut().find(|(s, _)| *s == sentence) {
                Some((_, hosts)) => hosts.push(host),
                None => expected.push((sentence, vec![host])),
            }
        }
        let found: Vec<(String, Vec<u32>)> = sentences(&answer)
            .iter()
            .map(|s| (s.render(&answer), s.hosts.clone()))
            .collect();
        assert_eq!(found, expected);
        let written: Vec<(String, Vec<u32>)> = into_sentences(answer)
            .into_iter()
            .map(|r| (r.reason, r.hosts))
            .collect();
        assert_eq!(written, expected);
    }

    #[test]
    fn a_figure_is_written_as_the_display_of_its_f64() {
        let figures = [
            0.0,
            -0.0,
            0.5,
            -17.0,
            4094.0,
            4094.5,
            1e15,
            123_456_789.0,
            9_007_199_254_740_991.0,
            -9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
        ];
        for x in figures {
            let mut out = String::new();
            write_figure(&mut out, x);
            assert_eq!(out, format!("{x}"), "{x}");
        }
    }

    #[test]
    fn templates_render_figures_in_order_and_escape_braces() {
        assert_eq!(placeholders("not up"), Ok(0));
        assert_eq!(placeholders("needs {} MiB, {} MiB free"), Ok(2));
        assert_eq!(
            render("needs {} MiB, {} MiB free", &[4096.0, 1024.5]),
            "needs 4096 MiB, 1024.5 MiB free"
        );
        assert_eq!(render("{{literal}} {}", &[1.0]), "{literal} 1");
        assert_eq!(render("a {} b {}", &[1.0]), "a 1 b ?");
        assert!(placeholders("lone { brace").is_err());
        assert!(placeholders("lone } brace").is_err());
        assert_eq!(render("lone { brace", &[]), "lone { brace");
        assert!(check("needs {}", 3, 3).is_ok());
        assert!(check("needs {}", 3, 2).is_err());
        assert!(check("not up", 3, 1).is_err());
        assert!(check("not up", 3, 0).is_ok());
        assert!(check("a {plain} sentence", 3, 0).is_ok());
        assert!(check("a {plain} sentence", 1, 1).is_err());
    }
}
