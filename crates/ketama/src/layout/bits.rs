//! Bit-level helpers of the `Compact` layout: fields read across words,
//! masks, widths, and select (the position of the k-th set bit) by bytes.

/// Reads the `bits`-bit field (at most 57 bits) at bit `pos` of `words`.
/// The array ends with a padding word, so the second load is always in
/// bounds.
#[inline(always)]
pub(super) fn read(words: &[u64], pos: usize, bits: u32) -> u64 {
    let (w, o) = (pos / 64, (pos % 64) as u32);
    let lo = words[w] >> o;
    // `<< 1 << (63 - o)` is `<< (64 - o)`, and 0 when `o` is 0.
    let hi = words[w + 1] << 1 << (63 - o);
    (lo | hi) & mask(bits)
}

#[inline(always)]
pub(super) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Bits needed to hold `x`.
pub(super) fn bits_for(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// The 64 bits of `words` from bit `pos` on (zeros past the end).
#[inline(always)]
pub(super) fn bits64(words: &[u64], pos: usize) -> u64 {
    read(words, pos, 64)
}

/// Per byte of `x`, the set bits of that byte and every lower one (the
/// top byte is the popcount of `x`): the SWAR popcount, without needing
/// the `popcnt` instruction the baseline x86-64 target lacks.
#[inline(always)]
pub(super) fn byte_prefix(x: u64) -> u64 {
    const L: u64 = 0x0101_0101_0101_0101;
    let mut s = x - ((x >> 1) & 0x5555_5555_5555_5555);
    s = (s & 0x3333_3333_3333_3333) + ((s >> 2) & 0x3333_3333_3333_3333);
    s = (s + (s >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    s.wrapping_mul(L)
}

/// Position of the `k`-th (0-based) set bit of `x`, which has more than
/// `k`; `prefix` is [`byte_prefix`]`(x)`. Branch-free: the byte holding it
/// is the number of bytes whose running count is at most `k`, then a
/// table gives the bit within the byte.
#[inline(always)]
pub(super) fn select(x: u64, prefix: u64, k: u32) -> u32 {
    const L: u64 = 0x0101_0101_0101_0101;
    const H: u64 = 0x8080_8080_8080_8080;
    // Running counts are at most 64 and k < 64: no borrow crosses a byte.
    let at_most_k = ((k as u64 * L) | H).wrapping_sub(prefix) & H;
    let byte = ((at_most_k >> 7).wrapping_mul(L) >> 56) as u32;
    let before = ((prefix << 8) >> (8 * byte)) as u8 as u32;
    let b = (x >> (8 * byte)) as u8;
    8 * byte + SELECT_IN_BYTE[b as usize][(k - before) as usize] as u32
}

/// `SELECT_IN_BYTE[b][k]`: the position of the `k`-th set bit of byte `b`.
static SELECT_IN_BYTE: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let (mut k, mut bit) = (0, 0);
        while bit < 8 {
            if b & (1 << bit) != 0 {
                t[b][k] = bit as u8;
                k += 1;
            }
            bit += 1;
        }
        b += 1;
    }
    t
};
