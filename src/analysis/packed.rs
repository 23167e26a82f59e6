//! Frame-of-reference bit-packed integer columns: the compressed layout of the derived indexes.
//!
//! Owns the encoding and the lookups of `analysis/_index.py`'s packed columns. A column of
//! n int64 values (nulls allowed) is cut into blocks of [`BLOCK`] values; each block is
//! coded one of three ways, whichever is smaller:
//!
//! - frame of reference: `base` = the block's minimum, codes `value - base` (nullable
//!   columns: `value - base + 1`, code 0 = null) in `w` bits each: a value is read in place
//!   (block `i / BLOCK`, bit `(i % BLOCK) * w`), one shift and mask;
//! - delta (null-free blocks only; `bits` has [`DELTA`] set): `base` = the first value, the
//!   block's data starts with `dmin` (8 bytes) and an anchor every [`STEP`] values (the
//!   value at k = STEP, 2 STEP, ... less `base`, 8 bytes each), then the codes
//!   `v[j] - v[j-1] - dmin`, j >= 1: sorted columns (timestamps of one stream, seqs) pack
//!   ~30 % tighter, and a value costs a prefix sum over at most STEP - 1 codes from its anchor;
//! - sparse (frame of reference where most codes are 0: nulls, or values equal to the
//!   block's minimum; `bits` = [`SPARSE`] + w): a bitmap of the rows whose code is not 0
//!   (n bits, in u64 words), then only those codes, w bits each; code i is the
//!   popcount-rank of row i in the bitmap (at most 16 popcounts). TOD's span arguments
//!   (arg0..arg3 null in 21 / 42 / 60 / 82 % of the spans) take 0.6-1.4 B a row instead of
//!   1.77.
//!
//! Codes are packed LSB-first, followed by 8 zero bytes so any code is read with one
//! unaligned 8-byte load (plus one byte when `w > 57`). `base` is the sparse top level: a
//! search over a sorted range first bisects the blocks by their first value (read in O(1)
//! in either coding), then decodes the one block that holds the answer, so a lookup is a
//! few binary searches and one or two block decodes.
//!
//! A column may be stored relative to another (`value - ref`, e.g. the span index's end_ts
//! relative to ts): [`Rel`] reads it back as the sum.
//!
//! Over 600 lines: the encoder, the in-place reader, search and the binned counts over one
//! block layout; they change together whenever the layout does.

/// Values per block.
pub const BLOCK: usize = 1024;
/// Zero bytes after each non-empty block's codes (one unaligned u64 load stays in bounds).
const PAD: usize = 8;
/// Flag in a block's `bits`: delta coded.
pub const DELTA: u8 = 0x80;
/// Values between two anchors of a delta block.
pub const STEP: usize = 128;
/// A block whose `bits` exceeds this (without [`DELTA`]) is sparse, width `bits - SPARSE` (1..=63).
pub const SPARSE: u8 = 64;

/// Bytes of a sparse block's bitmap of n rows.
fn sparse_head(n: usize) -> usize {
    8 * n.div_ceil(64)
}

/// Rank of row k in a sparse block's bitmap (rows before k whose code is not 0), or None
/// when row k's code is 0.
#[inline]
fn sparse_rank(buf: &[u8], k: usize) -> Option<usize> {
    let word = |j: usize| u64::from_le_bytes(buf[8 * j..8 * j + 8].try_into().unwrap());
    let (wi, bit) = (k / 64, k % 64);
    let w = word(wi);
    if w >> bit & 1 == 0 {
        return None;
    }
    let mut r = (w & ((1u64 << bit) - 1)).count_ones() as usize;
    for j in 0..wi {
        r += word(j).count_ones() as usize;
    }
    Some(r)
}

/// Bytes before the codes of a delta block of n values: dmin and the anchors.
fn delta_head(n: usize) -> usize {
    8 + 8 * ((n - 1) / STEP)
}

/// One encoded column: blocks as (offsets into `data`, base, bit width).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Encoded {
    /// The codes of every block, each block followed by [`PAD`] zero bytes (none when w = 0).
    pub data: Vec<u8>,
    /// Byte offset of each block in `data`, plus the end (blocks + 1 entries).
    pub offsets: Vec<i64>,
    /// Minimum non-null value of each block (0 for a block of nulls); a delta block's first value.
    pub base: Vec<i64>,
    /// Bit width of each block's codes (0..=64), | [`DELTA`] for a delta-coded block.
    pub bits: Vec<u8>,
}

fn width(range: u64) -> u8 {
    (64 - range.leading_zeros()) as u8
}

/// Encode `values` (`valid[i] == false` = null; `valid` empty = no nulls). `nullable`
/// reserves code 0 for null. Errors when a nullable block spans the whole i64 range.
pub fn encode(values: &[i64], valid: &[bool], nullable: bool) -> Result<Encoded, String> {
    if !valid.is_empty() && valid.len() != values.len() {
        return Err("validity and values differ in length".into());
    }
    if !nullable && valid.iter().any(|v| !v) {
        return Err("null values in a column encoded without nulls".into());
    }
    let blocks = values.len().div_ceil(BLOCK);
    let mut out = Encoded {
        data: Vec::with_capacity(values.len() * 2),
        offsets: Vec::with_capacity(blocks + 1),
        base: Vec::with_capacity(blocks),
        bits: Vec::with_capacity(blocks),
    };
    out.offsets.push(0);
    for b in 0..blocks {
        let lo = b * BLOCK;
        let hi = (lo + BLOCK).min(values.len());
        let ok = |i: usize| valid.is_empty() || valid[i];
        let (mut min, mut max, mut any) = (i64::MAX, i64::MIN, false);
        for (i, &v) in values.iter().enumerate().take(hi).skip(lo) {
            if ok(i) {
                min = min.min(v);
                max = max.max(v);
                any = true;
            }
        }
        if !any {
            min = 0;
            max = 0;
        }
        let range = (max as u64).wrapping_sub(min as u64);
        let has_null = nullable && (lo..hi).any(|i| !ok(i));
        let w = if nullable {
            if range == u64::MAX {
                return Err("a nullable block spans the whole int64 range".into());
            }
            // Code 0 = null: the non-null codes are 1..=range+1.
            if has_null || any {
                width(range + 1)
            } else {
                0
            }
        } else {
            width(range)
        };
        let n = hi - lo;
        if !has_null && n > 1 {
            // Delta coding when it is smaller (its dmin costs 8 bytes).
            let d = |j: usize| values[j].wrapping_sub(values[j - 1]);
            let (mut dmin, mut dmax) = (i64::MAX, i64::MIN);
            for j in lo + 1..hi {
                dmin = dmin.min(d(j));
                dmax = dmax.max(d(j));
            }
            // Overflowing differences (|v| near 2^63) keep frame of reference.
            let exact = (lo + 1..hi).all(|j| values[j].checked_sub(values[j - 1]).is_some());
            let dw = width((dmax as u64).wrapping_sub(dmin as u64));
            let head = delta_head(n);
            if exact && dmax.checked_sub(dmin).is_some() && (n - 1) * dw as usize + 8 * head < n * w as usize {
                out.base.push(values[lo]);
                out.bits.push(DELTA | dw);
                let start = out.data.len();
                let nbytes = head + ((n - 1) * dw as usize).div_ceil(8);
                out.data.resize(start + nbytes + PAD, 0);
                out.data[start..start + 8].copy_from_slice(&dmin.to_le_bytes());
                for a in 0..(n - 1) / STEP {
                    let v = (values[lo + (a + 1) * STEP] as u64).wrapping_sub(values[lo] as u64);
                    out.data[start + 8 + 8 * a..start + 16 + 8 * a].copy_from_slice(&v.to_le_bytes());
                }
                let buf = &mut out.data[start + head..];
                if dw > 0 {
                    for j in lo + 1..hi {
                        put(buf, j - lo - 1, dw as u32, (d(j) as u64).wrapping_sub(dmin as u64));
                    }
                }
                out.offsets.push(out.data.len() as i64);
                continue;
            }
        }
        let code_of = |i: usize| -> u64 {
            if !ok(i) {
                0
            } else {
                let c = (values[i] as u64).wrapping_sub(min as u64);
                if nullable {
                    c + 1
                } else {
                    c
                }
            }
        };
        let nonzero = (lo..hi).filter(|&i| code_of(i) != 0).count();
        if (1..64).contains(&w) && sparse_head(n) * 8 + nonzero * w as usize + 64 < n * w as usize {
            // Sparse: most codes are 0 (nulls, or the block's minimum).
            out.base.push(min);
            out.bits.push(SPARSE + w);
            let start = out.data.len();
            let head = sparse_head(n);
            out.data.resize(start + head + (nonzero * w as usize).div_ceil(8) + PAD, 0);
            let mut r = 0;
            for i in lo..hi {
                let c = code_of(i);
                if c != 0 {
                    let k = i - lo;
                    out.data[start + 8 * (k / 64) + (k % 64) / 8] |= 1 << (k % 8);
                    put(&mut out.data[start + head..], r, w as u32, c);
                    r += 1;
                }
            }
            out.offsets.push(out.data.len() as i64);
            continue;
        }
        out.base.push(min);
        out.bits.push(w);
        if w > 0 {
            let start = out.data.len();
            let nbytes = ((hi - lo) * w as usize).div_ceil(8);
            out.data.resize(start + nbytes + PAD, 0);
            let buf = &mut out.data[start..];
            for i in lo..hi {
                put(buf, i - lo, w as u32, code_of(i));
            }
        }
        out.offsets.push(out.data.len() as i64);
    }
    Ok(out)
}

fn put(buf: &mut [u8], i: usize, w: u32, code: u64) {
    let bit = i * w as usize;
    let p = bit >> 3;
    let s = (bit & 7) as u32;
    let mut cur = u64::from_le_bytes(buf[p..p + 8].try_into().unwrap());
    cur |= code << s;
    buf[p..p + 8].copy_from_slice(&cur.to_le_bytes());
    if s + w > 64 {
        buf[p + 8] |= (code >> (64 - s)) as u8;
    }
}

#[inline]
fn code(buf: &[u8], i: usize, w: u32) -> u64 {
    if w == 0 {
        return 0;
    }
    let bit = i * w as usize;
    let p = bit >> 3;
    let s = (bit & 7) as u32;
    let mut v = u64::from_le_bytes(buf[p..p + 8].try_into().unwrap()) >> s;
    if s + w > 64 {
        v |= (buf[p + 8] as u64) << (64 - s);
    }
    if w < 64 {
        v & ((1u64 << w) - 1)
    } else {
        v
    }
}

/// A packed column read in place (borrowed buffers: an mmapped index's).
#[derive(Debug, Clone, Copy)]
pub struct Packed<'a> {
    /// All blocks' codes.
    pub data: &'a [u8],
    /// Byte offset of each block in `data` (blocks + 1 entries).
    pub offsets: &'a [i64],
    /// Each block's base.
    pub base: &'a [i64],
    /// Each block's bit width.
    pub bits: &'a [u8],
    /// Values in the column.
    pub len: usize,
    /// Code 0 means null.
    pub nullable: bool,
}

impl<'a> Packed<'a> {
    /// Check that the parts describe `len` values (so reads cannot go out of bounds).
    pub fn new(
        data: &'a [u8],
        offsets: &'a [i64],
        base: &'a [i64],
        bits: &'a [u8],
        len: usize,
        nullable: bool,
    ) -> Result<Self, String> {
        let blocks = len.div_ceil(BLOCK);
        if base.len() != blocks || bits.len() != blocks || offsets.len() != blocks + 1 {
            return Err(format!("packed column of {len} values: expected {blocks} blocks"));
        }
        for b in 0..blocks {
            let (o0, o1) = (offsets[b], offsets[b + 1]);
            let n = (len - b * BLOCK).min(BLOCK);
            let sparse = bits[b] & DELTA == 0 && bits[b] > SPARSE;
            let w = if sparse { (bits[b] - SPARSE) as usize } else { (bits[b] & !DELTA) as usize };
            let need = if bits[b] & DELTA != 0 {
                delta_head(n) + ((n - 1) * w).div_ceil(8) + PAD
            } else if sparse {
                // Every set bit of the bitmap (those past n too) must have its code.
                let head = sparse_head(n);
                if o0 < 0 || o1 < o0 || (o1 - o0) as usize <= head || o1 as usize > data.len() {
                    return Err(format!("packed column: block {b} is malformed"));
                }
                let set: usize = data[o0 as usize..o0 as usize + head].iter().map(|x| x.count_ones() as usize).sum();
                head + (set * w).div_ceil(8) + PAD
            } else if w == 0 {
                0
            } else {
                (n * w).div_ceil(8) + PAD
            };
            if w > 64 || o0 < 0 || o1 < o0 || o1 as usize > data.len() || ((o1 - o0) as usize) < need {
                return Err(format!("packed column: block {b} is malformed"));
            }
        }
        Ok(Packed { data, offsets, base, bits, len, nullable })
    }

    /// Value `i` (None = null). `i < len`. O(1), but a sum of up to STEP - 1 codes in a delta block.
    #[inline]
    pub fn get(&self, i: usize) -> Option<i64> {
        let b = i / BLOCK;
        if self.bits[b] & DELTA != 0 {
            return Some(self.delta_at(b, i % BLOCK) as i64);
        }
        let buf = &self.data[self.offsets[b] as usize..];
        let c = if self.bits[b] > SPARSE {
            let n = self.block_len(b);
            match sparse_rank(buf, i % BLOCK) {
                None => 0,
                Some(r) => code(&buf[sparse_head(n)..], r, (self.bits[b] - SPARSE) as u32),
            }
        } else {
            code(buf, i % BLOCK, self.bits[b] as u32)
        };
        if self.nullable {
            if c == 0 {
                None
            } else {
                Some((self.base[b] as u64).wrapping_add(c - 1) as i64)
            }
        } else {
            Some((self.base[b] as u64).wrapping_add(c) as i64)
        }
    }

    fn block_len(&self, b: usize) -> usize {
        (self.len - b * BLOCK).min(BLOCK)
    }

    /// Anchor `a` of delta block `b` (the value at k = a * STEP, as u64): base for a = 0.
    #[inline]
    fn anchor(&self, b: usize, a: usize) -> u64 {
        let base = self.base[b] as u64;
        if a == 0 {
            return base;
        }
        let o = self.offsets[b] as usize + 8 * a;
        base.wrapping_add(u64::from_le_bytes(self.data[o..o + 8].try_into().unwrap()))
    }

    /// Value k of delta block b: its anchor plus the codes after it.
    #[inline]
    fn delta_at(&self, b: usize, k: usize) -> u64 {
        if k.is_multiple_of(STEP) {
            // An anchor (a block's first value: a search's block bisection): no read of
            // the block's codes, so the bisection touches `bits` and `base` only.
            return self.anchor(b, k / STEP);
        }
        let w = (self.bits[b] & !DELTA) as u32;
        let buf = &self.data[self.offsets[b] as usize..];
        let dmin = u64::from_le_bytes(buf[..8].try_into().unwrap());
        let codes = &buf[delta_head(self.block_len(b))..];
        let a = k / STEP;
        let mut sum = self.anchor(b, a).wrapping_add(((k - a * STEP) as u64).wrapping_mul(dmin));
        if w > 0 {
            for j in a * STEP..k {
                sum = sum.wrapping_add(code(codes, j, w));
            }
        }
        sum
    }

    /// First position in [from, to) (inside block b, sorted) whose value is >= v (right: > v):
    /// in place for a frame-of-reference block; from the last anchor before the answer in
    /// a delta block (a scan of at most STEP codes).
    fn search_block(&self, from: usize, to: usize, v: i64, right: bool) -> usize {
        let before = |x: i64| x < v || (right && x == v);
        let b = from / BLOCK;
        if self.bits[b] & DELTA == 0 {
            let (mut lo, mut hi) = (from, to);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if before(self.at(mid)) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            return lo;
        }
        let (k0, k1) = (from - b * BLOCK, to - b * BLOCK);
        // The last anchor at or after k0 whose value is still `before` v.
        let (mut a, mut z) = (k0.div_ceil(STEP), (k1 - 1) / STEP + 1);
        let mut k = k0;
        while a < z {
            let m = a + (z - a) / 2;
            if before(self.anchor(b, m) as i64) {
                k = k.max(m * STEP);
                a = m + 1;
            } else {
                z = m;
            }
        }
        let w = (self.bits[b] & !DELTA) as u32;
        let buf = &self.data[self.offsets[b] as usize..];
        let dmin = u64::from_le_bytes(buf[..8].try_into().unwrap());
        let codes = &buf[delta_head(self.block_len(b))..];
        let mut x = self.delta_at(b, k);
        while k < k1 {
            if !before(x as i64) {
                break;
            }
            k += 1;
            if k < k1 {
                x = x.wrapping_add(dmin).wrapping_add(if w > 0 { code(codes, k - 1, w) } else { 0 });
            }
        }
        b * BLOCK + k
    }

    /// Value `i` with null read as `i64::MIN` (sorted search columns have no nulls).
    #[inline]
    pub fn at(&self, i: usize) -> i64 {
        self.get(i).unwrap_or(i64::MIN)
    }

    /// First position in [lo, hi) whose value is >= v (right: > v), over a range sorted
    /// ascending: one probe per halving, each probe read in place.
    pub fn search(&self, lo: usize, hi: usize, v: i64, right: bool) -> usize {
        search(self, lo, hi, v, right)
    }

    /// Values [a, b) into `out` (nulls as 0) and `valid` (when the column is nullable).
    pub fn decode(&self, a: usize, b: usize, out: &mut Vec<i64>, valid: &mut Vec<bool>) {
        let mut i = a;
        while i < b {
            let blk = i / BLOCK;
            let end = ((blk + 1) * BLOCK).min(b);
            let buf = &self.data[self.offsets[blk] as usize..];
            let (w, base) = (self.bits[blk] as u32, self.base[blk] as u64);
            if self.bits[blk] & DELTA != 0 {
                let w = w & !(DELTA as u32);
                let dmin = u64::from_le_bytes(buf[..8].try_into().unwrap());
                let codes = &buf[delta_head(self.block_len(blk))..];
                let k0 = (i - blk * BLOCK) / STEP * STEP; // start from the anchor before i
                let mut v = self.anchor(blk, k0 / STEP);
                for k in k0..end - blk * BLOCK {
                    if k > k0 {
                        v = v.wrapping_add(dmin).wrapping_add(if w > 0 { code(codes, k - 1, w) } else { 0 });
                    }
                    if blk * BLOCK + k >= i {
                        out.push(v as i64);
                        if self.nullable {
                            valid.push(true);
                        }
                    }
                }
                i = end;
                continue;
            }
            let sparse = self.bits[blk] > SPARSE;
            let (w, codes, mut r) = if sparse {
                let k0 = i % BLOCK;
                let rank = (0..k0 / 64)
                    .map(|j| u64::from_le_bytes(buf[8 * j..8 * j + 8].try_into().unwrap()).count_ones() as usize)
                    .sum::<usize>();
                let wd = u64::from_le_bytes(buf[8 * (k0 / 64)..8 * (k0 / 64) + 8].try_into().unwrap());
                let rank = rank + (wd & ((1u64 << (k0 % 64)) - 1)).count_ones() as usize;
                (w - SPARSE as u32, &buf[sparse_head(self.block_len(blk))..], rank)
            } else {
                (w, buf, 0)
            };
            for j in i..end {
                let c = if sparse {
                    let k = j % BLOCK;
                    if buf[k / 8] >> (k % 8) & 1 == 0 {
                        0
                    } else {
                        r += 1;
                        code(codes, r - 1, w)
                    }
                } else {
                    code(codes, j % BLOCK, w)
                };
                if self.nullable {
                    valid.push(c != 0);
                    out.push(if c == 0 { 0 } else { base.wrapping_add(c - 1) as i64 });
                } else {
                    out.push(base.wrapping_add(c) as i64);
                }
            }
            i = end;
        }
    }
}

/// Read access shared by a packed column and a column stored relative to another.
pub trait Read: Sync {
    /// Values in the column.
    fn len(&self) -> usize;
    /// Whether the column is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Value i (None = null).
    fn get(&self, i: usize) -> Option<i64>;
    /// Values [a, b) appended to `out` (nulls as 0; `valid` filled when the column is nullable).
    fn decode(&self, a: usize, b: usize, out: &mut Vec<i64>, valid: &mut Vec<bool>);
    /// Whether values may be null.
    fn nullable(&self) -> bool;
    /// First position in [from, to) (inside one block, sorted) whose value is >= v (right: > v).
    fn search_block(&self, from: usize, to: usize, v: i64, right: bool) -> usize {
        let (mut vals, mut valid) = (Vec::with_capacity(to - from), Vec::new());
        self.decode(from, to, &mut vals, &mut valid);
        let k = vals.iter().enumerate().position(|(k, &x)| {
            let x = if valid.get(k) == Some(&false) { i64::MIN } else { x };
            !(x < v || (right && x == v))
        });
        from + k.unwrap_or(vals.len())
    }
}

impl Read for Packed<'_> {
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, i: usize) -> Option<i64> {
        Packed::get(self, i)
    }
    fn decode(&self, a: usize, b: usize, out: &mut Vec<i64>, valid: &mut Vec<bool>) {
        Packed::decode(self, a, b, out, valid)
    }
    fn nullable(&self) -> bool {
        self.nullable
    }
    fn search_block(&self, from: usize, to: usize, v: i64, right: bool) -> usize {
        if self.nullable {
            let (mut vals, mut valid) = (Vec::new(), Vec::new());
            self.decode(from, to, &mut vals, &mut valid);
            let k = (0..vals.len()).position(|k| {
                let x = if valid[k] { vals[k] } else { i64::MIN };
                !(x < v || (right && x == v))
            });
            return from + k.unwrap_or(vals.len());
        }
        Packed::search_block(self, from, to, v, right)
    }
}

/// A column stored as `value - ref`: reads add the two (null when either is).
pub struct Rel<'a> {
    /// The stored differences.
    pub diff: &'a dyn Read,
    /// The column they are relative to.
    pub base: &'a dyn Read,
}

impl Read for Rel<'_> {
    fn len(&self) -> usize {
        self.diff.len()
    }
    fn get(&self, i: usize) -> Option<i64> {
        Some(self.diff.get(i)?.wrapping_add(self.base.get(i)?))
    }
    fn decode(&self, a: usize, b: usize, out: &mut Vec<i64>, valid: &mut Vec<bool>) {
        let (mut x, mut vx, mut y, mut vy) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        self.diff.decode(a, b, &mut x, &mut vx);
        self.base.decode(a, b, &mut y, &mut vy);
        let nullable = self.nullable();
        for k in 0..x.len() {
            out.push(x[k].wrapping_add(y[k]));
            if nullable {
                valid.push(vx.get(k).copied().unwrap_or(true) && vy.get(k).copied().unwrap_or(true));
            }
        }
    }
    fn nullable(&self) -> bool {
        self.diff.nullable() || self.base.nullable()
    }
}

/// First position in [lo, hi) whose value is >= v (right: > v), over a range sorted
/// ascending (nulls read as i64::MIN): bisect the blocks by their first value, then decode
/// the one block that holds the answer.
pub fn search(col: &dyn Read, lo: usize, hi: usize, v: i64, right: bool) -> usize {
    let hi = hi.min(col.len());
    if lo >= hi {
        return lo;
    }
    let before = |x: i64| x < v || (right && x == v);
    let at = |i: usize| col.get(i).unwrap_or(i64::MIN);
    // Block starts strictly inside (lo, hi): bisect for the last one still `before` v.
    let (mut a, mut b) = (lo / BLOCK + 1, (hi - 1) / BLOCK + 1); // candidate block indexes [a, b)
    let mut from = lo;
    while a < b {
        let m = a + (b - a) / 2;
        if before(at(m * BLOCK)) {
            from = m * BLOCK;
            a = m + 1;
        } else {
            b = m;
        }
    }
    let to = ((from / BLOCK + 1) * BLOCK).min(hi);
    col.search_block(from, to, v, right)
}

/// Events of stream s (the sorted range [starts[s], ends[s])) per bin of `edges`:
/// `crate::analysis::density::binned_counts` over a packed column: the window [edges[0],
/// edges[last]) of each stream by two searches, then a search per edge (block bisection
/// and at most STEP codes) when the window is long, else one decode of the window.
pub fn binned_counts(col: &dyn Read, starts: &[i64], ends: &[i64], edges: &[i64]) -> Result<Vec<i64>, String> {
    let bins = crate::analysis::density::check_bins(col.len(), starts, ends, edges)?;
    Ok(crate::analysis::density::per_stream(starts.len(), bins, |s, row| {
        let (a, b) = (starts[s] as usize, ends[s] as usize);
        let lo = search(col, a, b, edges[0], false);
        let hi = search(col, lo, b, edges[bins], false);
        if hi - lo <= STEP / 2 * bins {
            // Few rows per edge: decoding the window once costs less than a search per edge
            // (each ends in a scan of up to STEP codes).
            let (mut vals, mut valid) = (Vec::with_capacity(hi - lo), Vec::new());
            col.decode(lo, hi, &mut vals, &mut valid);
            let mut prev = 0;
            for (k, slot) in row.iter_mut().enumerate() {
                let next = prev + vals[prev..].partition_point(|&x| x < edges[k + 1]);
                *slot = (next - prev) as i64;
                prev = next;
            }
            return;
        }
        // Edges are sorted: each search starts where the previous one ended.
        let mut prev = lo;
        for (k, slot) in row.iter_mut().enumerate() {
            let next = search(col, prev, hi, edges[k + 1], false);
            *slot = (next - prev) as i64;
            prev = next;
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(values: &[i64], valid: &[bool], nullable: bool) {
        let e = encode(values, valid, nullable).unwrap();
        let p = Packed::new(&e.data, &e.offsets, &e.base, &e.bits, values.len(), nullable).unwrap();
        for (i, &v) in values.iter().enumerate() {
            let want = if valid.is_empty() || valid[i] { Some(v) } else { None };
            assert_eq!(p.get(i), want, "value {i}");
        }
        let (mut out, mut ok) = (Vec::new(), Vec::new());
        p.decode(0, values.len(), &mut out, &mut ok);
        for (i, &v) in values.iter().enumerate() {
            if valid.is_empty() || valid[i] {
                assert_eq!(out[i], v);
            }
        }
    }

    #[test]
    fn packed_roundtrip_every_width_and_nulls() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for w in 0..=64u32 {
            let vals: Vec<i64> = (0..3000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let m = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
                    ((x & m) as i64).wrapping_add(-5)
                })
                .collect();
            roundtrip(&vals, &[], false);
            if w < 64 {
                let valid: Vec<bool> = (0..vals.len()).map(|i| i % 7 != 3).collect();
                roundtrip(&vals, &valid, true);
            }
        }
        roundtrip(&[], &[], false);
        roundtrip(&[i64::MIN, i64::MAX, 0], &[], false);
        roundtrip(&[5; 2049], &[], false);
        roundtrip(&[1, 2], &[false, false], true);
    }

    #[test]
    fn packed_search_equals_partition_point() {
        let vals: Vec<i64> = (0..5000i64).map(|i| i / 3 * 7 - 900).collect();
        let e = encode(&vals, &[], false).unwrap();
        let p = Packed::new(&e.data, &e.offsets, &e.base, &e.bits, vals.len(), false).unwrap();
        for v in [-1000, -900, -899, 0, 7, 8, 11662, 20000] {
            for (lo, hi) in [(0, 5000), (100, 4000), (1023, 1025), (7, 7)] {
                let s = &vals[lo..hi];
                assert_eq!(p.search(lo, hi, v, false), lo + s.partition_point(|&x| x < v));
                assert_eq!(p.search(lo, hi, v, true), lo + s.partition_point(|&x| x <= v));
            }
        }
        let c = binned_counts(&p, &[0, 10], &[5000, 20], &[-900, 0, 100, 30000]).unwrap();
        let count = |a: usize, b: usize, l: i64, h: i64| vals[a..b].iter().filter(|&&x| l <= x && x < h).count() as i64;
        assert_eq!(
            c,
            vec![
                count(0, 5000, -900, 0),
                count(0, 5000, 0, 100),
                count(0, 5000, 100, 30000),
                count(10, 20, -900, 0),
                count(10, 20, 0, 100),
                count(10, 20, 100, 30000)
            ]
        );
    }

    #[test]
    fn packed_delta_blocks_chosen_for_sorted_values() {
        let vals: Vec<i64> = (0..5000i64).map(|i| 1_000_000_000 + i * 997 + (i * 7919) % 13).collect();
        let e = encode(&vals, &[], false).unwrap();
        assert!(e.bits.iter().all(|b| b & DELTA != 0));
        roundtrip(&vals, &[], false);
        let desc: Vec<i64> = vals.iter().rev().copied().collect();
        roundtrip(&desc, &[], false);
        roundtrip(&[i64::MAX, i64::MIN, i64::MAX, 0, -1], &[], false);
    }

    #[test]
    fn packed_relative_column_reads_the_sum() {
        let ts: Vec<i64> = (0..3000i64).map(|i| i * 10).collect();
        let end: Vec<i64> = (0..3000i64).map(|i| i * 10 + 5 + i % 3).collect();
        let diff: Vec<i64> = end.iter().zip(&ts).map(|(e, t)| e - t).collect();
        let (et, ed) = (encode(&ts, &[], false).unwrap(), encode(&diff, &[], false).unwrap());
        let pt = Packed::new(&et.data, &et.offsets, &et.base, &et.bits, ts.len(), false).unwrap();
        let pd = Packed::new(&ed.data, &ed.offsets, &ed.base, &ed.bits, ts.len(), false).unwrap();
        let rel = Rel { diff: &pd, base: &pt };
        for i in [0, 1, 1023, 1024, 2999] {
            assert_eq!(rel.get(i), Some(end[i]));
        }
        for v in [0, 5, 6, 7, 15000, 29997, 40000] {
            assert_eq!(search(&rel, 0, 3000, v, false), end.partition_point(|&x| x < v));
            assert_eq!(search(&rel, 10, 2000, v, true), 10 + end[10..2000].partition_point(|&x| x <= v));
        }
    }

    #[test]
    fn packed_sparse_blocks_for_mostly_null_or_minimum_values() {
        // Span arguments: mostly null (code 0) -> sparse blocks, smaller than one code a row.
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let vals: Vec<i64> = (0..5000).map(|_| (rnd() % 10_000) as i64 + 1).collect();
        let valid: Vec<bool> = (0..5000).map(|_| rnd() % 5 == 0).collect();
        let e = encode(&vals, &valid, true).unwrap();
        assert!(e.bits.iter().all(|&b| b > SPARSE && b & DELTA == 0), "{:?}", e.bits);
        let dense = (5000 * 14) / 8;
        assert!(e.data.len() < dense / 2, "{} bytes vs {dense} a code a row", e.data.len());
        roundtrip(&vals, &valid, true);
        let p = Packed::new(&e.data, &e.offsets, &e.base, &e.bits, vals.len(), true).unwrap();
        for (a, b) in [(0, 5000), (3, 70), (1000, 1100), (1023, 2049), (4990, 5000)] {
            let (mut out, mut ok) = (Vec::new(), Vec::new());
            p.decode(a, b, &mut out, &mut ok);
            for i in a..b {
                assert_eq!(ok[i - a], valid[i], "row {i}");
                if valid[i] {
                    assert_eq!(out[i - a], vals[i], "row {i}");
                }
            }
        }
        // Not nullable: most values at the block's minimum (a leaf's self time = its duration).
        let vals: Vec<i64> = (0..3000).map(|_| if rnd() % 4 == 0 { 7 + (rnd() % 100_000) as i64 } else { 7 }).collect();
        let e = encode(&vals, &[], false).unwrap();
        assert!(e.bits.iter().any(|&b| b > SPARSE));
        roundtrip(&vals, &[], false);
        // A sparse block whose bitmap claims more codes than it holds is rejected.
        let mut bad = encode(&vals, &[], false).unwrap();
        let end = bad.offsets[1] as usize;
        bad.data.truncate(end - 16);
        for o in bad.offsets.iter_mut().skip(1) {
            *o = (*o).min(bad.data.len() as i64);
        }
        assert!(Packed::new(&bad.data, &bad.offsets, &bad.base, &bad.bits, vals.len(), false).is_err());
    }

    #[test]
    fn packed_rejects_malformed_parts() {
        let e = encode(&[1, 2, 3], &[], false).unwrap();
        assert!(Packed::new(&e.data, &e.offsets, &e.base, &e.bits, 2000, false).is_err());
        assert!(Packed::new(&e.data[..2], &e.offsets, &e.base, &e.bits, 3, false).is_err());
    }
}
