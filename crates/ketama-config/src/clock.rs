//! Wall-clock times as the router's `/status`, its access log and the
//! plan controller's log show them (UTC, no time zone database).

use std::time::{SystemTime, UNIX_EPOCH};

/// A time's UTC calendar fields: (year, month, day, hour, minute, second)
/// and the milliseconds (the epoch for times before it).
fn civil(time: SystemTime) -> ([i64; 6], u32) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    (
        [y, m, d, rem / 3600, rem / 60 % 60, rem % 60],
        since.subsec_millis(),
    )
}

/// `time` as `YYYY-MM-DDTHH:MM:SSZ` (UTC; the epoch for times before it).
pub fn utc(time: SystemTime) -> String {
    let ([y, m, d, hh, mm, ss], _) = civil(time);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// `time` as RFC 3339 with milliseconds, UTC (`2026-12-02T05:07:12.788Z`),
/// appended to `out`.
pub fn utc_millis(out: &mut String, time: SystemTime) {
    use std::fmt::Write as _;
    let ([y, m, d, hh, mm, ss], ms) = civil(time);
    let _ = write!(out, "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{ms:03}Z");
}

/// `time` as nginx's `$time_local` in UTC (`02/Dec/2026:05:07:12 +0000`),
/// appended to `out`.
pub fn nginx_local(out: &mut String, time: SystemTime) {
    use std::fmt::Write as _;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let ([y, m, d, hh, mm, ss], _) = civil(time);
    let month = MONTHS[(m - 1) as usize];
    let _ = write!(out, "{d:02}/{month}/{y:04}:{hh:02}:{mm:02}:{ss:02} +0000");
}

#[cfg(test)]
mod tests {
    use super::utc;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn civil_dates() {
        let at = |s: u64| utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day of a century divisible by 400).
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(951_868_799), "2000-02-29T23:59:59Z");
        // 2026-12-01T21:23:50Z, checked with `date -u -d @1796160230`.
        assert_eq!(at(1_796_160_230), "2026-12-01T21:23:50Z");
        assert_eq!(
            utc(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00Z"
        );
    }

    #[test]
    fn access_log_times() {
        // 2026-12-02T05:07:12.788Z: `date -u -d @1796188032.788`.
        let t = UNIX_EPOCH + Duration::from_millis(1_796_188_032_788);
        let mut s = String::new();
        super::utc_millis(&mut s, t);
        s.push(' ');
        super::nginx_local(&mut s, t);
        assert_eq!(s, "2026-12-02T05:07:12.788Z 02/Dec/2026:05:07:12 +0000");
    }
}
