//! The strace line grammar: the prefix (pid column, timestamp) and the body of a line.
//!
//! Owns turning one line (no newline) into borrowed pieces, with no allocation:
//!
//! ```text
//! [pid N] | N  TIMESTAMP [ [ip] ] [ [nr] ]  BODY
//! BODY = name(ARGS) = RET [ERRNO (message)] [(decoration)] [<DURATION>]
//!      | name(ARGS_START <unfinished ...>
//!      | <... name resumed>ARGS_END) = RET ...
//!      | --- SIGNAL {siginfo} ---   | --- stopped by SIGSTOP ---
//!      | +++ exited with N +++      | +++ killed by SIG [(core dumped)] +++
//! ```
//!
//! The argument scanner is the hot loop: it tracks quotes (with backslash escapes),
//! bracket depth and `-y` annotations (`3</path>`, in which strace escapes `<`, `>`
//! and `\` as octal or `\\`), so a path or string holding `) = ` or `,` never ends
//! an argument early. Bytes that cannot start or end anything are skipped by a table
//! lookup.
//!
//! Over 600 lines: one line grammar (prefixes, calls, arguments with their escapes,
//! results, signals, exits) read by one scanner.

/// Most arguments split out of one call (the typed syscalls need at most 6).
pub(super) const MAX_ARGS: usize = 8;

/// A line's timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stamp {
    /// No timestamp column (strace without -t/-tt/-ttt).
    None,
    /// Seconds since the epoch (`-ttt`, `--timestamps=unix`), in ns.
    Epoch(i64),
    /// Time of day (`-t`, `-tt`, `--timestamps=time`), in ns since midnight.
    Tod(i64),
}

/// What precedes the body of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Prefix {
    /// The pid column (`-f` to a file: `N `; to stderr: `[pid N] `), if present.
    pub pid: Option<u32>,
    /// The timestamp column.
    pub stamp: Stamp,
}

/// The body of a line, borrowed from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Body<'a> {
    /// `name(` and everything after it.
    Call { name: &'a [u8], tail: &'a [u8] },
    /// `name(` and the arguments printed before ` <unfinished ...>`.
    Unfinished { name: &'a [u8], partial: &'a [u8] },
    /// `<... name resumed>` and everything after it.
    Resumed { name: &'a [u8], tail: &'a [u8] },
    /// `--- X ---`: the text between the markers.
    Signal(&'a [u8]),
    /// `+++ X +++`: the text between the markers.
    Exit(&'a [u8]),
    /// A message of strace itself (`strace: Process N attached`), not an event.
    Note,
}

/// Longest syscall name accepted (the longest real one has 26 characters).
pub(super) const MAX_NAME: usize = 64;

const UNFINISHED: &[u8] = b" <unfinished ...>";

/// Splits a line into its prefix and body. `Err` holds the reason the line is rejected.
///
/// One forward pass: the digits of the pid and the timestamp are read eight at a time.
pub(super) fn split_line(line: &[u8]) -> Result<(Prefix, Body<'_>), &'static str> {
    let n = line.len();
    let mut i;
    let mut pid = None;
    if let Some(rest) = line.strip_prefix(b"[pid") {
        let rest = trim_start(rest);
        let (v, used) = parse_u64(rest).ok_or("expected a pid after '[pid'")?;
        let rest = &rest[used..];
        let rest = rest.strip_prefix(b"]").ok_or("expected ']' after the pid")?;
        pid = Some(u32::try_from(v).map_err(|_| "pid out of range")?);
        i = n - rest.len();
    } else {
        // A pid column is an all-digit token followed by a space; a timestamp token
        // always holds '.' or ':'.
        let (v, k) = lead_digits(line, 0);
        if k > 0 && line.get(k) == Some(&b' ') {
            pid = Some(v.and_then(|v| u32::try_from(v).ok()).ok_or("pid out of range")?);
            i = k;
        } else {
            i = 0;
            if k == 0 && line.starts_with(b"strace:") {
                return Ok((Prefix { pid: None, stamp: Stamp::None }, Body::Note));
            }
        }
    }
    // Timestamp column (-r relative stamps and -t padding may start with spaces).
    while i < n && line[i] == b' ' {
        i += 1;
    }
    let mut stamp = Stamp::None;
    if let Some((ts, next)) = epoch_10_6(line, i) {
        // The common -ttt stamp, read in three word-sized steps.
        stamp = Stamp::Epoch(ts);
        i = next;
        while i < n && line[i] == b' ' {
            i += 1;
        }
    } else if let (secs, k @ 1..) = lead_digits(line, i) {
        let end = match line[i + k..].iter().position(|&b| b == b' ') {
            Some(e) => i + k + e,
            None => return Err("expected a syscall after the timestamp"),
        };
        let tok = &line[i..end];
        stamp = match line[i + k] {
            b'.' => Stamp::Epoch(epoch(secs, &line[i + k + 1..end]).ok_or("bad timestamp")?),
            b':' => Stamp::Tod(parse_tod(tok).ok_or("bad time-of-day timestamp")?),
            b' ' => Stamp::Epoch(
                secs.and_then(|s| i64::try_from(s).ok()?.checked_mul(1_000_000_000)).ok_or("bad timestamp")?,
            ),
            _ => return Err("bad timestamp"),
        };
        i = end;
        while i < n && line[i] == b' ' {
            i += 1;
        }
    }
    let mut s = &line[i..];
    // -i ([instruction pointer]) and -n ([syscall number]) columns.
    while s.first() == Some(&b'[') {
        let end = s.iter().position(|&b| b == b']').ok_or("unterminated '[' column")?;
        s = trim_start(&s[end + 1..]);
    }
    let prefix = Prefix { pid, stamp };
    // The name of a call, up to its '('.
    let k = s.iter().take_while(|&&b| is_name_byte(b)).count();
    if k > 0 && s.get(k) == Some(&b'(') {
        if k > MAX_NAME {
            return Err("syscall name too long");
        }
        let name = &s[..k];
        let tail = &s[k + 1..];
        let body = match tail.strip_suffix(UNFINISHED) {
            Some(partial) => Body::Unfinished { name, partial },
            None => Body::Call { name, tail },
        };
        return Ok((prefix, body));
    }
    let body = if let Some(rest) = s.strip_prefix(b"<... ") {
        let k = rest.iter().take_while(|&&b| is_name_byte(b)).count();
        let tail = rest[k..].strip_prefix(b" resumed>").ok_or("expected '<... NAME resumed>'")?;
        if k == 0 {
            return Err("expected '<... NAME resumed>'");
        }
        if k > MAX_NAME {
            return Err("syscall name too long");
        }
        Body::Resumed { name: &rest[..k], tail }
    } else if let Some(rest) = s.strip_prefix(b"--- ") {
        Body::Signal(rest.strip_suffix(b" ---").ok_or("expected ' ---' at the end of a signal line")?)
    } else if let Some(rest) = s.strip_prefix(b"+++ ") {
        Body::Exit(rest.strip_suffix(b" +++").ok_or("expected ' +++' at the end of an exit line")?)
    } else if k > MAX_NAME && s.get(k) == Some(&b'(') {
        return Err("syscall name too long");
    } else {
        return Err("not a syscall, signal or exit line");
    };
    Ok((prefix, body))
}

/// Bytes of a syscall name: letters, digits, `_` and `?` (strace's `???`).
static NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'?';
        b += 1;
    }
    t
};

#[inline(always)]
fn is_name_byte(b: u8) -> bool {
    NAME_BYTE[b as usize]
}

/// `-ttt`'s `SSSSSSSSSS.UUUUUU ` (10 + 6 digits, then a space) at `line[i..]` as ns, and
/// the index of that space; None for any other shape (the general path reads it).
#[inline(always)]
fn epoch_10_6(line: &[u8], i: usize) -> Option<(i64, usize)> {
    let t = line.get(i..i + 18)?;
    if t[10] != b'.' || t[17] != b' ' {
        return None;
    }
    let w0 = u64::from_le_bytes(t[0..8].try_into().expect("8 bytes"));
    let (a, b) = (t[8].wrapping_sub(b'0'), t[9].wrapping_sub(b'0'));
    if leading_digit_bytes(w0) != 8 || a > 9 || b > 9 {
        return None;
    }
    // Fraction: "UUUUUU" at 11..17, as the top six of eight digits with two '0's below.
    let f = u64::from_le_bytes([b'0', b'0', t[11], t[12], t[13], t[14], t[15], t[16]]);
    if leading_digit_bytes(f) != 8 {
        return None;
    }
    let secs = eight_digits(w0) * 100 + (a as u64) * 10 + b as u64;
    let ns = (secs as i64).checked_mul(1_000_000_000)? + eight_digits(f) as i64 * 1_000;
    Some((ns, i + 17))
}

/// ` <S.UUUUUU>` (`-T` in microseconds, under 10 s) at the end of `r`, as ns.
#[inline(always)]
fn dur_1_6(r: &[u8]) -> Option<i64> {
    let t = r.get(r.len().checked_sub(11)?..)?;
    if t[0] != b' ' || t[1] != b'<' || t[3] != b'.' || t[10] != b'>' {
        return None;
    }
    let s = t[2].wrapping_sub(b'0');
    let f = u64::from_le_bytes([b'0', b'0', t[4], t[5], t[6], t[7], t[8], t[9]]);
    if s > 9 || leading_digit_bytes(f) != 8 {
        return None;
    }
    Some(s as i64 * 1_000_000_000 + eight_digits(f) as i64 * 1_000)
}

/// `secs` seconds plus the fraction digits `frac` (any number, kept to ns) as ns.
#[inline]
fn epoch(secs: Option<u64>, frac: &[u8]) -> Option<i64> {
    let ns = i64::try_from(secs?).ok()?.checked_mul(1_000_000_000)?;
    let (f, k) = lead_digits(frac, 0);
    if k == 0 || k != frac.len() {
        return None;
    }
    let f = if k <= 9 {
        f? as i64 * POW10[9 - k]
    } else {
        // More than ns precision: keep the first nine digits.
        lead_digits(&frac[..9], 0).0? as i64
    };
    ns.checked_add(f)
}

const POW10: [i64; 10] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000];

/// The decimal digits at the start of `s[i..]`: their value (None past 19 digits, where
/// a u64 may overflow) and how many there are. Reads eight bytes at a time when it can.
#[inline(always)]
pub(super) fn lead_digits(s: &[u8], mut i: usize) -> (Option<u64>, usize) {
    let start = i;
    let mut v: u64 = 0;
    let mut ok = true;
    while i + 8 <= s.len() {
        let w = u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
        let k = leading_digit_bytes(w);
        if k == 0 {
            break;
        }
        // Shift the k digits to the most significant end; the bytes below become '0's.
        let w = if k == 8 { w } else { (w << (8 * (8 - k))) | (0x3030_3030_3030_3030 >> (8 * k)) };
        let x = eight_digits(w);
        match v.checked_mul(POW10[k] as u64).and_then(|v| v.checked_add(x)) {
            Some(n) => v = n,
            None => ok = false,
        }
        i += k;
        if k < 8 {
            return (ok.then_some(v), i - start);
        }
    }
    while i < s.len() && s[i].is_ascii_digit() {
        match v.checked_mul(10).and_then(|v| v.checked_add((s[i] - b'0') as u64)) {
            Some(n) => v = n,
            None => ok = false,
        }
        i += 1;
    }
    (ok.then_some(v), i - start)
}

/// How many of the eight bytes of `w` (first byte lowest) are ASCII digits before the
/// first one that is not.
#[inline(always)]
fn leading_digit_bytes(w: u64) -> usize {
    const HI: u64 = 0x8080_8080_8080_8080;
    let lo = w & 0x7F7F_7F7F_7F7F_7F7F;
    // Per byte, no carries across bytes: high bit set when the byte is >= 0x3A, <= 0x2F,
    // or not ASCII.
    let above = lo.wrapping_add(0x4646_4646_4646_4646);
    let below = 0xAFAF_AFAF_AFAF_AFAF_u64.wrapping_sub(lo);
    let bad = (above | below | w) & HI;
    (bad.trailing_zeros() / 8) as usize
}

/// Eight ASCII digits (first byte lowest = most significant) as a number.
#[inline(always)]
fn eight_digits(w: u64) -> u64 {
    let v = w.wrapping_sub(0x3030_3030_3030_3030);
    let v = (v.wrapping_mul(10).wrapping_add(v >> 8)) & 0x00FF_00FF_00FF_00FF;
    let v = (v.wrapping_mul(100).wrapping_add(v >> 16)) & 0x0000_FFFF_0000_FFFF;
    (v.wrapping_mul(10_000).wrapping_add(v >> 32)) & 0xFFFF_FFFF
}

/// A call's arguments and result, borrowed from its text.
#[derive(Clone, Copy, Debug)]
pub(super) struct Call<'a> {
    /// The top-level arguments (the first [`MAX_ARGS`]; the last one holds any rest).
    pub args: [&'a [u8]; MAX_ARGS],
    /// How many of `args` are set.
    pub nargs: usize,
    /// Every argument as printed, between the parentheses.
    pub raw_args: &'a [u8],
    /// The return value; `None` for `= ?`.
    pub ret: Option<i64>,
    /// The `-y` annotation of a returned fd (`= 3</path>`), still escaped.
    pub ret_path: Option<&'a [u8]>,
    /// The errno name of a failed call (`ENOENT`).
    pub errno: Option<&'a [u8]>,
    /// The `-T` time spent in the call, in ns.
    pub dur: Option<i64>,
}

/// Byte classes of the argument scanner: 0 ordinary, else the byte itself matters.
static SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let s = b"\"()[]{}<,";
    let mut i = 0;
    while i < s.len() {
        t[s[i] as usize] = true;
        i += 1;
    }
    t
};

/// Parses what follows `name(`: the arguments up to the matching `)`, then `= RET`,
/// an errno, decorations and the `-T` duration.
pub(super) fn parse_call(tail: &[u8]) -> Result<Call<'_>, &'static str> {
    let n = tail.len();
    let mut args: [&[u8]; MAX_ARGS] = [&[]; MAX_ARGS];
    let mut nargs = 0;
    let mut depth: u32 = 0;
    let mut start = 0;
    let mut i = 0;
    let close = loop {
        while i < n && !SPECIAL[tail[i] as usize] {
            i += 1;
        }
        if i >= n {
            return Err("no ')' closing the arguments (truncated line?)");
        }
        match tail[i] {
            b'"' => i = skip_string(tail, i + 1).ok_or("unterminated string argument")?,
            b'(' | b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b')' => {
                if depth == 0 {
                    break i;
                }
                depth -= 1;
                i += 1;
            }
            b'<' => {
                // A -y annotation follows an fd number or AT_FDCWD; any other '<' is text.
                if i > 0 && (tail[i - 1].is_ascii_digit() || tail[i - 1] == b'D') {
                    i = skip_angle(tail, i + 1).ok_or("unterminated '<' fd annotation")?;
                } else {
                    i += 1;
                }
            }
            _ => {
                // ','
                if depth == 0 && nargs + 1 < MAX_ARGS {
                    args[nargs] = trim(&tail[start..i]);
                    nargs += 1;
                    start = i + 1;
                }
                i += 1;
            }
        }
    };
    let raw_args = &tail[..close];
    let last = trim(&tail[start..close]);
    if nargs > 0 || !last.is_empty() {
        args[nargs] = last;
        nargs += 1;
    }
    let mut call = Call { args, nargs, raw_args, ret: None, ret_path: None, errno: None, dur: None };
    // `= RET`, padded with spaces to a column.
    let mut r = trim_start(&tail[close + 1..]);
    r = r.strip_prefix(b"=").ok_or("expected '= RESULT' after the arguments")?;
    r = trim_start(r);
    // -T: `<seconds>` at the very end; ` <S.UUUUUU>` (microseconds, under 10 s) first.
    if let Some(d) = dur_1_6(r) {
        call.dur = Some(d);
        r = trim_end(&r[..r.len() - 11]);
    } else if let Some(body) = r.strip_suffix(b">") {
        if let Some(lt) = body.iter().rposition(|&b| b == b'<') {
            let inner = &body[lt + 1..];
            if inner.first().is_some_and(u8::is_ascii_digit) && (lt == 0 || body[lt - 1] == b' ') {
                call.dur = Some(parse_seconds(inner).ok_or("bad -T duration")?);
                r = trim_end(&body[..lt]);
            }
        }
    }
    if let Some(rest) = r.strip_prefix(b"?") {
        r = trim_start(rest);
    } else {
        let (v, used) = parse_int(r).ok_or("expected a number or '?' as the result")?;
        call.ret = Some(v);
        r = &r[used..];
        if r.first() == Some(&b'<') {
            let end = skip_angle(r, 1).ok_or("unterminated '<' after the result")?;
            call.ret_path = Some(&r[1..end - 1]);
            r = &r[end..];
        }
        r = trim_start(r);
    }
    // ERRNO (message), only after -1 or ?.
    if call.ret.is_none_or(|v| v < 0) {
        let len = r.iter().take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || **b == b'_').count();
        if len > 1 && r[0] == b'E' {
            call.errno = Some(&r[..len]);
        }
    }
    Ok(call)
}

/// Index just past the closing quote of a string starting at `i` (after its `"`).
#[inline]
fn skip_string(s: &[u8], mut i: usize) -> Option<usize> {
    if s.get(i) == Some(&b'"') {
        return Some(i + 1); // `""`: every buffer under -s0
    }
    loop {
        let j = memchr::memchr2(b'"', b'\\', &s[i..])? + i;
        if s[j] == b'\\' {
            i = j + 2;
            if i > s.len() {
                return None;
            }
        } else {
            return Some(j + 1);
        }
    }
}

/// Index just past the `>` closing an fd annotation starting at `i` (after its `<`).
/// `>` inside `[...]` (`-yy` sockets: `TCP:[1.2.3.4:5->6.7.8.9:10]`) does not close it.
#[inline]
fn skip_angle(s: &[u8], mut i: usize) -> Option<usize> {
    // Paths (the usual case) hold no '[': the first '>' closes them.
    let gt = memchr::memchr(b'>', &s[i..])? + i;
    if !s[i..gt].contains(&b'[') {
        return Some(gt + 1);
    }
    let mut brackets = 0u32;
    while i < s.len() {
        match s[i] {
            b'[' => brackets += 1,
            b']' => brackets = brackets.saturating_sub(1),
            b'>' if brackets == 0 => return Some(i + 1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// An fd argument: its number (`AT_FDCWD` is -100) and its `-y` path, still escaped.
pub(super) fn parse_fd(arg: &[u8]) -> (Option<i64>, Option<&[u8]>) {
    let (v, used) = if let Some(rest) = arg.strip_prefix(b"AT_FDCWD") {
        (Some(-100), arg.len() - rest.len())
    } else {
        match parse_int(arg) {
            Some((v, used)) => (Some(v), used),
            None => return (None, None),
        }
    };
    let rest = &arg[used..];
    if rest.len() >= 2 && rest[0] == b'<' && rest[rest.len() - 1] == b'>' {
        (v, Some(&rest[1..rest.len() - 1]))
    } else {
        (v, None)
    }
}

/// The whole argument as an integer (decimal, negative, hex; `NULL` is 0), or None.
pub(super) fn arg_int(arg: &[u8]) -> Option<i64> {
    if arg == b"NULL" {
        return Some(0);
    }
    match parse_int(arg) {
        Some((v, used)) if used == arg.len() => Some(v),
        // `[1024]` (an in/out pointer to a number, e.g. sendfile's offset)
        _ => None,
    }
}

/// An in/out pointer to an offset (`off_in` of copy_file_range and splice, sendfile's
/// `offset`): None for `NULL` (the call uses and advances the fd's file position),
/// `Some(value at entry)` otherwise (`[N]`, or `[N] => [M]` as sendfile prints it on exit;
/// `Some(None)` when strace could not read it and printed an address).
pub(super) fn offset_ptr(arg: &[u8]) -> Option<Option<i64>> {
    if arg == b"NULL" {
        return None;
    }
    let inner = arg.strip_prefix(b"[").and_then(|r| {
        let end = r.iter().position(|&b| b == b']')?;
        Some(&r[..end])
    });
    Some(inner.and_then(|v| match parse_int(v) {
        Some((n, used)) if used == v.len() => Some(n),
        _ => None,
    }))
}

/// A leading integer: decimal (optionally negative) or `0x` hex; its value and length.
/// Hex values above i64::MAX wrap (addresses), decimals that overflow are None.
pub(super) fn parse_int(s: &[u8]) -> Option<(i64, usize)> {
    if s.len() > 2 && s[0] == b'0' && (s[1] == b'x' || s[1] == b'X') {
        let mut v: u64 = 0;
        let mut i = 2;
        while i < s.len() {
            let d = match s[i] {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            v = v.checked_mul(16)?.checked_add(d as u64)?;
            i += 1;
        }
        return if i > 2 { Some((v as i64, i)) } else { None };
    }
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let (v, used) = parse_u64(digits)?;
    let v = if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        (v as i64).wrapping_neg()
    } else {
        i64::try_from(v).ok()?
    };
    Some((v, used + neg as usize))
}

/// Leading decimal digits as u64 (None when there are none or they overflow).
#[inline]
pub(super) fn parse_u64(s: &[u8]) -> Option<(u64, usize)> {
    // Results and sizes are short: a plain loop beats the word-at-a-time one here.
    let mut v: u64 = 0;
    let mut i = 0;
    while i < s.len() {
        let d = s[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = if i < 18 { v * 10 + d as u64 } else { v.checked_mul(10)?.checked_add(d as u64)? };
        i += 1;
    }
    if i == 0 {
        None
    } else {
        Some((v, i))
    }
}

/// `SECONDS[.FRACTION]` (any number of fraction digits, kept to ns) as ns.
#[inline]
pub(super) fn parse_seconds(tok: &[u8]) -> Option<i64> {
    let (secs, k) = lead_digits(tok, 0);
    if k == 0 {
        return None;
    }
    match tok.get(k) {
        None => i64::try_from(secs?).ok()?.checked_mul(1_000_000_000),
        Some(b'.') => epoch(secs, &tok[k + 1..]),
        Some(_) => None,
    }
}

/// `HH:MM:SS[.FRACTION]` as ns since midnight.
pub(super) fn parse_tod(tok: &[u8]) -> Option<i64> {
    if tok.len() < 8 || tok[2] != b':' || tok[5] != b':' {
        return None;
    }
    let two = |a: u8, b: u8| -> Option<i64> {
        if a.is_ascii_digit() && b.is_ascii_digit() {
            Some(((a - b'0') * 10 + (b - b'0')) as i64)
        } else {
            None
        }
    };
    let (h, m) = (two(tok[0], tok[1])?, two(tok[3], tok[4])?);
    if h > 23 || m > 59 {
        return None;
    }
    let s = parse_seconds(&tok[6..])?;
    if s >= 61_000_000_000 || !tok[6].is_ascii_digit() || !tok[7].is_ascii_digit() {
        return None;
    }
    Some((h * 3600 + m * 60) * 1_000_000_000 + s)
}

/// strace's escaped text (a quoted string's inside or a `-y` path) unescaped into `out`.
/// Returns false (leaving `out` as it was) when the result is not valid UTF-8, so the
/// caller can keep the escaped form instead.
pub(super) fn unescape_into(s: &[u8], out: &mut Vec<u8>) -> bool {
    let start = out.len();
    if !s.contains(&b'\\') {
        if s.is_ascii() {
            out.extend_from_slice(s);
            return true;
        }
        out.extend_from_slice(s);
    } else {
        let mut i = 0;
        while i < s.len() {
            let b = s[i];
            if b != b'\\' || i + 1 >= s.len() {
                out.push(b);
                i += 1;
                continue;
            }
            let c = s[i + 1];
            i += 2;
            match c {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'v' => out.push(0x0b),
                b'f' => out.push(0x0c),
                b'x' => {
                    let mut v: u32 = 0;
                    let mut k = 0;
                    while k < 2 && i < s.len() && s[i].is_ascii_hexdigit() {
                        v = v * 16 + (s[i] as char).to_digit(16).unwrap_or(0);
                        i += 1;
                        k += 1;
                    }
                    out.push(v as u8);
                }
                b'0'..=b'7' => {
                    let mut v: u32 = (c - b'0') as u32;
                    let mut k = 1;
                    while k < 3 && i < s.len() && (b'0'..=b'7').contains(&s[i]) {
                        v = v * 8 + (s[i] - b'0') as u32;
                        i += 1;
                        k += 1;
                    }
                    out.push(v as u8);
                }
                other => out.push(other),
            }
        }
    }
    if std::str::from_utf8(&out[start..]).is_ok() {
        true
    } else {
        out.truncate(start);
        false
    }
}

/// The inside of a quoted string argument (`"abc"...` gives `abc`), or None.
pub(super) fn quoted(arg: &[u8]) -> Option<&[u8]> {
    let rest = arg.strip_prefix(b"\"")?;
    let end = skip_string(rest, 0)?;
    Some(&rest[..end - 1])
}

/// Position of `needle` in `hay`.
#[inline]
pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

#[inline]
pub(super) fn trim_start(s: &[u8]) -> &[u8] {
    let k = s.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &s[k..]
}

#[inline]
pub(super) fn trim_end(s: &[u8]) -> &[u8] {
    let k = s.iter().rev().take_while(|&&b| b == b' ' || b == b'\t').count();
    &s[..s.len() - k]
}

#[inline]
pub(super) fn trim(s: &[u8]) -> &[u8] {
    trim_end(trim_start(s))
}
