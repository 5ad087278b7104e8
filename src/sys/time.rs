//! RFC 3339 timestamps and `45s` / `30m` / `24h` / `7d` durations, without a date library:
//! vigil only ever needs UTC and whole civil dates.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// Now, as `2026-11-30T00:44:13.123Z`.
pub fn now_rfc3339() -> String {
    format_rfc3339(SystemTime::now())
}

pub fn format_rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Parses RFC 3339 (`Z` or `±hh:mm`, optional fraction) into seconds since the epoch.
pub(crate) fn parse_rfc3339(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo)
        || !(1..=days_in_month(y, mo)).contains(&d)
        || h > 23
        || mi > 59
        || s > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut fraction = 0.0;
    if let Some(after_dot) = rest.strip_prefix('.') {
        let digits = after_dot.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        fraction = format!("0.{}", &after_dot[..digits]).parse().ok()?;
        rest = &after_dot[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':' =>
        {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let (oh, om) = (num_in(rest, 1..3)?, num_in(rest, 4..6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    Some((days * 86_400 + h * 3600 + mi * 60 + s - offset) as f64 + fraction)
}

fn num_in(text: &str, range: std::ops::Range<usize>) -> Option<i64> {
    let s = text.get(range)?;
    s.bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| s.parse().ok())?
}

/// Seconds since the epoch, now.
pub fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// A point in time by which work must be done.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline(std::time::Instant);

impl Deadline {
    pub(crate) fn after(budget: Duration) -> Deadline {
        Deadline(std::time::Instant::now() + budget)
    }

    /// What is left, never less than a millisecond (so a call made late fails fast, not never).
    pub(crate) fn remaining(self) -> Duration {
        self.0
            .saturating_duration_since(std::time::Instant::now())
            .max(Duration::from_millis(1))
    }

    pub(crate) fn passed(self) -> bool {
        std::time::Instant::now() >= self.0
    }

    /// An error naming `what` once the deadline has passed.
    pub(crate) fn check(self, what: &str) -> Result<()> {
        if self.passed() {
            return Err(Error::Io(format!("{what} ran out of time")));
        }
        Ok(())
    }
}

/// `45s`, `30m`, `24h`, `7d`: a whole number and one unit.
pub(crate) fn parse_duration(text: &str) -> Result<Duration> {
    let bad = || {
        Error::usage(format!(
            "{text:?} is not a duration; write a whole number and a unit, e.g. 45s, 30m, 24h or 7d"
        ))
    };
    let unit = text.chars().last().ok_or_else(bad)?;
    let digits = &text[..text.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let secs = match unit {
        's' => Some(n),
        'm' => n.checked_mul(60),
        'h' => n.checked_mul(3600),
        'd' => n.checked_mul(86_400),
        _ => None,
    }
    .ok_or_else(bad)?;
    Ok(Duration::from_secs(secs))
}

/// `7d`, `24h`, `30m`, `45s`: the largest unit that divides the duration exactly.
pub(crate) fn format_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs >= size && secs.is_multiple_of(size) {
            return format!("{}{unit}", secs / size);
        }
    }
    format!("{secs}s")
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_round_trip() {
        let t = UNIX_EPOCH + Duration::from_millis(1_796_000_653_123);
        let text = format_rfc3339(t);
        assert_eq!(text, "2026-11-30T01:04:13.123Z"); // as `date -u -d @1796000653` prints it
        assert!((parse_rfc3339(&text).unwrap() - 1_796_000_653.123).abs() < 1e-6);
    }

    #[test]
    fn parses_offsets_and_rejects_nonsense() {
        assert_eq!(parse_rfc3339("1970-01-01T01:00:00+01:00"), Some(0.0));
        assert_eq!(parse_rfc3339("2024-02-29T00:00:00Z"), Some(1_709_164_800.0));
        for bad in [
            "",
            "2023-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-30 00:00",
            "2026-11-30T00:00:00",
            "2026-11-30T00:00:00.Z",
            "yesterday",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("45s").unwrap(), Duration::from_secs(45));
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("24h").unwrap(), Duration::from_secs(86_400));
        assert_eq!(parse_duration("7d").unwrap(), Duration::from_secs(604_800));
        for bad in ["", "s", "10", "1.5h", "-1d", "3w", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
