//! The `Date` value of the engine's responses (RFC 9110's IMF-fixdate,
//! `Sun, 06 Nov 1994 08:49:37 GMT`: always 29 bytes), rendered into a
//! fixed buffer of each worker thread's once a second: no allocation, and
//! one clock read per response.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// The length of an IMF-fixdate.
pub const LEN: usize = 29;

thread_local! {
    /// The second last rendered, and its text.
    static CACHED: Cell<(u64, [u8; LEN])> = const { Cell::new((u64::MAX, [0; LEN])) };
}

/// The current time's `Date` value.
pub fn now() -> [u8; LEN] {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    CACHED.with(|c| {
        let (at, text) = c.get();
        if at == secs {
            return text;
        }
        let text = render(secs);
        c.set((secs, text));
        text
    })
}

/// `secs` after the Unix epoch as an IMF-fixdate.
pub fn render(secs: u64) -> [u8; LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil(days as i64);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    two(&mut out[5..7], d);
    out[8..11].copy_from_slice(MONTHS[(m - 1) as usize]);
    let y = y.clamp(0, 9999) as u64;
    two(&mut out[12..14], y / 100);
    two(&mut out[14..16], y % 100);
    two(&mut out[17..19], rem / 3600);
    two(&mut out[20..22], rem / 60 % 60);
    two(&mut out[23..25], rem % 60);
    out
}

fn two(out: &mut [u8], n: u64) {
    out[0] = b'0' + (n / 10 % 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// The civil date (year, month 1-12, day 1-31) `days` after 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u64, u64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_httpdate_renders_them() {
        for secs in [
            0u64,
            784_111_777,
            951_782_400,
            1_234_567_890,
            1_709_164_800,
            1_796_515_200,
            4_102_444_799,
            253_402_300_799,
        ] {
            let want = httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(secs));
            assert_eq!(std::str::from_utf8(&render(secs)).unwrap(), want, "{secs}");
        }
        let mut s = 0u64;
        while s < 5_000_000_000 {
            let want = httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(s));
            assert_eq!(std::str::from_utf8(&render(s)).unwrap(), want, "{s}");
            s += 86_399 * 7 + 3_601;
        }
    }

    #[test]
    fn now_is_cached_per_second() {
        let a = now();
        let b = now();
        assert!(a == b || a[..20] == b[..20]);
        assert_eq!(a.len(), LEN);
    }
}
