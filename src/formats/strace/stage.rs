//! The first stage of a line: what it says on its own, before any state is involved (the split
//! and, for a complete call, its parsed arguments and result), and the `<unfinished ...>` /
//! `<... resumed>` pairs the second thread joins when it sees both halves (`PreJoin`, its bytes
//! in a `JoinArena`).

use super::*;

/// What a line says on its own, before any state is involved (stage A): the split,
/// and for a complete call its parsed arguments and result. Computed for a part of
/// each chunk by a second thread (see `feed_single`). Not boxed: one allocation per
/// line would cost more than the moves of a large variant.
#[allow(clippy::large_enum_variant)]
pub(super) enum Pre<'a> {
    /// Empty or only blanks.
    Blank,
    Line {
        text: &'a [u8],
        head: Result<(line::Prefix, Body<'a>), &'static str>,
        /// A complete call's arguments and result; for a `<... resumed>` line with `from` set,
        /// those of the pair joined (see `PreJoin`).
        call: Option<Result<Call<'a>, &'static str>>,
        /// For a resumed line joined by `PreJoin`: the address of the partial arguments joined.
        from: usize,
    },
}

/// Stage A of one line (no newline).
#[inline]
pub(super) fn pre(text: &[u8]) -> Pre<'_> {
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    if text.first().is_none_or(|&b| b == b' ' || b == b'\t') && text.iter().all(|&b| b == b' ' || b == b'\t') {
        return Pre::Blank;
    }
    let head = split_line(text);
    let call = match &head {
        Ok((_, Body::Call { tail, .. })) => Some(parse_call(tail)),
        _ => None,
    };
    Pre::Line { text, head, call, from: 0 }
}

/// [`pre`] written in place into `slot` (the second thread's vector of parts): a `Pre` is a
/// few hundred bytes, and building it aside then moving it into the vector copied it twice.
/// callgrind, first 300K lines of the many-process log (`examples/strace_speed.rs`): the whole
/// parse 614.6M -> 570.1M instructions, the second thread's memcpy 42M -> 0.
#[inline]
pub(super) fn pre_into<'a, 's>(text: &'a [u8], slot: &'s mut Option<Pre<'a>>) -> &'s mut Pre<'a> {
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    if text.first().is_none_or(|&b| b == b' ' || b == b'\t') && text.iter().all(|&b| b == b' ' || b == b'\t') {
        return slot.insert(Pre::Blank);
    }
    let x = slot.insert(Pre::Line { text, head: split_line(text), call: None, from: 0 });
    if let Pre::Line { head: Ok((_, Body::Call { tail, .. })), call, .. } = x {
        let tail = *tail;
        *call = Some(parse_call(tail));
    }
    x
}

/// Stage A of `<unfinished ...>` / `<... resumed>` pairs, on the second thread: nearly every
/// line of a log of many busy threads is half of a pair, and joining and parsing the halves was
/// the main thread's biggest item (parse_call 12 % and the copies of the join). The second thread
/// follows each tid's last unfinished call over its lines and, for a resumption of the same name,
/// parses the joined text there. Stage B uses that only when its own pending call for the thread
/// holds the same partial arguments (same address in this chunk, see `Pending::from`): what it
/// would parse is then byte for byte what was parsed, so the rows cannot differ; any other case
/// (the unfinished line in another chunk or in the first tenth, a reject in between) is joined
/// by stage B as before. Measured with callgrind on the first 300K lines of the many-process log
/// (`bench import --format strace-procs`): the main thread 929M -> 792M instructions (the parse's
/// share of it about -20 %), the second thread 162M -> 310M, the whole +1 %.
pub(super) struct PreJoin<'a> {
    /// (tid, name, partial arguments) of a tid's last `<unfinished ...>` line, at `tid % OPEN`.
    /// Direct-mapped: two tids on one slot only lose a join (the main thread then joins), and
    /// it costs a few instructions a line where a hash map cost ~0.1 CPU-s over 3M lines
    /// (callgrind: hashbrown insert 10.7M instructions per 300K lines).
    open: Vec<(u32, &'a [u8], &'a [u8])>,
    /// The tid of lines without a pid column.
    src_pid: Option<u32>,
}

/// Slots of [`PreJoin::open`] (a power of two).
pub(super) const OPEN: usize = 4096;

impl<'a> PreJoin<'a> {
    pub(super) fn new(src_pid: Option<u32>) -> Self {
        PreJoin { open: vec![(u32::MAX, &[][..], &[][..]); OPEN], src_pid }
    }

    /// Follows the pairs over one more line; joins and parses a resumption it can pair.
    pub(super) fn see(&mut self, x: &mut Pre<'a>, arena: &mut JoinArena) {
        let Pre::Line { head: Ok((prefix, body)), call, from, .. } = x else { return };
        if prefix.stamp == Stamp::None {
            return; // rejected by stage B before any state changes
        }
        let tid = prefix.pid.or(self.src_pid).unwrap_or(0);
        let slot = &mut self.open[tid as usize & (OPEN - 1)];
        match *body {
            Body::Unfinished { name, partial } => {
                *slot = (tid, name, partial);
            }
            Body::Call { .. } | Body::Exit(_) => {
                if slot.0 == tid {
                    slot.0 = u32::MAX;
                }
            }
            Body::Resumed { name, tail } => {
                if slot.0 == tid {
                    slot.0 = u32::MAX;
                    let (_, n, partial) = *slot;
                    if n == name {
                        let tail = tail.strip_prefix(b" <unfinished ...>").unwrap_or(tail);
                        let joined = arena.join(partial, tail);
                        *call = Some(parse_call(joined));
                        *from = partial.as_ptr() as usize;
                    }
                }
            }
            Body::Signal(_) | Body::Note => {}
        }
    }
}

/// Bytes of the pairs joined in one part, in blocks that never grow past their capacity, so a
/// joined text never moves while calls parsed from it are alive.
#[derive(Default)]
pub(super) struct JoinArena {
    blocks: Vec<Vec<u8>>,
}

/// Bytes per block of a [`JoinArena`].
pub(super) const JOIN_BLOCK: usize = 64 << 10;

/// Parts' buffers kept between chunks.
pub(super) const SPARE: usize = 4;

/// One part of the second thread's stage A: its lines (None: overlong) and the pairs it joined.
#[derive(Default)]
pub(super) struct Spare<'a> {
    pub(super) pres: Vec<Option<Pre<'a>>>,
    pub(super) arena: JoinArena,
}

impl Spare<'_> {
    /// The same (emptied) buffers, for lines of another lifetime: the vector's allocation is
    /// kept (an in-place collect of no element: same layout, so the same buffer).
    pub(super) fn relive<'b>(self) -> Spare<'b> {
        let Spare { mut pres, arena } = self;
        pres.clear();
        Spare { pres: pres.into_iter().map(|_| None).collect(), arena }
    }
}

impl JoinArena {
    /// Forgets every join (no `Pre` borrowing them may be alive); keeps one block.
    pub(super) fn reset(&mut self) {
        self.blocks.truncate(1);
        if let Some(b) = self.blocks.first_mut() {
            b.clear();
        }
    }

    /// `a` then `b`, copied into the arena; valid as long as the arena (see `PreJoin`).
    pub(super) fn join<'x>(&mut self, a: &[u8], b: &[u8]) -> &'x [u8] {
        let n = a.len() + b.len();
        let fits = self.blocks.last().is_some_and(|v| v.capacity() - v.len() >= n);
        if !fits {
            self.blocks.push(Vec::with_capacity(n.max(JOIN_BLOCK)));
        }
        let block = self.blocks.last_mut().expect("a block");
        let start = block.len();
        block.extend_from_slice(a); // within capacity: the block does not move
        block.extend_from_slice(b);
        // SAFETY: the bytes are in a block's heap allocation, which never reallocates (only
        // appended within its capacity) and is freed only when the arena drops; the caller
        // keeps every `Pre` borrowing them in the same message as the arena and drops them first.
        unsafe { std::slice::from_raw_parts(block.as_ptr().add(start), n) }
    }
}
