//! Wall-clock instants for claims and the decisions log: when a claim was
//! made and when it expires, how old a logged decision is. Claims survive
//! restarts, so their times are wall-clock
//! milliseconds since the Unix epoch rather than `std::time::Instant`, and
//! every operation takes "now" as an argument so that tests and the model
//! test drive time by hand.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (UTC).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The current wall-clock time. A clock before 1970 reads as the epoch.
    pub fn now() -> Self {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Timestamp(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
    }

    /// This instant plus `duration`, saturating.
    pub fn after(self, duration: Duration) -> Self {
        let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }

    /// Milliseconds from `earlier` to this instant, 0 when `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// RFC 3339 UTC with milliseconds (`2026-11-22T10:04:05.123Z`), the
    /// spelling the store uses for every time, so that times compare as text.
    pub fn to_rfc3339(self) -> String {
        let secs = self.0 / 1000;
        let millis = self.0 % 1000;
        let days = secs / 86_400;
        let rest = secs % 86_400;
        let (year, month, day) = civil_from_days(days);
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            rest / 3600,
            rest % 3600 / 60,
            rest % 60
        )
    }
}

impl Timestamp {
    /// Parses an RFC 3339 date-time (`2026-11-22T10:04:05Z`, or with an
    /// offset such as `+01:00`, with or without a fraction of a second,
    /// which is cut to milliseconds), as the instant it names in UTC: the
    /// OpenAPI document says `date-time`, and a client in another zone
    /// should not have to convert. An instant before 1970 is the epoch
    /// (a `Timestamp` starts there; as a bound of a search it means "from
    /// the beginning").
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        let (text, offset_secs) = split_offset(text)?;
        let (date, time) = text.split_once(['T', 't'])?;
        let mut date = date.splitn(3, '-');
        let year: u64 = number(date.next()?, 4)?;
        let month: u64 = number(date.next()?, 2)?;
        let day: u64 = number(date.next()?, 2)?;
        let (clock, fraction) = match time.split_once('.') {
            Some((clock, fraction)) => (clock, Some(fraction)),
            None => (time, None),
        };
        let mut clock = clock.splitn(3, ':');
        let hour: u64 = number(clock.next()?, 2)?;
        let minute: u64 = number(clock.next()?, 2)?;
        let second: u64 = number(clock.next()?, 2)?;
        let millis = match fraction {
            None => 0,
            Some(f) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => {
                let digits: String = f.chars().chain("00".chars()).take(3).collect();
                digits.parse().ok()?
            }
            Some(_) => return None,
        };
        if !(1..=12).contains(&month)
            || !(1..=days_in_month(year, month)).contains(&day)
            || hour > 23
            || minute > 59
            || second > 60
        {
            return None;
        }
        let days = days_from_civil(year as i64, month as i64, day as i64);
        let secs = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64 - offset_secs;
        Some(Timestamp(
            u64::try_from(secs).map_or(0, |secs| secs * 1000 + millis),
        ))
    }
}

/// The date-time without its offset, and the offset in seconds east of
/// UTC: `Z` (either case) or `+HH:MM`/`-HH:MM`.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    if let Some(rest) = text.strip_suffix(['Z', 'z']) {
        return Some((rest, 0));
    }
    let at = text.len().checked_sub(6)?;
    let (rest, offset) = (text.get(..at)?, text.get(at..)?);
    let sign = match offset.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (hours, minutes) = offset[1..].split_once(':')?;
    let (hours, minutes) = (number(hours, 2)?, number(minutes, 2)?);
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some((rest, sign * (hours * 3600 + minutes * 60) as i64))
}

/// A field of exactly `width` ASCII digits.
fn number(text: &str, width: usize) -> Option<u64> {
    (text.len() == width && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date on or after it
/// (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for non-negative days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_the_store_does() {
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp(1_795_342_445_123).to_rfc3339(),
            "2026-11-22T10:14:05.123Z"
        );
        assert_eq!(
            Timestamp(951_782_400_000).to_rfc3339(),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn parses_what_it_formats_and_refuses_the_rest() {
        for millis in [0, 951_782_400_000, 1_795_342_445_123, 4_102_444_799_999] {
            let text = Timestamp(millis).to_rfc3339();
            assert_eq!(
                Timestamp::parse_rfc3339(&text),
                Some(Timestamp(millis)),
                "{text}"
            );
        }
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-22T10:14:05Z"),
            Some(Timestamp(1_795_342_445_000))
        );
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-22T10:14:05.1234Z"),
            Some(Timestamp(1_795_342_445_123))
        );
        // Offsets name the same instant in UTC; before 1970 is the epoch.
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-22T11:14:05+01:00"),
            Some(Timestamp(1_795_342_445_000))
        );
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-22T04:56:05.5-05:18"),
            Some(Timestamp(1_795_342_445_500))
        );
        assert_eq!(
            Timestamp::parse_rfc3339("1160-12-17T10:41:03-05:18"),
            Some(Timestamp(0))
        );
        assert_eq!(
            Timestamp::parse_rfc3339("0000-01-01T00:00:00Z"),
            Some(Timestamp(0))
        );
        for bad in [
            "2026-11-22T10:14:05+1:00",
            "2026-11-22T10:14:05+24:00",
            "2026-11-22T10:14:05",
            "2026-02-30T00:00:00Z",
            "2026-11-22 10:14:05Z",
            "26-11-22T10:14:05Z",
            "2026-11-22T10:14:05.Z",
            "yesterday",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Timestamp(5).since(Timestamp(9)), Duration::ZERO);
        assert_eq!(
            Timestamp(u64::MAX).after(Duration::from_secs(1)),
            Timestamp(u64::MAX)
        );
    }
}
