//! A small JSON tokenizer over a byte buffer that may end in the middle of a value.
//!
//! Owns the lexical layer shared by the JSON-based formats (Chrome trace events,
//! bpftrace `-f json`): strings (with their escapes decoded only when asked), numbers
//! (kept as text, converted on demand), literals, and skipping a whole value.
//!
//! Why hand-written rather than serde_json: the formats are streamed. A record is
//! parsed straight from the parser's buffer; when the buffer ends inside it the
//! tokenizer answers [`Error::Incomplete`] (not a syntax error) and the caller retries
//! once more bytes have arrived. Values are never materialised as a tree: callers walk
//! objects key by key and keep byte spans into the buffer, so a record costs no
//! allocation. Nesting is skipped iteratively, so a deeply nested value cannot
//! overflow the stack.
//!
//! Over 600 lines: one streaming tokenizer; its states (strings, numbers, nesting skipped
//! iteratively) are one loop.

use std::borrow::Cow;

/// Why a token could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends inside the token: more input may complete it.
    Incomplete,
    /// The input is not JSON at byte `pos` of the buffer; `what` was expected.
    Syntax {
        /// Byte offset in the buffer.
        pos: usize,
        /// What was expected there.
        what: &'static str,
    },
}

/// A string token: the bytes between the quotes, `buf[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Str {
    /// First byte after the opening quote.
    pub start: usize,
    /// The closing quote.
    pub end: usize,
    /// True when the string contains a backslash escape.
    pub escaped: bool,
}

impl Str {
    /// The raw (still escaped) bytes.
    pub fn raw<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.start..self.end]
    }

    /// The token with its quotes, as it appears in the input.
    pub fn quoted<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.start - 1..self.end + 1]
    }

    /// The decoded text. Invalid UTF-8 and lone surrogates become U+FFFD.
    pub fn text<'a>(&self, buf: &'a [u8]) -> Cow<'a, str> {
        let raw = self.raw(buf);
        if !self.escaped {
            return String::from_utf8_lossy(raw);
        }
        let mut out = Vec::with_capacity(raw.len());
        unescape_into(raw, &mut out);
        Cow::Owned(String::from_utf8_lossy(&out).into_owned())
    }

    /// True when the decoded text equals `s` (no allocation for unescaped strings).
    pub fn eq(&self, buf: &[u8], s: &[u8]) -> bool {
        if self.escaped {
            self.text(buf).as_bytes() == s
        } else {
            self.raw(buf) == s
        }
    }
}

/// A number token: `buf[start..end]`, `int` when it has no fraction or exponent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Num {
    /// First byte of the number.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
    /// No `.`, `e` or `E` in it.
    pub int: bool,
}

impl Num {
    /// The number's text.
    pub fn raw<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.start..self.end]
    }

    /// As an i64 when it is an integer that fits.
    pub fn as_i64(&self, buf: &[u8]) -> Option<i64> {
        if !self.int {
            return None;
        }
        parse_i64(self.raw(buf))
    }

    /// As an f64 (always succeeds for a valid token; huge values become infinite).
    pub fn as_f64(&self, buf: &[u8]) -> f64 {
        // The token was validated as JSON, which is a subset of Rust's float syntax.
        std::str::from_utf8(self.raw(buf)).ok().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN)
    }
}

/// Decimal integer text (optional leading '-') as i64, None on overflow or other bytes.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    if neg {
        if v <= i64::MAX as u64 + 1 {
            Some((v as i64).wrapping_neg())
        } else {
            None
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// A decimal number of `unit` (e.g. microseconds) as integer nanoseconds, exactly:
/// `scale` is nanoseconds per unit (1000 for us). Digits below 1 ns are rounded half
/// away from zero. None when the text is not a JSON number or the result does not fit.
pub fn decimal_to_ns(s: &[u8], scale: i64) -> Option<i64> {
    let (neg, body) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    // Exponent forms are rare: go through f64 (exact enough below 2^53 ns).
    if body.iter().any(|&c| c == b'e' || c == b'E') {
        let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
        let ns = (v * scale as f64).round();
        return if ns.is_finite() && ns.abs() < 9.2e18 { Some(ns as i64) } else { None };
    }
    let (int_part, frac) = match body.iter().position(|&c| c == b'.') {
        Some(p) => (&body[..p], &body[p + 1..]),
        None => (body, &body[..0]),
    };
    if int_part.is_empty() || int_part.len() > 19 || !int_part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut ip: i128 = 0;
    for &c in int_part {
        ip = ip * 10 + (c - b'0') as i128;
    }
    // Fraction digits that still count in ns: scale 1000 keeps 3, 1e9 keeps 9.
    let keep = match scale {
        1 => 0,
        1_000 => 3,
        1_000_000 => 6,
        1_000_000_000 => 9,
        _ => return None,
    };
    let mut fp: i128 = 0;
    for i in 0..keep {
        fp = fp * 10 + frac.get(i).map(|c| (c - b'0') as i128).unwrap_or(0);
    }
    if frac.get(keep).is_some_and(|&c| c >= b'5') {
        fp += 1;
    }
    let ns = ip * scale as i128 + fp;
    let ns = if neg { -ns } else { ns };
    i64::try_from(ns).ok().filter(|v| v.unsigned_abs() < 9_200_000_000_000_000_000)
}

/// Appends the decoded form of escaped string bytes to `out`.
pub fn unescape_into(raw: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c != b'\\' || i + 1 >= raw.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let e = raw[i + 1];
        i += 2;
        match e {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'u' => {
                let hi = hex4(&raw[i..]);
                i += 4.min(raw.len() - i);
                let cp = match hi {
                    Some(h @ 0xD800..=0xDBFF) => {
                        // A surrogate pair: \uD83D\uDE00.
                        let lo = if raw[i..].starts_with(b"\\u") { hex4(&raw[i + 2..]) } else { None };
                        match lo {
                            Some(l @ 0xDC00..=0xDFFF) => {
                                i += 6;
                                0x10000 + ((h - 0xD800) << 10) + (l - 0xDC00)
                            }
                            _ => 0xFFFD,
                        }
                    }
                    Some(0xDC00..=0xDFFF) | None => 0xFFFD,
                    Some(c) => c,
                };
                let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                let mut tmp = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
            }
            other => out.push(other), // \" \\ \/ and anything lenient
        }
    }
}

fn hex4(s: &[u8]) -> Option<u32> {
    if s.len() < 4 {
        return None;
    }
    let mut v = 0u32;
    for &c in &s[..4] {
        v = v * 16 + (c as char).to_digit(16)?;
    }
    Some(v)
}

/// Appends `s` to `out` as a JSON string literal (with quotes).
pub fn write_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    let mut last = 0;
    for (i, &c) in s.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&s[last..i]);
        if esc.is_empty() {
            out.extend_from_slice(format!("\\u{:04x}", c).as_bytes());
        } else {
            out.extend_from_slice(esc);
        }
        last = i + 1;
    }
    out.extend_from_slice(&s[last..]);
    out.push(b'"');
}

/// A read position in a buffer. `eof` says the buffer holds the rest of the input, so
/// a token running into its end is a syntax error rather than [`Error::Incomplete`].
#[derive(Debug)]
pub struct Cursor<'a> {
    /// The bytes.
    pub buf: &'a [u8],
    /// Next byte to read.
    pub pos: usize,
    /// No more bytes will follow `buf`.
    pub eof: bool,
}

impl<'a> Cursor<'a> {
    /// A cursor at `pos`.
    pub fn new(buf: &'a [u8], pos: usize, eof: bool) -> Self {
        Self { buf, pos, eof }
    }

    fn end(&self, what: &'static str) -> Error {
        if self.eof {
            Error::Syntax { pos: self.buf.len(), what }
        } else {
            Error::Incomplete
        }
    }

    /// Skips whitespace and returns the next byte without consuming it.
    #[inline]
    pub fn peek_ws(&mut self, what: &'static str) -> Result<u8, Error> {
        while let Some(&c) = self.buf.get(self.pos) {
            if matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                self.pos += 1;
            } else {
                return Ok(c);
            }
        }
        Err(self.end(what))
    }

    /// Skips whitespace, then consumes `c` or fails naming `what`.
    #[inline]
    pub fn expect(&mut self, c: u8, what: &'static str) -> Result<(), Error> {
        if self.peek_ws(what)? == c {
            self.pos += 1;
            Ok(())
        } else {
            Err(Error::Syntax { pos: self.pos, what })
        }
    }

    /// After a member of an object or array: `Ok(true)` on `,` (another follows),
    /// `Ok(false)` on `close` (consumed).
    #[inline]
    pub fn next_member(&mut self, close: u8, what: &'static str) -> Result<bool, Error> {
        let c = self.peek_ws(what)?;
        self.pos += 1;
        if c == b',' {
            Ok(true)
        } else if c == close {
            Ok(false)
        } else {
            self.pos -= 1;
            Err(Error::Syntax { pos: self.pos, what })
        }
    }

    /// A string token at the cursor (after optional whitespace).
    #[inline]
    pub fn string(&mut self) -> Result<Str, Error> {
        if self.peek_ws("a string")? != b'"' {
            return Err(Error::Syntax { pos: self.pos, what: "a string" });
        }
        let start = self.pos + 1;
        let mut i = start;
        let mut escaped = false;
        let buf = self.buf;
        loop {
            // Plain bytes first: the common case is a short run of printable ASCII.
            match buf[i..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20) {
                None => return Err(self.end("a closing quote")),
                Some(off) => {
                    i += off;
                    match buf[i] {
                        b'"' => {
                            self.pos = i + 1;
                            return Ok(Str { start, end: i, escaped });
                        }
                        b'\\' => {
                            escaped = true;
                            if i + 1 >= buf.len() {
                                return Err(self.end("an escape"));
                            }
                            let e = buf[i + 1];
                            if !matches!(e, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' | b'u') {
                                return Err(Error::Syntax { pos: i + 1, what: "a valid escape" });
                            }
                            if e == b'u' {
                                if i + 6 > buf.len() {
                                    return Err(self.end("a \\u escape"));
                                }
                                if hex4(&buf[i + 2..]).is_none() {
                                    return Err(Error::Syntax { pos: i + 2, what: "4 hex digits" });
                                }
                                i += 6;
                            } else {
                                i += 2;
                            }
                        }
                        _ => return Err(Error::Syntax { pos: i, what: "no control character in a string" }),
                    }
                }
            }
        }
    }

    /// A number token at the cursor (after optional whitespace).
    #[inline]
    pub fn number(&mut self) -> Result<Num, Error> {
        self.peek_ws("a number")?;
        let buf = self.buf;
        let start = self.pos;
        let mut i = start;
        if buf.get(i) == Some(&b'-') {
            i += 1;
        }
        let d0 = i;
        while buf.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == d0 {
            return if i >= buf.len() {
                Err(self.end("digits"))
            } else {
                Err(Error::Syntax { pos: i, what: "a number" })
            };
        }
        if buf[d0] == b'0' && i - d0 > 1 {
            return Err(Error::Syntax { pos: d0, what: "no leading zero" });
        }
        let mut int = true;
        if buf.get(i) == Some(&b'.') {
            int = false;
            i += 1;
            let f0 = i;
            while buf.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == f0 {
                return if i >= buf.len() {
                    Err(self.end("digits"))
                } else {
                    Err(Error::Syntax { pos: i, what: "fraction digits" })
                };
            }
        }
        if matches!(buf.get(i), Some(b'e' | b'E')) {
            int = false;
            i += 1;
            if matches!(buf.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let e0 = i;
            while buf.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == e0 {
                return if i >= buf.len() {
                    Err(self.end("digits"))
                } else {
                    Err(Error::Syntax { pos: i, what: "exponent digits" })
                };
            }
        }
        if i >= buf.len() && !self.eof {
            return Err(Error::Incomplete); // more digits may follow
        }
        self.pos = i;
        Ok(Num { start, end: i, int })
    }

    /// `true`, `false` or `null` at the cursor.
    fn literal(&mut self) -> Result<Lit, Error> {
        let rest = &self.buf[self.pos..];
        for (word, lit) in [(&b"true"[..], Lit::True), (b"false", Lit::False), (b"null", Lit::Null)] {
            if rest.len() >= word.len() {
                if &rest[..word.len()] == word {
                    self.pos += word.len();
                    return Ok(lit);
                }
            } else if word.starts_with(rest) {
                return Err(self.end("a literal"));
            }
        }
        Err(Error::Syntax { pos: self.pos, what: "a JSON value" })
    }

    /// Any value at the cursor, classified; objects and arrays are skipped and returned
    /// as their span.
    pub fn value(&mut self) -> Result<Value, Error> {
        let c = self.peek_ws("a value")?;
        Ok(match c {
            b'"' => Value::Str(self.string()?),
            b'-' | b'0'..=b'9' => Value::Num(self.number()?),
            b'{' | b'[' => {
                let start = self.pos;
                self.skip_nested()?;
                Value::Nested { start, end: self.pos, object: c == b'{' }
            }
            _ => match self.literal()? {
                Lit::True => Value::Bool(true),
                Lit::False => Value::Bool(false),
                Lit::Null => Value::Null,
            },
        })
    }

    /// Skips one complete object or array at the cursor, iteratively and validating
    /// its syntax.
    pub fn skip_nested(&mut self) -> Result<(), Error> {
        // A stack of the open brackets; `expect_key` is true right after `{` or `,` in an object.
        let mut stack: Vec<u8> = Vec::new();
        let mut c = self.peek_ws("a value")?;
        loop {
            // At the start of a value.
            match c {
                b'{' | b'[' => {
                    self.pos += 1;
                    stack.push(c);
                    let close = if c == b'{' { b'}' } else { b']' };
                    if self.peek_ws("a member")? == close {
                        self.pos += 1;
                        stack.pop();
                    } else if c == b'{' {
                        self.string()?;
                        self.expect(b':', "':'")?;
                        c = self.peek_ws("a value")?;
                        continue;
                    } else {
                        c = self.peek_ws("a value")?;
                        continue;
                    }
                }
                b'"' => {
                    self.string()?;
                }
                b'-' | b'0'..=b'9' => {
                    self.number()?;
                }
                _ => {
                    self.literal()?;
                }
            }
            // After a value: close brackets or move to the next member.
            loop {
                let Some(&top) = stack.last() else { return Ok(()) };
                let close = if top == b'{' { b'}' } else { b']' };
                if self.next_member(close, "',' or a closing bracket")? {
                    if top == b'{' {
                        self.string()?;
                        self.expect(b':', "':'")?;
                    }
                    c = self.peek_ws("a value")?;
                    break;
                }
                stack.pop();
            }
        }
    }
}

enum Lit {
    True,
    False,
    Null,
}

/// A classified JSON value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A string.
    Str(Str),
    /// A number.
    Num(Num),
    /// true or false.
    Bool(bool),
    /// null.
    Null,
    /// An object or array, `buf[start..end]`.
    Nested {
        /// Its opening bracket.
        start: usize,
        /// One past its closing bracket.
        end: usize,
        /// `{...}` rather than `[...]`.
        object: bool,
    },
}

impl Value {
    /// The value's source text (strings with their quotes).
    pub fn raw<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        match *self {
            Value::Str(s) => s.quoted(buf),
            Value::Num(n) => n.raw(buf),
            Value::Bool(true) => b"true",
            Value::Bool(false) => b"false",
            Value::Null => b"null",
            Value::Nested { start, end, .. } => &buf[start..end],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn val(s: &str) -> Result<Value, Error> {
        Cursor::new(s.as_bytes(), 0, true).value()
    }

    #[test]
    fn strings_and_escapes() {
        let b = br#""a\"b\u00e9\ud83d\ude00\n""#;
        let s = Cursor::new(b, 0, true).string().unwrap();
        assert!(s.escaped);
        assert_eq!(s.text(b), "a\"b\u{e9}\u{1F600}\n");
        assert_eq!(Cursor::new(br#""abc"#, 0, false).string(), Err(Error::Incomplete));
        assert!(matches!(Cursor::new(br#""abc"#, 0, true).string(), Err(Error::Syntax { .. })));
        assert!(matches!(Cursor::new(b"\"a\\x\"", 0, true).string(), Err(Error::Syntax { .. })));
        let lone = br#""\udc00x""#;
        assert_eq!(Cursor::new(lone, 0, true).string().unwrap().text(lone), "\u{FFFD}x");
    }

    #[test]
    fn numbers() {
        let b = b"-12.5e3,";
        let n = Cursor::new(b, 0, false).number().unwrap();
        assert!(!n.int);
        assert_eq!(n.as_f64(b), -12500.0);
        assert_eq!(Cursor::new(b"123", 0, false).number(), Err(Error::Incomplete));
        assert_eq!(Cursor::new(b"123", 0, true).number().unwrap().as_i64(b"123"), Some(123));
        assert!(matches!(Cursor::new(b"01", 0, true).number(), Err(Error::Syntax { .. })));
        assert!(matches!(Cursor::new(b"1.", 0, true).number(), Err(Error::Syntax { .. })));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }

    #[test]
    fn decimal_ns_is_exact() {
        assert_eq!(decimal_to_ns(b"1234.567", 1000), Some(1_234_567));
        assert_eq!(decimal_to_ns(b"1234.5678", 1000), Some(1_234_568));
        assert_eq!(decimal_to_ns(b"-0.0014", 1000), Some(-1));
        assert_eq!(decimal_to_ns(b"7", 1000), Some(7000));
        assert_eq!(decimal_to_ns(b"1.5e3", 1000), Some(1_500_000));
        assert_eq!(decimal_to_ns(b"0.25", 1_000_000_000), Some(250_000_000));
        assert_eq!(decimal_to_ns(b"99999999999999999", 1000), None);
        // Larger than any float could carry exactly, still exact here.
        assert_eq!(decimal_to_ns(b"1700000000123456.789", 1000), Some(1_700_000_000_123_456_789));
    }

    #[test]
    fn values_and_nesting() {
        assert_eq!(val("true").unwrap(), Value::Bool(true));
        assert_eq!(val(" null").unwrap(), Value::Null);
        let v = val(r#"{"a": [1, {"b": "}"}], "c": {}}"#).unwrap();
        assert!(matches!(v, Value::Nested { object: true, .. }));
        assert!(matches!(val(r#"{"a" 1}"#), Err(Error::Syntax { .. })));
        assert!(matches!(val(r#"[1 2]"#), Err(Error::Syntax { .. })));
        assert_eq!(Cursor::new(b"[1, [2", 0, false).value(), Err(Error::Incomplete));
        assert_eq!(Cursor::new(b"tru", 0, false).value(), Err(Error::Incomplete));
        // Deep nesting is iterative: no stack overflow.
        let deep = "[".repeat(200_000) + &"]".repeat(200_000);
        assert!(matches!(val(&deep).unwrap(), Value::Nested { .. }));
    }

    #[test]
    fn write_str_escapes() {
        let mut out = Vec::new();
        write_str(&mut out, b"a\"b\\c\n\x01");
        assert_eq!(out, br#""a\"b\\c\n\u0001""#);
    }
}
