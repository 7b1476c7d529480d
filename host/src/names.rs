//! The one policy for every name and id Sandpiper accepts: names of units,
//! policies, clusters and tokens (chosen by people, shown in lists and
//! explain records) and ids of hosts, VMs and instances (chosen by the
//! engine, echoed back in answers and claims).
//!
//! **Check, never rewrite.** A name or id is stored and echoed exactly as
//! sent, or refused; nothing is trimmed, folded or normalised on the way
//! in. An engine matches our answers against its own ids byte for byte,
//! and a person looking a name up must find what they typed, so a silent
//! rewrite would be a second, hidden spelling.
//!
//! The rules, for names and ids alike:
//!
//! * **Unicode NFC.** Text must already be in Normalisation Form C (what
//!   every mainstream keyboard and language runtime produces). Two
//!   canonically equivalent spellings (`é` as one code point or as `e` plus
//!   a combining accent) look identical everywhere and would otherwise be
//!   two different names; refusing the decomposed one keeps one spelling
//!   per visible name. Checked with `unicode-normalization`, already in the
//!   dependency tree.
//! * **No invisible or layout-changing characters:** every control
//!   character (C0, DEL, C1; NUL included), every format character
//!   (Unicode category Cf: zero-width space and joiners, the soft hyphen,
//!   the byte-order mark, the bidirectional embeddings and overrides
//!   U+202A–U+202E and isolates U+2066–U+2069, tag characters, ...) and the
//!   line and paragraph separators U+2028/U+2029. These let two names that
//!   render the same differ, or make a name render as something else in
//!   a log or a console (the "Trojan Source" trick).
//! * **No leading or trailing white space**, and not empty: `"cpu "` and
//!   `"cpu"` must not be two units.
//! * **Bounded length:** [`MAX_NAME_CHARS`] for names, [`MAX_ID_BYTES`] for
//!   ids, so one request cannot turn a 10 MB id into a 30 MB decision row.
//!
//! Names of units, policies and clusters are also **unique regardless of
//! case**: `CPU` and `cpu` cannot both exist (409 `name_taken`). The
//! comparison is SQLite's `NOCASE`, which folds ASCII letters only, so that
//! the database enforces exactly what the code checks (migration
//! `0004_names_nocase.sql`) and a plain `sqlite3` shell reads the same
//! index; non-ASCII letters compare exactly (after the NFC rule above). Ids
//! stay case-sensitive: they are the engine's, and Nova and oVirt ids are
//! compared exactly there too.

/// Longest name of a unit, policy, cluster or token, in characters: names
/// are labels shown in lists and explain records, not documents, and 200
/// holds any descriptive name (the longest built-in is under 40).
pub const MAX_NAME_CHARS: usize = 200;

/// Longest host, VM or instance id, in bytes. Engines use UUIDs (36 bytes)
/// or host names (at most 253 bytes in DNS); 256 fits both, and bounds what
/// one id costs in memory, explain records and the decisions log.
pub const MAX_ID_BYTES: usize = 256;

/// Why a name or id was refused. The caller adds the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error("must not start or end with white space")]
    SurroundingSpace,
    #[error("must not contain the control or format character U+{:04X} (at character {at})", u32::from(*.found))]
    Forbidden { found: char, at: usize },
    #[error("must be at most {limit} characters")]
    TooManyChars { limit: usize },
    #[error("must be at most {limit} bytes")]
    TooManyBytes { limit: usize },
    #[error("must be in Unicode normalisation form C (NFC)")]
    NotNfc,
}

/// Checks a name of a unit, policy, cluster or token.
pub fn check_name(name: &str) -> Result<(), NameError> {
    check_text(name)?;
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(NameError::TooManyChars {
            limit: MAX_NAME_CHARS,
        });
    }
    Ok(())
}

/// Checks an id of a host, VM or instance.
pub fn check_id(id: &str) -> Result<(), NameError> {
    // The byte cap first, so a huge id is refused before it is scanned.
    if id.len() > MAX_ID_BYTES {
        return Err(NameError::TooManyBytes {
            limit: MAX_ID_BYTES,
        });
    }
    check_text(id)
}

/// The rules names and ids share.
fn check_text(text: &str) -> Result<(), NameError> {
    if text.is_empty() {
        return Err(NameError::Empty);
    }
    if text.trim() != text {
        return Err(NameError::SurroundingSpace);
    }
    if text.is_ascii() {
        // Most ids: one byte a character, already NFC, and only the
        // controls forbidden. Tens of thousands are checked per body.
        return match text.bytes().position(|b| b.is_ascii_control()) {
            Some(at) => Err(NameError::Forbidden {
                found: char::from(text.as_bytes()[at]),
                at,
            }),
            None => Ok(()),
        };
    }
    if let Some((at, found)) = text.chars().enumerate().find(|&(_, c)| forbidden(c)) {
        return Err(NameError::Forbidden { found, at });
    }
    if !unicode_normalization::is_nfc(text) {
        return Err(NameError::NotNfc);
    }
    Ok(())
}

/// Control characters (Cc), format characters (Cf) and the line and
/// paragraph separators (Zl, Zp).
pub fn forbidden(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    FORBIDDEN
        .iter()
        .any(|&(first, last)| (first..=last).contains(&c))
}

/// Every character [`forbidden`] refuses, as inclusive ranges: the
/// controls (C0, DEL, C1), the line and paragraph separators, and Unicode
/// general category Cf (Unicode 16), listed here rather than pulled from a
/// property crate: the set is small and changes rarely, and the
/// security-relevant members (bidi controls, zero-width characters, the
/// BOM) have been in it since Unicode 3. [`name_pattern`] is built from
/// the same table.
const FORBIDDEN: &[(char, char)] = &[
    ('\u{0000}', '\u{001F}'),
    ('\u{007F}', '\u{009F}'),
    ('\u{2028}', '\u{2029}'),
    ('\u{00AD}', '\u{00AD}'),
    ('\u{0600}', '\u{0605}'),
    ('\u{061C}', '\u{061C}'),
    ('\u{06DD}', '\u{06DD}'),
    ('\u{070F}', '\u{070F}'),
    ('\u{0890}', '\u{0891}'),
    ('\u{08E2}', '\u{08E2}'),
    ('\u{180E}', '\u{180E}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{202A}', '\u{202E}'),
    ('\u{2060}', '\u{2064}'),
    ('\u{2066}', '\u{206F}'),
    ('\u{FEFF}', '\u{FEFF}'),
    ('\u{FFF9}', '\u{FFFB}'),
    ('\u{110BD}', '\u{110BD}'),
    ('\u{110CD}', '\u{110CD}'),
    ('\u{13430}', '\u{1343F}'),
    ('\u{1BCA0}', '\u{1BCA3}'),
    ('\u{1D173}', '\u{1D17A}'),
    ('\u{E0001}', '\u{E0001}'),
    ('\u{E0020}', '\u{E007F}'),
];

/// The rules of [`check_name`] but NFC as a regular expression, for the
/// OpenAPI document (JSON Schema's `pattern`, read by ECMA-262 and
/// Python's `re` alike): not empty, no white space at either end, no
/// forbidden character. NFC cannot be said by a pattern; the schema's
/// description says it.
pub fn name_pattern() -> String {
    // `\uXXXX` inside the BMP; astral characters as themselves, which
    // both dialects read as one code point.
    let one = |c: char| match u32::from(c) {
        n @ 0..=0xFFFF => format!("\\u{n:04X}"),
        _ => c.to_string(),
    };
    let class: String = FORBIDDEN
        .iter()
        .map(|&(first, last)| {
            if first == last {
                one(first)
            } else {
                format!("{}-{}", one(first), one(last))
            }
        })
        .collect();
    format!("^[^\\s{class}]([^{class}]*[^\\s{class}])?$")
}

/// The schema of a name of a unit, policy, cluster, pool or token: the
/// rules [`check_name`] applies, from the same constants.
pub fn name_schema() -> utoipa::openapi::schema::Object {
    text_schema(MAX_NAME_CHARS)
}

/// [`name_schema`], or `null` (an update that leaves the name alone).
pub fn optional_name_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{SchemaType, Type};
    let mut schema = name_schema();
    schema.schema_type = SchemaType::from_iter([Type::String, Type::Null]);
    schema
}

/// The schema of a host, VM, worker or instance id: [`check_id`]'s rules.
/// JSON Schema counts characters, not bytes: an id of many multi-byte
/// characters can be refused below `maxLength`, as the description says.
pub fn id_schema() -> utoipa::openapi::schema::Object {
    let mut schema = text_schema(MAX_ID_BYTES);
    schema.description = Some(
        "An id: not empty, no white space at either end, no control or format character, \
         in Unicode NFC, at most 256 bytes in UTF-8."
            .to_owned(),
    );
    schema
}

/// [`id_schema`], or empty (a VM to place that has no id yet).
pub fn optional_id_schema() -> utoipa::openapi::schema::Object {
    let mut schema = id_schema();
    schema.min_length = None;
    schema.pattern = Some(format!("^$|{}", name_pattern()));
    schema
}

/// A string under the name rules of at most `max_chars` characters.
pub fn text_schema(max_chars: usize) -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .min_length(Some(1))
        .max_length(Some(max_chars))
        .pattern(Some(name_pattern()))
        .description(Some(
            "Not empty, no white space at either end, no control or format character, \
             in Unicode NFC.",
        ))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_and_ids_pass() {
        for ok in [
            "cpu",
            "Even distribution",
            "Größe",
            "名前",
            "a-b_c.d:e",
            "h 1",
        ] {
            assert_eq!(check_name(ok), Ok(()), "{ok:?}");
            assert_eq!(check_id(ok), Ok(()), "{ok:?}");
        }
        assert_eq!(check_id("6f1f6a4e-6d7b-4f4e-9d55-2a8a1f7d9c10"), Ok(()));
    }

    #[test]
    fn invisible_and_layout_characters_are_refused() {
        for (text, found) in [
            ("a\0b", '\0'),
            ("a\u{7}b", '\u{7}'),
            ("a\u{7F}b", '\u{7F}'),
            ("a\u{85}b", '\u{85}'),
            ("ab\u{202E}c", '\u{202E}'),
            ("ab\u{2066}c", '\u{2066}'),
            ("ab\u{2069}c", '\u{2069}'),
            ("a\u{200B}b", '\u{200B}'),
            ("a\u{200D}b", '\u{200D}'),
            ("a\u{FEFF}b", '\u{FEFF}'),
            ("a\u{AD}b", '\u{AD}'),
            ("a\u{2028}b", '\u{2028}'),
            ("a\u{E0041}b", '\u{E0041}'),
        ] {
            assert!(
                matches!(check_name(text), Err(NameError::Forbidden { found: f, .. }) if f == found),
                "{text:?}"
            );
            assert!(
                matches!(check_id(text), Err(NameError::Forbidden { found: f, .. }) if f == found),
                "{text:?}"
            );
        }
    }

    #[test]
    fn empty_padded_long_and_decomposed_text_is_refused() {
        assert_eq!(check_name(""), Err(NameError::Empty));
        assert_eq!(check_id(""), Err(NameError::Empty));
        assert_eq!(check_name(" cpu"), Err(NameError::SurroundingSpace));
        assert_eq!(check_id("h1\u{A0}"), Err(NameError::SurroundingSpace));
        assert_eq!(check_name("   "), Err(NameError::SurroundingSpace));
        let long = "é".repeat(MAX_NAME_CHARS);
        assert_eq!(check_name(&long), Ok(()));
        assert_eq!(
            check_name(&format!("{long}x")),
            Err(NameError::TooManyChars {
                limit: MAX_NAME_CHARS
            })
        );
        assert_eq!(check_id(&"x".repeat(MAX_ID_BYTES)), Ok(()));
        assert_eq!(
            check_id(&"x".repeat(MAX_ID_BYTES + 1)),
            Err(NameError::TooManyBytes {
                limit: MAX_ID_BYTES
            })
        );
        // `e` + COMBINING ACUTE ACCENT renders as `é` (U+00E9).
        assert_eq!(check_name("cafe\u{301}"), Err(NameError::NotNfc));
        assert_eq!(check_id("cafe\u{301}"), Err(NameError::NotNfc));
        assert_eq!(check_name("caf\u{E9}"), Ok(()));
    }

    #[test]
    fn the_name_pattern_says_what_check_name_checks() {
        let pattern = regex::Regex::new(&name_pattern()).expect("a valid pattern");
        let mut sample: Vec<char> = (0..=0x3000u32).filter_map(char::from_u32).collect();
        sample.extend((0xF000..=0x10FFFFu32).step_by(7).filter_map(char::from_u32));
        sample.extend(FORBIDDEN.iter().flat_map(|&(a, b)| [a, b]));
        for c in sample {
            for text in [
                format!("a{c}b"),
                format!("{c}b"),
                format!("a{c}"),
                c.to_string(),
            ] {
                if !unicode_normalization::is_nfc(&text) {
                    continue;
                }
                assert_eq!(
                    pattern.is_match(&text),
                    check_text(&text).is_ok(),
                    "U+{:04X} in {text:?}",
                    u32::from(c)
                );
            }
        }
    }
}
