//! printf patterns and spans: the user's description of the lines a probe script prints.
//!
//! Owns compiling a template `NAME:literal {field:type[:unit]} literal ...` into a [`Pattern`]
//! (typed fields, literals, a space matching any run of blanks), matching a line against it
//! and converting each field's text to its type, and parsing a span `NAME=BEGIN,END,KEY`
//! ([`SpanDef`]).

use crate::formats::table::PType;

/// A field's type in a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// Decimal integer (a 0x prefix reads hex).
    Int,
    /// Hexadecimal integer with or without 0x (above 2^63: two's complement).
    Hex,
    /// Decimal number.
    Float,
    /// Text up to what follows the field in the template.
    Str,
    /// A time or duration in units of this many nanoseconds (decimals allowed).
    Time(i64),
}

impl FieldType {
    pub(super) fn parse(s: &str) -> Option<FieldType> {
        Some(match s {
            "int" => FieldType::Int,
            "hex" => FieldType::Hex,
            "float" => FieldType::Float,
            "str" => FieldType::Str,
            "ns" => FieldType::Time(1),
            "us" => FieldType::Time(1_000),
            "ms" => FieldType::Time(1_000_000),
            "s" => FieldType::Time(1_000_000_000),
            _ => return None,
        })
    }

    pub(super) fn ptype(self) -> PType {
        match self {
            FieldType::Int | FieldType::Hex | FieldType::Time(_) => PType::Int,
            FieldType::Float => PType::Float,
            FieldType::Str => PType::Str,
        }
    }
}

#[derive(Debug, Clone)]
pub(super) enum Tok {
    Lit(Vec<u8>),
    Ws,
    Field(FieldType),
}

/// A field of a template: name, type, unit.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDef {
    /// Column name (or ts/dur/pid/tid).
    pub name: String,
    /// Its type.
    pub ftype: FieldType,
    /// Its unit (from `{name:type:unit}`; `ns` for times).
    pub unit: String,
}

/// A compiled template.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The event type it makes.
    pub name: String,
    toks: Vec<Tok>,
    /// The fields, in template order.
    pub fields: Vec<FieldDef>,
}

pub(super) fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        && s.len() <= 63
}

impl Pattern {
    /// Compiles `NAME:TEMPLATE`.
    pub fn compile(spec: &str) -> Result<Pattern, String> {
        let (name, tpl) = spec.split_once(':').ok_or_else(|| format!("pattern {spec:?}: expected NAME:TEMPLATE"))?;
        let name = name.trim();
        if !is_ident(name) || name == "printf" || name == "tseries" {
            return Err(format!("pattern {spec:?}: {name:?} is not a valid event type name (or is reserved)"));
        }
        let mut toks = Vec::new();
        let mut fields: Vec<FieldDef> = Vec::new();
        let b = tpl.trim().as_bytes();
        let mut i = 0;
        let mut lit = Vec::new();
        let flush = |lit: &mut Vec<u8>, toks: &mut Vec<Tok>| {
            if !lit.is_empty() {
                toks.push(Tok::Lit(std::mem::take(lit)));
            }
        };
        while i < b.len() {
            match b[i] {
                b' ' | b'\t' => {
                    flush(&mut lit, &mut toks);
                    while i < b.len() && matches!(b[i], b' ' | b'\t') {
                        i += 1;
                    }
                    toks.push(Tok::Ws);
                }
                b'{' if b.get(i + 1) == Some(&b'{') => {
                    lit.push(b'{');
                    i += 2;
                }
                b'}' if b.get(i + 1) == Some(&b'}') => {
                    lit.push(b'}');
                    i += 2;
                }
                b'{' => {
                    let end = b[i..]
                        .iter()
                        .position(|&c| c == b'}')
                        .ok_or_else(|| format!("pattern {spec:?}: unclosed '{{'"))?;
                    let inner =
                        std::str::from_utf8(&b[i + 1..i + end]).map_err(|_| "pattern is not UTF-8".to_string())?;
                    let mut parts = inner.splitn(3, ':');
                    let fname = parts.next().unwrap_or("").trim().to_string();
                    let default = match fname.as_str() {
                        "ts" | "dur" => "ns",
                        "pid" | "tid" => "int",
                        _ => "str",
                    };
                    let tname = parts.next().map(str::trim).filter(|s| !s.is_empty()).unwrap_or(default);
                    let ftype = FieldType::parse(tname).ok_or_else(|| {
                        format!("pattern {spec:?}: unknown type {tname:?} (int, hex, float, str, ns, us, ms, s)")
                    })?;
                    if !is_ident(&fname) || matches!(fname.as_str(), "producer" | "seq" | "type") {
                        return Err(format!("pattern {spec:?}: {fname:?} is not a valid field name"));
                    }
                    if fields.iter().any(|f| f.name == fname) {
                        return Err(format!("pattern {spec:?}: field {fname:?} appears twice"));
                    }
                    if matches!(fname.as_str(), "ts" | "dur") != matches!(ftype, FieldType::Time(_)) {
                        return Err(format!(
                            "pattern {spec:?}: {fname} needs a time unit (ns, us, ms, s), and only ts and dur take one"
                        ));
                    }
                    if matches!(fname.as_str(), "pid" | "tid") && !matches!(ftype, FieldType::Int | FieldType::Hex) {
                        return Err(format!("pattern {spec:?}: {fname} is an integer"));
                    }
                    let unit =
                        parts.next().map(|u| u.trim().to_string()).filter(|u| !u.is_empty()).unwrap_or_else(|| {
                            match ftype {
                                FieldType::Time(_) => "ns",
                                FieldType::Hex => "address",
                                FieldType::Str => "text",
                                _ => "as printed",
                            }
                            .to_string()
                        });
                    flush(&mut lit, &mut toks);
                    toks.push(Tok::Field(ftype));
                    fields.push(FieldDef { name: fname, ftype, unit });
                    i += end + 1;
                }
                c => {
                    lit.push(c);
                    i += 1;
                }
            }
        }
        flush(&mut lit, &mut toks);
        if toks.is_empty() {
            return Err(format!("pattern {spec:?}: empty template"));
        }
        Ok(Pattern { name: name.to_string(), toks, fields })
    }

    /// Whether the line starts the way this pattern does (its leading literal word, then
    /// what follows it): a line that does but does not match is a bad line of this kind,
    /// not free text.
    pub(super) fn starts(&self, line: &[u8]) -> bool {
        let line = line.trim_ascii();
        let Some(Tok::Lit(l)) = self.toks.first() else { return false };
        if l.len() < 2 || !line.starts_with(l) {
            return false;
        }
        match self.toks.get(1) {
            Some(Tok::Ws) => matches!(line.get(l.len()), Some(b' ' | b'\t')),
            Some(_) => true,
            None => false,
        }
    }

    /// Matches a whole line (leading and trailing blanks ignored): the text of each
    /// field, or None.
    pub(super) fn matches<'a>(&self, line: &'a [u8], out: &mut Vec<&'a [u8]>) -> bool {
        out.clear();
        let line = line.trim_ascii();
        let mut pos = 0;
        for (ti, t) in self.toks.iter().enumerate() {
            match t {
                Tok::Lit(l) => {
                    if !line[pos..].starts_with(l) {
                        return false;
                    }
                    pos += l.len();
                }
                Tok::Ws => {
                    let n = line[pos..].iter().take_while(|c| matches!(c, b' ' | b'\t')).count();
                    if n == 0 {
                        return false;
                    }
                    pos += n;
                }
                Tok::Field(ft) => {
                    let rest = &line[pos..];
                    let n = match ft {
                        FieldType::Str => match self.toks.get(ti + 1) {
                            None => rest.len(),
                            Some(Tok::Ws) => rest.iter().position(|c| matches!(c, b' ' | b'\t')).unwrap_or(rest.len()),
                            Some(Tok::Lit(l)) => match find(rest, l) {
                                Some(p) => p,
                                None => return false,
                            },
                            Some(Tok::Field(_)) => rest.len(),
                        },
                        FieldType::Hex => {
                            let p = if rest.starts_with(b"0x") || rest.starts_with(b"0X") { 2 } else { 0 };
                            let d = rest[p..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
                            if d == 0 {
                                return false;
                            }
                            p + d
                        }
                        FieldType::Int => {
                            let s = if matches!(rest.first(), Some(b'-' | b'+')) { 1 } else { 0 };
                            if rest[s..].starts_with(b"0x") {
                                s + 2 + rest[s + 2..].iter().take_while(|c| c.is_ascii_hexdigit()).count()
                            } else {
                                let d = rest[s..].iter().take_while(|c| c.is_ascii_digit()).count();
                                if d == 0 {
                                    return false;
                                }
                                s + d
                            }
                        }
                        FieldType::Float | FieldType::Time(_) => {
                            let n = rest
                                .iter()
                                .take_while(|c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E'))
                                .count();
                            if n == 0 {
                                return false;
                            }
                            n
                        }
                    };
                    out.push(&rest[..n]);
                    pos += n;
                }
            }
        }
        pos == line.len()
    }
}

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A parsed field value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum FVal {
    Int(i64),
    Float(f64),
    Str(String),
}

pub(super) fn parse_field(text: &[u8], ft: FieldType) -> Result<FVal, String> {
    let s = std::str::from_utf8(text).map_err(|_| "not UTF-8".to_string())?;
    match ft {
        FieldType::Str => Ok(FVal::Str(s.to_string())),
        FieldType::Int => {
            let (neg, body) = match s.as_bytes().first() {
                Some(b'-') => (true, &s[1..]),
                Some(b'+') => (false, &s[1..]),
                _ => (false, s),
            };
            let v = if let Some(h) = body.strip_prefix("0x") {
                u64::from_str_radix(h, 16).map(|v| v as i64).map_err(|_| format!("{s:?} is not a hex integer"))?
            } else {
                body.parse::<i64>().map_err(|_| format!("{s:?} does not fit int64"))?
            };
            Ok(FVal::Int(if neg { v.wrapping_neg() } else { v }))
        }
        FieldType::Hex => {
            let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
            u64::from_str_radix(h, 16).map(|v| FVal::Int(v as i64)).map_err(|_| format!("{s:?} does not fit 64 bits"))
        }
        FieldType::Float => s.parse::<f64>().map(FVal::Float).map_err(|_| format!("{s:?} is not a number")),
        FieldType::Time(scale) => crate::formats::json::decimal_to_ns(text, scale)
            .or_else(|| {
                let v: f64 = s.parse().ok()?;
                let ns = (v * scale as f64).round();
                (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
            })
            .map(FVal::Int)
            .ok_or_else(|| format!("{s:?} is not a time that fits int64 nanoseconds")),
    }
}

/// A span: NAME=BEGIN,END,KEY.
#[derive(Debug, Clone)]
pub struct SpanDef {
    /// The span event type.
    pub name: String,
    /// Pattern of the start events.
    pub begin: String,
    /// Pattern of the end events.
    pub end: String,
    /// Field(s) matching an end to its start (`+`-joined for several).
    pub key: Vec<String>,
}

impl SpanDef {
    /// Parses `NAME=BEGIN,END,KEY`.
    pub fn parse(spec: &str) -> Result<SpanDef, String> {
        let err = || format!("span {spec:?}: expected NAME=BEGIN,END,KEY (KEY a field of both, or f1+f2)");
        let (name, rest) = spec.split_once('=').ok_or_else(err)?;
        let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
        if parts.len() != 3 || !is_ident(name.trim()) {
            return Err(err());
        }
        Ok(SpanDef {
            name: name.trim().to_string(),
            begin: parts[0].to_string(),
            end: parts[1].to_string(),
            key: parts[2].split('+').map(|s| s.trim().to_string()).collect(),
        })
    }
}
