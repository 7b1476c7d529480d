//! Kubernetes resource quantities (`4`, `3500m`, `16Gi`, `8192Mi`, `1e9`),
//! the strings a node's `allocatable` and a container's `requests` carry,
//! read as plain numbers in the resource's base unit (cores, bytes).
//!
//! The grammar is the one `k8s.io/apimachinery/pkg/api/resource`
//! documents for `Quantity`: a signed decimal number, then either a binary
//! suffix (`Ki` … `Ei`), a decimal suffix (`n`, `u`, `m`, ``, `k`, `M`,
//! `G`, `T`, `P`, `E`) or a decimal exponent (`e3`, `E-2`). An `E` or `e`
//! followed by a digit or a sign is an exponent; a lone `E` is exa.

/// A quantity that is not in Kubernetes' grammar, with the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not a Kubernetes quantity (expected e.g. 4, 3500m, 16Gi, 1e9)")]
pub struct BadQuantity(pub String);

/// The value of `text` in base units: `3500m` is 3.5, `16Gi` is
/// 17179869184.
pub fn parse(text: &str) -> Result<f64, BadQuantity> {
    let bad = || BadQuantity(text.to_owned());
    let s = text.trim();
    let digits_end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && (c == '+' || c == '-'))))
        .map_or(s.len(), |(i, _)| i);
    let (number, suffix) = s.split_at(digits_end);
    if !number.chars().any(|c| c.is_ascii_digit()) || number.matches('.').count() > 1 {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent if exponent.starts_with(['e', 'E']) => {
            let power: i32 = exponent[1..].parse().map_err(|_| bad())?;
            10f64.powi(power)
        }
        _ => return Err(bad()),
    };
    let result = value * factor;
    if result.is_finite() {
        Ok(result)
    } else {
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_kubernetes_writes_are_read_in_base_units() {
        for (text, value) in [
            ("4", 4.0),
            ("3500m", 3.5),
            ("250m", 0.25),
            ("0.5", 0.5),
            ("16Gi", 16.0 * 1024.0 * 1024.0 * 1024.0),
            ("8192Mi", 8192.0 * 1024.0 * 1024.0),
            ("128974848", 128_974_848.0),
            ("129e6", 129e6),
            ("1e9", 1e9),
            ("1E3", 1e3),
            ("123Mi", 123.0 * 1024.0 * 1024.0),
            ("1k", 1e3),
            ("1M", 1e6),
            ("2E", 2e18),
            ("+1", 1.0),
            ("32025468Ki", 32_025_468.0 * 1024.0),
        ] {
            assert_eq!(parse(text), Ok(value), "{text}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_its_text() {
        for text in [
            "", "Gi", "1.2.3", "1gi", "1 Gi", "1e", "abc", "1Ki2", "1e999",
        ] {
            assert_eq!(parse(text), Err(BadQuantity(text.to_owned())), "{text}");
        }
    }
}
