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

use std::num::Wrapping;

use wide::u32x8;

/// Messages hashed side by side by [`digest_run`].
pub(crate) const LANES: usize = 8;

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

/// A 32-bit word, or eight side by side: what [`compress`] computes on.
trait Word:
    Copy
    + std::ops::Add<Output = Self>
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
    + std::ops::Not<Output = Self>
{
    fn splat(x: u32) -> Self;
    fn rotl(self, s: u32) -> Self;
}

impl Word for Wrapping<u32> {
    #[inline(always)]
    fn splat(x: u32) -> Self {
        Wrapping(x)
    }
    #[inline(always)]
    fn rotl(self, s: u32) -> Self {
        Wrapping(self.0.rotate_left(s))
    }
}

/// Eight lanes: two SSE2 registers on any x86-64 (one AVX2 register where
/// the build enables it), plain arrays elsewhere.
impl Word for u32x8 {
    #[inline(always)]
    fn splat(x: u32) -> Self {
        u32x8::splat(x)
    }
    #[inline(always)]
    fn rotl(self, s: u32) -> Self {
        (self << s) | (self >> (32 - s))
    }
}

/// One 64-byte block into a state: `m[w]` is word `w` of the block (of
/// each lane's block for `u32x8`). The 64 steps are written out (round
/// function, message word, constant and rotation fixed per step) so that
/// each compiles to straight-line code.
#[inline(always)]
fn compress<W: Word>(st: &mut [W; 4], m: &[W; 16]) {
    #[inline(always)]
    fn ff<W: Word>(b: W, c: W, d: W) -> W {
        d ^ (b & (c ^ d))
    }
    #[inline(always)]
    fn gg<W: Word>(b: W, c: W, d: W) -> W {
        c ^ (d & (b ^ c))
    }
    #[inline(always)]
    fn hh<W: Word>(b: W, c: W, d: W) -> W {
        b ^ c ^ d
    }
    #[inline(always)]
    fn ii<W: Word>(b: W, c: W, d: W) -> W {
        c ^ (b | !d)
    }
    macro_rules! step {
        ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $k:expr, $s:expr) => {
            $a = $b + ($a + $f($b, $c, $d) + W::splat($k) + $m).rotl($s);
        };
    }
    let [mut a, mut b, mut c, mut d] = *st;
    step!(ff, a, b, c, d, m[0], K[0], 7);
    step!(ff, d, a, b, c, m[1], K[1], 12);
    step!(ff, c, d, a, b, m[2], K[2], 17);
    step!(ff, b, c, d, a, m[3], K[3], 22);
    step!(ff, a, b, c, d, m[4], K[4], 7);
    step!(ff, d, a, b, c, m[5], K[5], 12);
    step!(ff, c, d, a, b, m[6], K[6], 17);
    step!(ff, b, c, d, a, m[7], K[7], 22);
    step!(ff, a, b, c, d, m[8], K[8], 7);
    step!(ff, d, a, b, c, m[9], K[9], 12);
    step!(ff, c, d, a, b, m[10], K[10], 17);
    step!(ff, b, c, d, a, m[11], K[11], 22);
    step!(ff, a, b, c, d, m[12], K[12], 7);
    step!(ff, d, a, b, c, m[13], K[13], 12);
    step!(ff, c, d, a, b, m[14], K[14], 17);
    step!(ff, b, c, d, a, m[15], K[15], 22);
    step!(gg, a, b, c, d, m[1], K[16], 5);
    step!(gg, d, a, b, c, m[6], K[17], 9);
    step!(gg, c, d, a, b, m[11], K[18], 14);
    step!(gg, b, c, d, a, m[0], K[19], 20);
    step!(gg, a, b, c, d, m[5], K[20], 5);
    step!(gg, d, a, b, c, m[10], K[21], 9);
    step!(gg, c, d, a, b, m[15], K[22], 14);
    step!(gg, b, c, d, a, m[4], K[23], 20);
    step!(gg, a, b, c, d, m[9], K[24], 5);
    step!(gg, d, a, b, c, m[14], K[25], 9);
    step!(gg, c, d, a, b, m[3], K[26], 14);
    step!(gg, b, c, d, a, m[8], K[27], 20);
    step!(gg, a, b, c, d, m[13], K[28], 5);
    step!(gg, d, a, b, c, m[2], K[29], 9);
    step!(gg, c, d, a, b, m[7], K[30], 14);
    step!(gg, b, c, d, a, m[12], K[31], 20);
    step!(hh, a, b, c, d, m[5], K[32], 4);
    step!(hh, d, a, b, c, m[8], K[33], 11);
    step!(hh, c, d, a, b, m[11], K[34], 16);
    step!(hh, b, c, d, a, m[14], K[35], 23);
    step!(hh, a, b, c, d, m[1], K[36], 4);
    step!(hh, d, a, b, c, m[4], K[37], 11);
    step!(hh, c, d, a, b, m[7], K[38], 16);
    step!(hh, b, c, d, a, m[10], K[39], 23);
    step!(hh, a, b, c, d, m[13], K[40], 4);
    step!(hh, d, a, b, c, m[0], K[41], 11);
    step!(hh, c, d, a, b, m[3], K[42], 16);
    step!(hh, b, c, d, a, m[6], K[43], 23);
    step!(hh, a, b, c, d, m[9], K[44], 4);
    step!(hh, d, a, b, c, m[12], K[45], 11);
    step!(hh, c, d, a, b, m[15], K[46], 16);
    step!(hh, b, c, d, a, m[2], K[47], 23);
    step!(ii, a, b, c, d, m[0], K[48], 6);
    step!(ii, d, a, b, c, m[7], K[49], 10);
    step!(ii, c, d, a, b, m[14], K[50], 15);
    step!(ii, b, c, d, a, m[5], K[51], 21);
    step!(ii, a, b, c, d, m[12], K[52], 6);
    step!(ii, d, a, b, c, m[3], K[53], 10);
    step!(ii, c, d, a, b, m[10], K[54], 15);
    step!(ii, b, c, d, a, m[1], K[55], 21);
    step!(ii, a, b, c, d, m[8], K[56], 6);
    step!(ii, d, a, b, c, m[15], K[57], 10);
    step!(ii, c, d, a, b, m[6], K[58], 15);
    step!(ii, b, c, d, a, m[13], K[59], 21);
    step!(ii, a, b, c, d, m[4], K[60], 6);
    step!(ii, d, a, b, c, m[11], K[61], 10);
    step!(ii, c, d, a, b, m[2], K[62], 15);
    step!(ii, b, c, d, a, m[9], K[63], 21);
    st[0] = st[0] + a;
    st[1] = st[1] + b;
    st[2] = st[2] + c;
    st[3] = st[3] + d;
}

/// `msg` padded as MD5 pads it: `0x80`, zeros, the bit length (LE u64).
fn pad(msg: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(msg);
    out.push(0x80);
    out.resize((msg.len() + 8) / 64 * 64 + 56, 0);
    out.extend_from_slice(&((msg.len() as u64).wrapping_mul(8)).to_le_bytes());
}

fn word(b: &[u8], w: usize) -> u32 {
    u32::from_le_bytes([b[4 * w], b[4 * w + 1], b[4 * w + 2], b[4 * w + 3]])
}

/// The MD5 digest of `msg` as four little-endian words (word 0 is digest
/// bytes 0-3). Cost: one compression (about 64 dependent steps) per 64
/// bytes.
pub(crate) fn digest(msg: &[u8]) -> [u32; 4] {
    let mut st = INIT.map(Wrapping);
    let mut blocks = msg.chunks_exact(64);
    for block in &mut blocks {
        compress(&mut st, &std::array::from_fn(|w| Wrapping(word(block, w))));
    }
    // The tail, padded on the stack: one block, or two when fewer than 9
    // bytes are left for the 0x80 and the length.
    let rest = blocks.remainder();
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let len = if rest.len() < 56 { 64 } else { 128 };
    tail[len - 8..len].copy_from_slice(&((msg.len() as u64).wrapping_mul(8)).to_le_bytes());
    for block in tail[..len].chunks_exact(64) {
        compress(&mut st, &std::array::from_fn(|w| Wrapping(word(block, w))));
    }
    st.map(|v| v.0)
}

/// The digests of the messages `prefix || decimal(i)` for `i` in `range`,
/// passed to `sink(i, digest words)` in order. Messages of equal length
/// (same digit count) go through [`compress`] [`LANES`] at a time: the
/// padded message is laid out once per digit count, and each batch only
/// writes its digits into the lanes' copies.
pub(crate) fn digest_run(
    prefix: &[u8],
    range: std::ops::Range<u32>,
    mut sink: impl FnMut(u32, [u32; 4]),
) {
    let mut lanes: Vec<u8> = Vec::new();
    let mut template = Vec::new();
    let mut digits_of_layout = 0;
    let mut i = range.start;
    while i < range.end {
        let digits = i.max(1).ilog10() as usize + 1;
        if digits != digits_of_layout {
            // Lay the padded message out for this digit count, in every lane.
            let mut msg = prefix.to_vec();
            msg.resize(prefix.len() + digits, b'0');
            pad(&msg, &mut template);
            lanes.clear();
            for _ in 0..LANES {
                lanes.extend_from_slice(&template);
            }
            digits_of_layout = digits;
        }
        let len = template.len();
        // The run of indices with as many digits as i, LANES at a time.
        let run_end = 10u64.pow(digits as u32).min(range.end as u64) as u32;
        let n = (run_end - i).min(LANES as u32) as usize;
        for l in 0..LANES {
            // Lanes past the run repeat its last index; their digests are
            // dropped.
            let mut x = i + l.min(n - 1) as u32;
            let at = l * len + prefix.len();
            for d in lanes[at..at + digits].iter_mut().rev() {
                *d = b'0' + (x % 10) as u8;
                x /= 10;
            }
        }
        let mut st: [u32x8; 4] = INIT.map(u32x8::splat);
        let mut m = [[0u32; LANES]; 16];
        for b in 0..len / 64 {
            for (l, lane) in lanes.chunks_exact(len).enumerate() {
                let block = &lane[b * 64..b * 64 + 64];
                for (w, mw) in m.iter_mut().enumerate() {
                    mw[l] = word(block, w);
                }
            }
            compress(&mut st, &m.map(u32x8::new));
        }
        let st = st.map(u32x8::to_array);
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
