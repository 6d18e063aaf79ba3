//! MD5 (RFC 1321), for the memcached schemes: libmemcached's and
//! twemproxy's continuum points and their `md5` key hash.
//!
//! A continuum point string is `NAME-I` for I = 0, 1, 2...: consecutive
//! indices with the same number of digits are messages of the same length,
//! so they pad alike and [`digest_run`] hashes [`LANES`] of them at once,
//! lane by lane in plain arrays that the compiler turns into SIMD (SSE2 on
//! any x86-64: two 4-lane registers per value). MD5 is a chain of 64
//! dependent steps per block, so one message at a time leaves most of the
//! core idle; eight in flight keep it busy.

/// Messages hashed side by side by [`digest_run`].
pub(crate) const LANES: usize = 8;

const S: [u32; 64] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9,
    14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15,
    21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];

/// `floor(abs(sin(i + 1)) x 2^32)`, as RFC 1321 lists them.
const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

const INIT: [u32; 4] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];

/// One 64-byte block into `L` states at once: `m[w][l]` is word `w` of
/// lane `l`'s block.
#[inline(always)]
fn compress<const L: usize>(st: &mut [[u32; L]; 4], m: &[[u32; L]; 16]) {
    let [mut a, mut b, mut c, mut d] = *st;
    for i in 0..64 {
        let g = match i / 16 {
            0 => i,
            1 => (5 * i + 1) % 16,
            2 => (3 * i + 5) % 16,
            _ => (7 * i) % 16,
        };
        let mut f = [0u32; L];
        for l in 0..L {
            f[l] = match i / 16 {
                0 => (b[l] & c[l]) | (!b[l] & d[l]),
                1 => (d[l] & b[l]) | (!d[l] & c[l]),
                2 => b[l] ^ c[l] ^ d[l],
                _ => c[l] ^ (b[l] | !d[l]),
            };
        }
        for l in 0..L {
            let t = a[l]
                .wrapping_add(f[l])
                .wrapping_add(K[i])
                .wrapping_add(m[g][l]);
            a[l] = d[l];
            d[l] = c[l];
            c[l] = b[l];
            b[l] = b[l].wrapping_add(t.rotate_left(S[i]));
        }
    }
    for l in 0..L {
        st[0][l] = st[0][l].wrapping_add(a[l]);
        st[1][l] = st[1][l].wrapping_add(b[l]);
        st[2][l] = st[2][l].wrapping_add(c[l]);
        st[3][l] = st[3][l].wrapping_add(d[l]);
    }
}

/// `msg` padded as MD5 pads it: `0x80`, zeros, the bit length (LE u64).
fn pad(msg: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(msg);
    out.push(0x80);
    while out.len() % 64 != 56 {
        out.push(0);
    }
    out.extend_from_slice(&((msg.len() as u64).wrapping_mul(8)).to_le_bytes());
}

fn word(b: &[u8], w: usize) -> u32 {
    u32::from_le_bytes([b[4 * w], b[4 * w + 1], b[4 * w + 2], b[4 * w + 3]])
}

/// The MD5 digest of `msg` as four little-endian words (word 0 is digest
/// bytes 0-3). Cost: one compression (about 64 dependent steps) per 64
/// bytes.
pub(crate) fn digest(msg: &[u8]) -> [u32; 4] {
    let mut padded = Vec::with_capacity(msg.len() + 72);
    pad(msg, &mut padded);
    let mut st = INIT.map(|v| [v]);
    for block in padded.chunks_exact(64) {
        let m: [[u32; 1]; 16] = std::array::from_fn(|w| [word(block, w)]);
        compress(&mut st, &m);
    }
    st.map(|v| v[0])
}

/// The digests of the messages `prefix || decimal(i)` for `i` in `range`,
/// passed to `sink(i, digest words)` in order. Messages of equal length
/// (same digit count) go through [`compress`] [`LANES`] at a time.
pub(crate) fn digest_run(
    prefix: &[u8],
    range: std::ops::Range<u32>,
    mut sink: impl FnMut(u32, [u32; 4]),
) {
    use std::io::Write;
    let mut msg = Vec::with_capacity(prefix.len() + 10);
    let mut padded: Vec<Vec<u8>> = vec![Vec::new(); LANES];
    let mut i = range.start;
    while i < range.end {
        // The run of indices with as many digits as i, LANES at a time.
        let digits_end = 10u64.pow(i.max(1).ilog10() + 1).min(range.end as u64) as u32;
        let n = (digits_end - i).min(LANES as u32) as usize;
        for (l, p) in padded.iter_mut().enumerate() {
            msg.clear();
            msg.extend_from_slice(prefix);
            // Lanes past the run repeat its last message; their digests are
            // dropped.
            let idx = i + (l.min(n - 1)) as u32;
            // Writing to a Vec cannot fail.
            let _ = write!(msg, "{idx}");
            pad(&msg, p);
        }
        let mut st: [[u32; LANES]; 4] = INIT.map(|v| [v; LANES]);
        for b in 0..padded[0].len() / 64 {
            let m: [[u32; LANES]; 16] =
                std::array::from_fn(|w| std::array::from_fn(|l| word(&padded[l][b * 64..], w)));
            compress(&mut st, &m);
        }
        for (l, d) in (0..n).map(|l| st.map(|w| w[l])).enumerate() {
            sink(i + l as u32, d);
        }
        i += n as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(d: [u32; 4]) -> String {
        d.iter()
            .flat_map(|w| w.to_le_bytes())
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn rfc1321_suite() {
        let cases = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                "abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f",
            ),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (msg, want) in cases {
            assert_eq!(hex(digest(msg.as_bytes())), want, "{msg:?}");
        }
    }

    #[test]
    fn runs_equal_one_at_a_time() {
        // Across digit boundaries, short runs and multi-block prefixes.
        for prefix in ["10.0.0.1:11212-", "", &"x".repeat(60)] {
            for range in [0..1, 0..25, 7..120, 95..1003, 9999..10001] {
                let mut seen = range.start;
                digest_run(prefix.as_bytes(), range.clone(), |i, d| {
                    assert_eq!(i, seen);
                    seen += 1;
                    let msg = format!("{prefix}{i}");
                    assert_eq!(d, digest(msg.as_bytes()), "{msg}");
                });
                assert_eq!(seen, range.end);
            }
        }
    }
}
