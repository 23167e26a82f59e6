//! Output of probe-based tracers: bpftrace (`-f json` NDJSON and its text output) and
//! SystemTap (printf lines and `@hist_log`/`@hist_linear` tables).
//!
//! Owns three things shared by both tools:
//!
//! - **printf patterns.** The user describes each kind of line a script prints with a
//!   template, `NAME:literal {field:type} literal ...` (types `int`, `hex`, `float`,
//!   `str`, and `ns`/`us`/`ms`/`s` for times; a space matches any run of blanks), and
//!   each matching line becomes an event of type NAME with typed columns. Fields `ts`
//!   (time), `dur` (duration), `pid` and `tid` (the producer) are the common columns.
//!   Lines no pattern matches are kept as `printf` events with their text.
//! - **start/end pairing.** A span `NAME=BEGIN,END,KEY` turns each END event into a
//!   NAME span with the most recent unmatched BEGIN event that has the same KEY value
//!   (Hyrise's `job_start`/`job_end` keyed by the task pointer, seed 004); halves left
//!   over stay BEGIN/END events and are counted.
//! - **aggregates.** Histograms (log2, linear, with SystemTap's `~` elision rows), maps
//!   and stats (stats() maps, and avg() maps bpftrace prints as `stats` records) become
//!   rows of three result tables (`hist`, `map`, `stats`); a histogram printed empty is
//!   an empty result ([`ProbeParser::empty_aggregates`]). bpftrace's `tseries` records
//!   become `tseries` counter events, one per interval. A `value` record (`print(x)`) is
//!   one `map` row, whatever its data (number, string, tuple, struct).
//!
//! Input is byte chunks cut anywhere; only the current partial line is buffered, and
//! never more than [`super::MAX_LINE`] bytes of it. Binary data and pretty-printed JSON
//! (a record spread over lines) are refused whole, whatever `strict` says.
//!
//! Over 600 lines: one parser for two tools' output (bpftrace JSON and text, SystemTap
//! text): records, printf patterns, maps, histograms and their spans share the line reader,
//! the typed tables and the producers; tests are in tests.rs.

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use super::decl::Param;
use super::json::{Cursor, Value};
use super::parser::{Attr, InputType, ProducerRow};
use super::table::{FastMap, PType, Table, DUR};

/// Which tool wrote the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// bpftrace: `-f json` records, or text (printf lines, `@map` output, histograms).
    Bpftrace,
    /// SystemTap: printf lines and histogram tables.
    Stap,
}

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
    fn parse(s: &str) -> Option<FieldType> {
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

    fn ptype(self) -> PType {
        match self {
            FieldType::Int | FieldType::Hex | FieldType::Time(_) => PType::Int,
            FieldType::Float => PType::Float,
            FieldType::Str => PType::Str,
        }
    }
}

#[derive(Debug, Clone)]
enum Tok {
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

fn is_ident(s: &str) -> bool {
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
    fn starts(&self, line: &[u8]) -> bool {
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
    fn matches<'a>(&self, line: &'a [u8], out: &mut Vec<&'a [u8]>) -> bool {
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

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A parsed field value.
#[derive(Debug, Clone, PartialEq)]
enum FVal {
    Int(i64),
    Float(f64),
    Str(String),
}

fn parse_field(text: &[u8], ft: FieldType) -> Result<FVal, String> {
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
        FieldType::Time(scale) => super::json::decimal_to_ns(text, scale)
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

/// Per span: how many pairs matched and how many halves were left over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpanStats {
    /// Pairs made.
    pub matched: u64,
    /// Starts never ended.
    pub unmatched_begin: u64,
    /// Ends without a start.
    pub unmatched_end: u64,
}

/// A line that could not be imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line.
    pub line: u64,
    /// Why.
    pub reason: String,
}

struct Pending {
    ts: i64,
    producer: i32,
    seq: i64,
    vals: Vec<Option<FVal>>,
}

struct Span {
    def: SpanDef,
    begin: usize,
    end: usize,
    begin_key: Vec<usize>,
    end_key: Vec<usize>,
    /// Table index of the span.
    table: usize,
    /// For each end field not in the begin: its column in the span table.
    end_cols: Vec<Option<usize>>,
    open: FastMap<Vec<u8>, Vec<Pending>>,
    stats: SpanStats,
}

/// Rows of one aggregate table, as strings/ints/bools by column.
struct Agg {
    names: &'static [Param],
    cols: Vec<AggCol>,
    rows: usize,
}

enum AggCol {
    S(StringBuilder),
    I(Int64Builder),
    B(BooleanBuilder),
}

/// A value for an aggregate row.
enum AV<'a> {
    S(Option<&'a str>),
    I(Option<i64>),
    B(bool),
}

impl Agg {
    fn new(names: &'static [Param]) -> Self {
        let cols = names
            .iter()
            .map(|p| match p.ptype {
                PType::Str => AggCol::S(StringBuilder::new()),
                PType::Bool => AggCol::B(BooleanBuilder::new()),
                _ => AggCol::I(Int64Builder::new()),
            })
            .collect();
        Agg { names, cols, rows: 0 }
    }

    fn push(&mut self, vals: &[AV<'_>]) {
        for (c, v) in self.cols.iter_mut().zip(vals) {
            match (c, v) {
                (AggCol::S(b), AV::S(x)) => b.append_option(*x),
                (AggCol::I(b), AV::I(x)) => b.append_option(*x),
                (AggCol::B(b), AV::B(x)) => b.append_value(*x),
                _ => unreachable!("aggregate row of the wrong shape"),
            }
        }
        self.rows += 1;
    }

    fn take(&mut self) -> Option<RecordBatch> {
        if self.rows == 0 {
            return None;
        }
        self.rows = 0;
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (p, c) in self.names.iter().zip(self.cols.iter_mut()) {
            let dt = match p.ptype {
                PType::Str => DataType::Utf8,
                PType::Bool => DataType::Boolean,
                _ => DataType::Int64,
            };
            fields.push(Field::new(p.name, dt, true));
            arrays.push(match c {
                AggCol::S(b) => Arc::new(b.finish()),
                AggCol::I(b) => Arc::new(b.finish()),
                AggCol::B(b) => Arc::new(b.finish()),
            });
        }
        Some(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("aggregate columns of one length"))
    }
}

/// A histogram row before SystemTap's buckets are resolved.
#[derive(Clone, Copy)]
struct StapRow {
    value: i64,
    prefix: u8,
    count: i64,
    elided: bool,
    line: u64,
}

enum TextState {
    Normal,
    /// After `@name:` / `@name[key]:`: histogram rows follow.
    BtHist {
        map: String,
        key: Option<String>,
    },
    /// Inside a SystemTap table.
    StapHist {
        title: String,
        rows: Vec<StapRow>,
    },
}

/// A producer: (pid, tid) as printed; the tool itself when neither is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    /// tracehouse id.
    pub id: i32,
    /// Its process, for a thread.
    pub parent: Option<i32>,
    /// "tool", "process" or "thread".
    pub kind: &'static str,
    /// "bpftrace", "pid N" or "tid N".
    pub name: String,
    /// The pid.
    pub pid: Option<i64>,
    /// The tid.
    pub tid: Option<i64>,
}

/// (event type, kind, [(column, type)]).
pub type TableColumns = (String, &'static str, Vec<(String, PType)>);

/// The streaming parser of probe output.
pub struct ProbeParser {
    tool: Tool,
    strict: bool,
    batch_rows: usize,
    patterns: Vec<Pattern>,
    /// Tables: one per pattern, one per span, then `printf`, then `tseries` (bpftrace).
    tables: Vec<Table>,
    kinds: Vec<&'static str>,
    /// Column of each pattern field in its table (None for ts/dur/pid/tid).
    cols: Vec<Vec<Option<usize>>>,
    /// Field index of ts, dur, pid, tid in each pattern.
    special: Vec<[Option<usize>; 4]>,
    spans: Vec<Span>,
    /// Pattern index -> (span index, is begin).
    role: Vec<Option<(usize, bool)>>,
    printf: usize,
    /// The `tseries` table (bpftrace's time series: one counter row per interval).
    tseries: Option<usize>,
    /// Aggregates printed with nothing in them (`{"@h": []}`): (result kind, map name).
    empty: Vec<(&'static str, String)>,
    input: super::TextInput,
    /// The line of a JSON record cut at the end of its line, until the next line tells
    /// whether the input ends there or goes on (pretty-printed).
    cut_record: Option<u64>,
    pending_text: Vec<u8>,
    line: u64,
    last_ts: i64,
    state: TextState,
    last_title: String,
    untitled: u32,
    producers: Vec<Producer>,
    prod_ids: FastMap<(Option<i64>, Option<i64>), i32>,
    seqs: Vec<i64>,
    hist: Agg,
    map: Agg,
    stats: Agg,
    /// Lines rejected.
    pub rejected: u64,
    /// The first rejected lines.
    pub problems: Vec<Problem>,
    /// In strict mode, the line that stopped the parse.
    pub fatal: Option<Problem>,
    /// Counts: JSON records by type, lost events, lines kept as printf text, ...
    pub counts: FastMap<String, u64>,
}

const KEEP_PROBLEMS: usize = 10;

impl ProbeParser {
    /// A parser for `tool` with printf `patterns` (`NAME:TEMPLATE`) and `spans`
    /// (`NAME=BEGIN,END,KEY`).
    pub fn new(
        tool: Tool,
        patterns: &[String],
        spans: &[String],
        strict: bool,
        batch_rows: usize,
    ) -> Result<Self, String> {
        let patterns: Vec<Pattern> = patterns.iter().map(|p| Pattern::compile(p)).collect::<Result<_, _>>()?;
        for (i, p) in patterns.iter().enumerate() {
            if patterns[..i].iter().any(|q| q.name == p.name) {
                return Err(format!("two patterns make event type {:?}", p.name));
            }
        }
        let defs: Vec<SpanDef> = spans.iter().map(|s| SpanDef::parse(s)).collect::<Result<_, _>>()?;
        let mut role = vec![None; patterns.len()];
        let cap = batch_rows.min(1 << 16);
        let mut tables = Vec::new();
        let mut kinds = Vec::new();
        let mut cols = Vec::new();
        let mut special = Vec::new();
        for (si, d) in defs.iter().enumerate() {
            for (pname, begin) in [(&d.begin, true), (&d.end, false)] {
                let pi = patterns
                    .iter()
                    .position(|p| &p.name == pname)
                    .ok_or_else(|| format!("span {:?}: no pattern named {pname:?}", d.name))?;
                if role[pi].is_some() {
                    return Err(format!("pattern {pname:?} is in two spans"));
                }
                if patterns[pi].fields.iter().any(|f| f.name == "dur") {
                    return Err(format!("span {:?}: pattern {pname:?} has a dur field already", d.name));
                }
                for k in &d.key {
                    if !patterns[pi].fields.iter().any(|f| &f.name == k) {
                        return Err(format!("span {:?}: key {k:?} is not a field of pattern {pname:?}", d.name));
                    }
                }
                role[pi] = Some((si, begin));
            }
            if patterns.iter().any(|p| p.name == d.name) {
                return Err(format!("span {:?} has the name of a pattern", d.name));
            }
        }
        for (pi, p) in patterns.iter().enumerate() {
            let mut sp = [None; 4];
            let mut fixed = Vec::new();
            let mut c = Vec::new();
            for (fi, f) in p.fields.iter().enumerate() {
                match f.name.as_str() {
                    "ts" => sp[0] = Some(fi),
                    "dur" => sp[1] = Some(fi),
                    "pid" => sp[2] = Some(fi),
                    "tid" => sp[3] = Some(fi),
                    _ => fixed.push((f.name.as_str(), f.ftype.ptype())),
                }
            }
            let kind = match role[pi] {
                Some((_, true)) => "begin",
                Some((_, false)) => "end",
                None if sp[1].is_some() => "span",
                None => "instant",
            };
            let t = Table::new(&p.name, kind == "span", &fixed, cap);
            for f in &p.fields {
                c.push(if matches!(f.name.as_str(), "ts" | "dur" | "pid" | "tid") { None } else { t.col(&f.name) });
            }
            tables.push(t);
            kinds.push(kind);
            cols.push(c);
            special.push(sp);
        }
        let mut spans = Vec::new();
        for d in defs {
            let b = patterns.iter().position(|p| p.name == d.begin).expect("checked");
            let e = patterns.iter().position(|p| p.name == d.end).expect("checked");
            let plain = |f: &FieldDef| !matches!(f.name.as_str(), "ts" | "dur" | "pid" | "tid");
            let mut fixed: Vec<(String, PType)> =
                patterns[b].fields.iter().filter(|f| plain(f)).map(|f| (f.name.clone(), f.ftype.ptype())).collect();
            let mut end_names = Vec::new();
            for f in &patterns[e].fields {
                if plain(f) && !patterns[b].fields.iter().any(|g| g.name == f.name) {
                    let n = format!("end_{}", f.name);
                    fixed.push((n.clone(), f.ftype.ptype()));
                    end_names.push(Some(n));
                } else {
                    end_names.push(None);
                }
            }
            let refs: Vec<(&str, PType)> = fixed.iter().map(|(n, t)| (n.as_str(), *t)).collect();
            let t = Table::new(&d.name, true, &refs, cap);
            let end_cols = end_names.iter().map(|n| n.as_ref().and_then(|n| t.col(n))).collect();
            let key_idx = |pi: usize| -> Vec<usize> {
                d.key.iter().map(|k| patterns[pi].fields.iter().position(|f| &f.name == k).expect("checked")).collect()
            };
            spans.push(Span {
                begin: b,
                end: e,
                begin_key: key_idx(b),
                end_key: key_idx(e),
                table: tables.len(),
                end_cols,
                open: FastMap::default(),
                stats: SpanStats::default(),
                def: d,
            });
            tables.push(t);
            kinds.push("span");
        }
        let printf = tables.len();
        tables.push(Table::new(decl::PRINTF.name, false, &decl::PRINTF.columns(), cap));
        kinds.push(decl::PRINTF.kind);
        let tseries = (tool == Tool::Bpftrace).then(|| {
            tables.push(Table::new(decl::TSERIES.name, false, &decl::TSERIES.columns(), cap));
            kinds.push(decl::TSERIES.kind);
            tables.len() - 1
        });
        Ok(ProbeParser {
            tool,
            strict,
            batch_rows,
            patterns,
            tables,
            kinds,
            cols,
            special,
            spans,
            role,
            printf,
            tseries,
            empty: Vec::new(),
            input: super::TextInput::new(super::MAX_LINE),
            cut_record: None,
            pending_text: Vec::new(),
            line: 0,
            last_ts: 0,
            state: TextState::Normal,
            last_title: String::new(),
            untitled: 0,
            producers: Vec::new(),
            prod_ids: FastMap::default(),
            seqs: Vec::new(),
            hist: Agg::new(decl::HIST.params),
            map: Agg::new(decl::MAP_RESULT.params),
            stats: Agg::new(decl::STATS.params),
            rejected: 0,
            problems: Vec::new(),
            fatal: None,
            counts: FastMap::default(),
        })
    }

    /// (name, kind, columns) of every event type this parser makes.
    pub fn table_columns(&self) -> Vec<TableColumns> {
        self.tables.iter().zip(&self.kinds).map(|(t, k)| (t.name.clone(), *k, t.columns())).collect()
    }

    /// The compiled patterns (for units and docs).
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    /// Every producer met.
    pub fn producers(&self) -> &[Producer] {
        &self.producers
    }

    /// (span name, stats) of every span.
    pub fn span_stats(&self) -> Vec<(String, SpanStats)> {
        self.spans.iter().map(|s| (s.def.name.clone(), s.stats.clone())).collect()
    }

    /// Sets the longest line accepted (default [`super::MAX_LINE`]).
    pub fn set_max_line(&mut self, max: usize) {
        self.input = super::TextInput::new(max);
    }

    /// Parses a chunk (cut anywhere).
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.fatal.is_some() {
            return;
        }
        let mut input = std::mem::replace(&mut self.input, super::TextInput::new(0));
        input.feed(chunk, |it| {
            self.item(it);
            self.fatal.is_none()
        });
        self.input = input;
    }

    /// Ends the input: the last line, an open table, spans never closed.
    pub fn finish(&mut self) {
        if self.fatal.is_none() {
            let mut input = std::mem::replace(&mut self.input, super::TextInput::new(0));
            input.finish(|it| {
                self.item(it);
                self.fatal.is_none()
            });
            self.input = input;
        }
        if let Some(at) = self.cut_record.take() {
            let line = std::mem::replace(&mut self.line, at);
            self.reject("truncated JSON record at the end of the input".into());
            self.line = line;
        }
        if self.fatal.is_none() && !self.pending_text.is_empty() {
            let t = std::mem::take(&mut self.pending_text);
            self.text_line(&t, true);
        }
        self.end_table();
        for si in 0..self.spans.len() {
            let mut keys: Vec<Vec<u8>> = self.spans[si].open.keys().cloned().collect();
            keys.sort();
            for k in keys {
                let open = self.spans[si].open.remove(&k).unwrap_or_default();
                for p in open {
                    self.spans[si].stats.unmatched_begin += 1;
                    let b = self.spans[si].begin;
                    self.emit(b, p.ts, p.producer, p.seq, None, &p.vals);
                }
            }
        }
    }

    /// Event batches of types that reached the batch size (all when `all`).
    pub fn take_batches(&mut self, all: bool) -> Vec<(String, RecordBatch)> {
        let mut out = Vec::new();
        for t in &mut self.tables {
            if all || t.rows() >= self.batch_rows || t.str_bytes >= 64 << 20 {
                if let Some(b) = t.take() {
                    out.push((t.name.clone(), b));
                }
            }
        }
        out
    }

    /// Aggregates that were printed empty, as (result kind, map name): valid results with no rows.
    pub fn empty_aggregates(&self) -> &[(&'static str, String)] {
        &self.empty
    }

    /// The aggregate tables: ("hist" | "map" | "stats", batch), non-empty ones only.
    pub fn take_aggregates(&mut self) -> Vec<(&'static str, RecordBatch)> {
        let mut out = Vec::new();
        for (n, a) in [("hist", &mut self.hist), ("map", &mut self.map), ("stats", &mut self.stats)] {
            if let Some(b) = a.take() {
                out.push((n, b));
            }
        }
        out
    }

    fn count(&mut self, what: &str, n: u64) {
        *self.counts.entry(what.to_string()).or_insert(0) += n;
    }

    fn reject(&mut self, reason: String) {
        self.rejected += 1;
        let p = Problem { line: self.line, reason };
        if self.strict {
            self.fatal = Some(p);
        } else if self.problems.len() < KEEP_PROBLEMS {
            self.problems.push(p);
        }
    }

    fn item(&mut self, it: super::Item<'_>) {
        match it {
            super::Item::Line(l) => self.line_in(l),
            super::Item::TooLong(max) => {
                self.line += 1;
                self.reject(format!("line longer than {max} bytes (skipped)"));
            }
            super::Item::Binary => {
                // Refused whole, whatever --strict says: split at its newlines, random bytes
                // would become thousands of printf "lines".
                let what = if self.tool == Tool::Bpftrace { "bpftrace output" } else { "SystemTap output" };
                self.rejected += 1;
                let reason = format!("binary data, not {what} (text lines, or -f json records)");
                self.fatal = Some(Problem { line: 1, reason });
            }
        }
    }

    fn line_in(&mut self, line: &[u8]) {
        self.line += 1;
        if let Some(at) = self.cut_record.take() {
            if line.trim_ascii().is_empty() {
                self.cut_record = Some(at);
                return;
            }
            // The rest of the record is on the next lines: pretty-printed JSON, whose lines
            // would each become a printf "event". Refused whole.
            self.rejected += 1;
            self.fatal = Some(Problem {
                line: at,
                reason: "a JSON record that continues on the next line (pretty-printed JSON?): bpftrace -f json \
                         writes one record per line; compact it with `jq -c . FILE`"
                    .into(),
            });
            return;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if self.tool == Tool::Bpftrace && line.trim_ascii_start().starts_with(b"{") {
            self.json_record(line);
        } else {
            self.text_line(line, false);
        }
    }

    // -- producers and rows -------------------------------------------------------------

    fn producer(&mut self, pid: Option<i64>, tid: Option<i64>) -> i32 {
        if let Some(&p) = self.prod_ids.get(&(pid, tid)) {
            return p;
        }
        let parent = match (pid, tid) {
            (Some(p), Some(_)) => Some(self.producer(Some(p), None)),
            _ => None,
        };
        let id = self.producers.len() as i32;
        let (kind, name) = match (pid, tid) {
            (_, Some(t)) => ("thread", format!("tid {t}")),
            (Some(p), None) => ("process", format!("pid {p}")),
            (None, None) => ("tool", if self.tool == Tool::Bpftrace { "bpftrace" } else { "stap" }.to_string()),
        };
        self.producers.push(Producer { id, parent, kind, name, pid, tid });
        self.prod_ids.insert((pid, tid), id);
        self.seqs.push(0);
        id
    }

    fn next_seq(&mut self, p: i32) -> i64 {
        let s = &mut self.seqs[p as usize];
        *s += 1;
        *s - 1
    }

    /// Writes a row of pattern `pi`'s table (or of `table` when given: a span).
    fn emit(&mut self, pi: usize, ts: i64, producer: i32, seq: i64, dur: Option<i64>, vals: &[Option<FVal>]) {
        let t = &mut self.tables[pi];
        t.start(ts, producer, seq);
        if let Some(d) = dur {
            t.set_i64(DUR, d);
        }
        for (c, v) in self.cols[pi].iter().zip(vals) {
            if let (Some(c), Some(v)) = (c, v) {
                set(t, *c, v);
            }
        }
        t.end();
    }

    fn printf_row(&mut self, text: &[u8]) {
        let p = self.producer(None, None);
        let seq = self.next_seq(p);
        let ts = self.last_ts;
        let line = self.line as i64;
        let t = &mut self.tables[self.printf];
        t.start(ts, p, seq);
        t.set_str(3, &String::from_utf8_lossy(text));
        t.set_i64(4, line);
        t.end();
        self.count("printf_lines", 1);
    }

    // -- text ---------------------------------------------------------------------------

    fn text_line(&mut self, line: &[u8], from_json: bool) {
        let trimmed = line.trim_ascii();
        match &mut self.state {
            TextState::StapHist { rows, .. } => {
                if trimmed == b"~" {
                    rows.push(StapRow { value: 0, prefix: b'~', count: 0, elided: true, line: self.line });
                    return;
                }
                if let Some((prefix, value, count)) = stap_row(trimmed) {
                    rows.push(StapRow { value, prefix, count, elided: false, line: self.line });
                    return;
                }
                if row_like(trimmed, b"0123456789<>-") {
                    self.reject("histogram row: expected 'VALUE |@@@ COUNT'".into());
                    return;
                }
                self.end_table();
            }
            TextState::BtHist { map, key } => {
                if let Some((lo, hi, count)) = bt_hist_row(trimmed) {
                    let (m, k) = (map.clone(), key.clone());
                    let line = self.line as i64;
                    self.hist.push(&[
                        AV::S(Some(&m)),
                        AV::S(k.as_deref()),
                        AV::I(lo),
                        AV::I(hi),
                        AV::I(Some(count)),
                        AV::B(false),
                        AV::I(Some(line)),
                    ]);
                    return;
                }
                if row_like(trimmed, b"[(") {
                    self.reject("histogram row: expected '[LO, HI)  COUNT |@@@|'".into());
                    return;
                }
                self.state = TextState::Normal;
                if trimmed.is_empty() {
                    return;
                }
            }
            TextState::Normal => {}
        }
        if trimmed.is_empty() {
            return;
        }
        if self.try_patterns(line) {
            return;
        }
        if !from_json {
            if self.tool == Tool::Stap && is_stap_header(trimmed) {
                self.untitled += 1;
                let title = if self.last_title.is_empty() {
                    format!("hist{}", self.untitled)
                } else {
                    std::mem::take(&mut self.last_title)
                };
                self.state = TextState::StapHist { title, rows: Vec::new() };
                return;
            }
            if self.tool == Tool::Bpftrace {
                if trimmed.starts_with(b"Attaching ") && trimmed.ends_with(b"...") {
                    self.count("attached_probes_lines", 1);
                    return;
                }
                if trimmed.starts_with(b"@") && self.bt_map_line(trimmed) {
                    return;
                }
            }
        }
        if !from_json && line.len() >= 8 && super::looks_binary(line) {
            // Binary bytes further into a text file: not a printed line. (Looked at only here,
            // for lines nothing else understood: a line a pattern matched is text.)
            self.reject("binary data, not a printed line".into());
            return;
        }
        self.last_title = String::from_utf8_lossy(trimmed).trim_end_matches(':').trim().to_string();
        self.printf_row(trimmed);
    }

    fn try_patterns(&mut self, line: &[u8]) -> bool {
        let mut texts = Vec::new();
        let Some(pi) = self.patterns.iter().position(|p| p.matches(line, &mut texts)) else {
            if let Some(p) = self.patterns.iter().find(|p| p.starts(line)) {
                let msg = format!(
                    "starts like --pattern {} but does not match it ({} field{})",
                    p.name,
                    p.fields.len(),
                    if p.fields.len() == 1 { "" } else { "s" }
                );
                self.reject(msg);
                return true;
            }
            return false;
        };
        let mut vals = Vec::with_capacity(texts.len());
        for (f, t) in self.patterns[pi].fields.iter().zip(&texts) {
            match parse_field(t, f.ftype) {
                Ok(v) => vals.push(Some(v)),
                Err(e) => {
                    let msg = format!("pattern {}: field {}: {e}", self.patterns[pi].name, f.name);
                    self.reject(msg);
                    return true;
                }
            }
        }
        let sp = self.special[pi];
        let int = |i: Option<usize>| match i.map(|i| &vals[i]) {
            Some(Some(FVal::Int(v))) => Some(*v),
            _ => None,
        };
        let ts = int(sp[0]).unwrap_or(self.last_ts);
        if sp[0].is_some() {
            self.last_ts = ts;
        }
        let dur = int(sp[1]);
        if dur.is_some_and(|d| d < 0) {
            self.reject(format!("pattern {}: negative dur", self.patterns[pi].name));
            return true;
        }
        let producer = self.producer(int(sp[2]), int(sp[3]));
        let seq = self.next_seq(producer);
        match self.role[pi] {
            None => self.emit(pi, ts, producer, seq, dur, &vals),
            Some((si, is_begin)) => {
                let key_idx = if is_begin { &self.spans[si].begin_key } else { &self.spans[si].end_key };
                let mut key = Vec::new();
                for &k in key_idx {
                    match &vals[k] {
                        Some(FVal::Int(v)) => key.extend_from_slice(&v.to_le_bytes()),
                        Some(FVal::Float(v)) => key.extend_from_slice(&v.to_bits().to_le_bytes()),
                        Some(FVal::Str(s)) => key.extend_from_slice(s.as_bytes()),
                        None => {}
                    }
                    key.push(0);
                }
                if is_begin {
                    self.spans[si].open.entry(key).or_default().push(Pending { ts, producer, seq, vals });
                    return true;
                }
                let sp_ = &mut self.spans[si];
                let open = sp_.open.get_mut(&key).and_then(|v| v.pop());
                if sp_.open.get(&key).is_some_and(|v| v.is_empty()) {
                    sp_.open.remove(&key);
                }
                match open {
                    Some(b) if ts >= b.ts => {
                        sp_.stats.matched += 1;
                        let (bi, ti) = (sp_.begin, sp_.table);
                        let end_cols = sp_.end_cols.clone();
                        let t = &mut self.tables[ti];
                        t.start(b.ts, b.producer, b.seq);
                        t.set_i64(DUR, ts - b.ts);
                        // Begin fields are the first columns of the span, in order.
                        let mut c = 4;
                        for (f, v) in self.patterns[bi].fields.iter().zip(&b.vals) {
                            if matches!(f.name.as_str(), "ts" | "dur" | "pid" | "tid") {
                                continue;
                            }
                            if let Some(v) = v {
                                set(t, c, v);
                            }
                            c += 1;
                        }
                        for (col, v) in end_cols.iter().zip(&vals) {
                            if let (Some(col), Some(v)) = (col, v) {
                                set(t, *col, v);
                            }
                        }
                        t.end();
                    }
                    Some(b) => {
                        let msg = format!("span {}: end at {} ns before its start at {} ns", sp_.def.name, ts, b.ts);
                        sp_.open.entry(key).or_default().push(b);
                        self.reject(msg);
                    }
                    None => {
                        sp_.stats.unmatched_end += 1;
                        let e = sp_.end;
                        self.emit(e, ts, producer, seq, None, &vals);
                    }
                }
            }
        }
        true
    }

    /// `@name: v`, `@name[k]: v`, `@name: count N, average N, total N`, `@name:` (a histogram follows).
    fn bt_map_line(&mut self, t: &[u8]) -> bool {
        let Ok(s) = std::str::from_utf8(t) else { return false };
        let name_end = s[1..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(s.len(), |i| i + 1);
        let map = &s[..name_end];
        let mut rest = &s[name_end..];
        let mut key = None;
        if let Some(r) = rest.strip_prefix('[') {
            let Some(close) = r.rfind("]:") else { return false };
            key = Some(r[..close].to_string());
            rest = &r[close + 1..];
        }
        let Some(value) = rest.strip_prefix(':') else { return false };
        let value = value.trim();
        let line = self.line as i64;
        if value.is_empty() {
            self.state = TextState::BtHist { map: map.to_string(), key };
            return true;
        }
        if let Some(st) = parse_stats_text(value) {
            self.stats.push(&[
                AV::S(Some(map)),
                AV::S(key.as_deref()),
                AV::I(Some(st.0)),
                AV::I(Some(st.1)),
                AV::I(Some(st.2)),
                AV::I(Some(line)),
            ]);
            return true;
        }
        let v = value.parse::<i64>().ok();
        self.map.push(&[
            AV::S(Some(map)),
            AV::S(key.as_deref()),
            AV::I(v),
            AV::S(if v.is_some() { None } else { Some(value) }),
            AV::I(Some(line)),
        ]);
        true
    }

    /// Ends a SystemTap table: resolves bucket bounds and elided runs.
    fn end_table(&mut self) {
        let state = std::mem::replace(&mut self.state, TextState::Normal);
        let TextState::StapHist { title, rows } = state else { return };
        let plain: Vec<&StapRow> = rows.iter().filter(|r| !r.elided && r.prefix == 0).collect();
        let next_log = |v: i64| match v {
            0 => 1,
            -1 => 0,
            v if v > 0 => v.saturating_mul(2),
            v => v / 2,
        };
        let pow2 = |v: i64| v == 0 || v.unsigned_abs().is_power_of_two();
        let mut log = plain.iter().all(|r| pow2(r.value));
        let mut width = i64::MAX;
        for w in rows.windows(2) {
            if w[0].elided || w[1].elided || w[0].prefix != 0 || w[1].prefix != 0 {
                continue;
            }
            if next_log(w[0].value) != w[1].value {
                log = false;
            }
            let d = w[1].value - w[0].value;
            if d > 0 {
                width = width.min(d);
            }
        }
        if width == i64::MAX {
            width = 1;
        }
        let bounds = |r: &StapRow| -> (Option<i64>, Option<i64>) {
            match r.prefix {
                b'<' => (None, Some(r.value)),
                b'>' => (Some(r.value), None),
                _ if log => match r.value {
                    v if v > 0 => (Some(v), Some(v.saturating_mul(2))),
                    0 => (Some(0), Some(1)),
                    v => (Some(v.saturating_mul(2) + 1), Some(v + 1)),
                },
                _ => (Some(r.value), Some(r.value.saturating_add(width))),
            }
        };
        for (i, r) in rows.iter().enumerate() {
            let (lo, hi) = if r.elided {
                let prev = rows[..i].iter().rev().find(|r| !r.elided).and_then(|r| bounds(r).1);
                let next = rows[i + 1..].iter().find(|r| !r.elided).and_then(|r| bounds(r).0);
                (prev, next)
            } else {
                bounds(r)
            };
            self.hist.push(&[
                AV::S(Some(&title)),
                AV::S(None),
                AV::I(lo),
                AV::I(hi),
                AV::I(Some(r.count)),
                AV::B(r.elided),
                AV::I(Some(r.line as i64)),
            ]);
        }
    }

    // -- bpftrace -f json ---------------------------------------------------------------

    fn json_record(&mut self, line: &[u8]) {
        // bpftrace's time series emitter writes its points without commas between them
        // (`[{...}{...}]`, src/output/json.cpp): put them in before parsing.
        const GLUED: &[u8] = b"}{\"interval_start\"";
        let fixed: Vec<u8>;
        let line = if memchr::memmem::find(line, GLUED).is_some() {
            let mut v = Vec::with_capacity(line.len() + 64);
            let mut at = 0;
            for i in memchr::memmem::find_iter(line, GLUED) {
                v.extend_from_slice(&line[at..=i]);
                v.push(b',');
                at = i + 1;
            }
            v.extend_from_slice(&line[at..]);
            fixed = v;
            &fixed[..]
        } else {
            line
        };
        let mut cur = Cursor::new(line, 0, true);
        let mut rtype = None;
        let mut data = None;
        let mut count = None;
        let parsed = (|| {
            cur.expect(b'{', "'{'")?;
            if cur.peek_ws("a key")? == b'}' {
                cur.pos += 1;
                return Ok(());
            }
            loop {
                let k = cur.string()?;
                cur.expect(b':', "':'")?;
                let v = cur.value()?;
                if k.eq(line, b"type") {
                    rtype = Some(v);
                } else if k.eq(line, b"data") {
                    data = Some(v);
                } else if k.eq(line, b"count") {
                    count = Some(v);
                }
                if !cur.next_member(b'}', "',' or '}'")? {
                    return Ok(());
                }
            }
        })();
        if let Err(e) = parsed {
            // A record cut at the end of its line: the rest is on the next lines.
            let cut = match e {
                super::json::Error::Syntax { pos, .. } => pos >= line.trim_ascii_end().len(),
                super::json::Error::Incomplete => true,
            };
            let what = match e {
                super::json::Error::Syntax { what, .. } if !cut => what,
                _ => {
                    // Cut at the end of its line: the last line of an output cut short, or
                    // pretty-printed JSON when more lines follow (see `line_in`).
                    self.cut_record = Some(self.line);
                    return;
                }
            };
            self.reject(format!("invalid JSON record: expected {what}"));
            return;
        }
        if !line[cur.pos..].trim_ascii().is_empty() {
            self.reject("invalid JSON record: data after the object".into());
            return;
        }
        let Some(Value::Str(t)) = rtype else {
            self.reject("JSON record without a \"type\" string".into());
            return;
        };
        let t = t.text(line).into_owned();
        let num = |v: Option<Value>| match v {
            Some(Value::Num(n)) => n.as_i64(line),
            _ => None,
        };
        self.count(&format!("records_{t}"), 1);
        match t.as_str() {
            "printf" | "cat" | "join" | "syscall" | "time" => {
                let Some(Value::Str(s)) = data else {
                    self.reject(format!("\"{t}\" record without a \"data\" string"));
                    return;
                };
                let text = s.text(line).into_owned();
                self.pending_text.extend_from_slice(text.as_bytes());
                while let Some(nl) = self.pending_text.iter().position(|&c| c == b'\n') {
                    let l: Vec<u8> = self.pending_text.drain(..=nl).collect();
                    self.text_line(&l[..l.len() - 1], true);
                    if self.fatal.is_some() {
                        return;
                    }
                }
            }
            "lost_events" => {
                let n = num(count).or_else(|| data.and_then(|d| sub_num(line, d, b"events"))).unwrap_or(0);
                self.count("lost_events", n.max(0) as u64);
            }
            "attached_probes" => {
                let n = num(count).or_else(|| data.and_then(|d| sub_num(line, d, b"probes"))).unwrap_or(0);
                self.count("attached_probes", n.max(0) as u64);
            }
            "value" => {
                // print() of one value: a scalar, a tuple (array) or a struct (object), one row.
                let Some(d) = data else {
                    self.reject("\"value\" record without \"data\"".into());
                    return;
                };
                let (val, text) = scalar(line, d);
                let l = self.line as i64;
                self.map.push(&[AV::S(Some("value")), AV::S(None), AV::I(val), AV::S(text.as_deref()), AV::I(Some(l))]);
            }
            "map" | "hist" | "stats" | "tseries" => {
                let Some(Value::Nested { start, end, object: true }) = data else {
                    if let Some(d) = data {
                        let text = String::from_utf8_lossy(d.raw(line)).into_owned();
                        let l = self.line as i64;
                        self.map.push(&[AV::S(Some(&t)), AV::S(None), AV::I(None), AV::S(Some(&text)), AV::I(Some(l))]);
                        return;
                    }
                    self.reject(format!("\"{t}\" record without \"data\""));
                    return;
                };
                let obj = &line[start..end];
                for (k, v) in members(obj) {
                    let name = k.text(obj).into_owned();
                    self.json_aggregate(&t, &name, obj, v);
                }
            }
            _ => {}
        }
    }

    fn json_aggregate(&mut self, rtype: &str, map: &str, buf: &[u8], v: Value) {
        let line = self.line as i64;
        match (rtype, v) {
            ("tseries", Value::Nested { start, end, object: false }) => self.json_tseries(map, None, &buf[start..end]),
            ("tseries", Value::Nested { start, end, object: true }) => {
                let obj = &buf[start..end];
                for (k, v) in members(obj) {
                    if let Value::Nested { start, end, object: false } = v {
                        let key = k.text(obj).into_owned();
                        self.json_tseries(map, Some(&key), &obj[start..end]);
                    }
                }
            }
            ("stats", Value::Num(_) | Value::Str(_)) => {
                // An avg() map without keys: `{"@a": 5}` is its average.
                self.stats.push(&[
                    AV::S(Some(map)),
                    AV::S(None),
                    AV::I(None),
                    AV::I(num(buf, v)),
                    AV::I(None),
                    AV::I(Some(line)),
                ]);
            }
            ("hist", Value::Nested { start, end, object: false }) => self.json_hist(map, None, &buf[start..end]),
            ("hist", Value::Nested { start, end, object: true }) => {
                let obj = &buf[start..end];
                for (k, v) in members(obj) {
                    if let Value::Nested { start, end, object: false } = v {
                        let key = k.text(obj).into_owned();
                        self.json_hist(map, Some(&key), &obj[start..end]);
                    }
                }
            }
            ("stats", Value::Nested { start, end, object: true }) => {
                let obj = &buf[start..end];
                let ms = members(obj);
                let is_stats = |k: &[u8]| ms.iter().any(|(n, v)| n.eq(obj, k) && matches!(v, Value::Num(_)));
                if is_stats(b"count") && is_stats(b"average") && is_stats(b"total") {
                    self.json_stats(map, None, obj);
                } else {
                    for (k, v) in ms {
                        let key = k.text(obj).into_owned();
                        match v {
                            Value::Nested { start, end, object: true } => {
                                self.json_stats(map, Some(&key), &obj[start..end])
                            }
                            // An avg() map: `{"@": {"c": 3, "d": 4}}`, each key's average.
                            Value::Num(_) | Value::Str(_) => self.stats.push(&[
                                AV::S(Some(map)),
                                AV::S(Some(&key)),
                                AV::I(None),
                                AV::I(num(obj, v)),
                                AV::I(None),
                                AV::I(Some(line)),
                            ]),
                            _ => {}
                        }
                    }
                }
            }
            (_, Value::Nested { start, end, object: true }) if rtype == "map" => {
                let obj = &buf[start..end];
                for (k, v) in members(obj) {
                    let key = k.text(obj).into_owned();
                    let (val, text) = scalar(obj, v);
                    self.map.push(&[
                        AV::S(Some(map)),
                        AV::S(Some(&key)),
                        AV::I(val),
                        AV::S(text.as_deref()),
                        AV::I(Some(line)),
                    ]);
                }
            }
            (_, v) => {
                let (val, text) = scalar(buf, v);
                self.map.push(&[AV::S(Some(map)), AV::S(None), AV::I(val), AV::S(text.as_deref()), AV::I(Some(line))]);
            }
        }
    }

    fn json_hist(&mut self, map: &str, key: Option<&str>, arr: &[u8]) {
        let line = self.line as i64;
        let mut cur = Cursor::new(arr, 0, true);
        if cur.expect(b'[', "[").is_err() {
            return;
        }
        if cur.peek_ws("]") == Ok(b']') {
            // An empty histogram (`zero(@h)`, or no samples yet) is a result with no buckets.
            if key.is_none() && !self.empty.iter().any(|(k, m)| *k == "hist" && m == map) {
                self.empty.push(("hist", map.to_string()));
            }
            return;
        }
        loop {
            let Ok(v) = cur.value() else { return };
            if let Value::Nested { start, end, object: true } = v {
                let o = &arr[start..end];
                let lo = sub_num(o, Value::Nested { start: 0, end: o.len(), object: true }, b"min");
                let hi = sub_num(o, Value::Nested { start: 0, end: o.len(), object: true }, b"max")
                    .map(|m| m.saturating_add(1));
                let count = sub_num(o, Value::Nested { start: 0, end: o.len(), object: true }, b"count").unwrap_or(0);
                self.hist.push(&[
                    AV::S(Some(map)),
                    AV::S(key),
                    AV::I(lo),
                    AV::I(hi),
                    AV::I(Some(count)),
                    AV::B(false),
                    AV::I(Some(line)),
                ]);
            }
            if cur.next_member(b']', "]") != Ok(true) {
                return;
            }
        }
    }

    /// The points of one time series: `[{"interval_start": T, "value": V}, ...]`, each a
    /// `tseries` counter row at T (epoch ns as a number, or bpftrace's printed timestamp).
    fn json_tseries(&mut self, map: &str, key: Option<&str>, arr: &[u8]) {
        let Some(t) = self.tseries else { return };
        let mut cur = Cursor::new(arr, 0, true);
        if cur.expect(b'[', "[").is_err() || cur.peek_ws("]") == Ok(b']') {
            return;
        }
        let p = self.producer(None, None);
        loop {
            let Ok(v) = cur.value() else { return };
            if let Value::Nested { start, end, object: true } = v {
                let o = &arr[start..end];
                let ms = members(o);
                let get = |k: &[u8]| ms.iter().find(|(n, _)| n.eq(o, k)).map(|(_, v)| *v);
                let ts = match get(b"interval_start") {
                    Some(Value::Num(n)) => n.as_i64(o),
                    Some(Value::Str(s)) => timestamp_ns(s.text(o).as_bytes()),
                    _ => None,
                };
                let Some(ts) = ts else {
                    self.reject(format!("tseries {map}: a point without a readable \"interval_start\""));
                    return;
                };
                let value = match get(b"value") {
                    Some(Value::Num(n)) => Some(n.as_f64(o)),
                    Some(Value::Str(s)) => s.text(o).parse::<f64>().ok(),
                    _ => None, // an interval with no value (null)
                };
                self.last_ts = self.last_ts.max(ts);
                let seq = self.next_seq(p);
                let tb = &mut self.tables[t];
                tb.start(ts, p, seq);
                tb.set_str(3, map);
                if let Some(k) = key {
                    tb.set_str(4, k);
                }
                if let Some(v) = value {
                    tb.set_f64(5, v);
                }
                tb.set_i64(6, self.line as i64);
                tb.end();
            }
            if cur.next_member(b']', "]") != Ok(true) {
                return;
            }
        }
    }

    fn json_stats(&mut self, map: &str, key: Option<&str>, obj: &[u8]) {
        let whole = Value::Nested { start: 0, end: obj.len(), object: true };
        let g = |k: &[u8]| sub_num(obj, whole, k);
        let line = self.line as i64;
        self.stats.push(&[
            AV::S(Some(map)),
            AV::S(key),
            AV::I(g(b"count")),
            AV::I(g(b"average")),
            AV::I(g(b"total")),
            AV::I(Some(line)),
        ]);
    }
}

fn set(t: &mut Table, c: usize, v: &FVal) {
    match v {
        FVal::Int(x) => t.set_i64(c, *x),
        FVal::Float(x) => t.set_f64(c, *x),
        FVal::Str(s) => t.set_str(c, s),
    }
}

fn members(obj: &[u8]) -> Vec<(super::json::Str, Value)> {
    let mut out = Vec::new();
    let mut cur = Cursor::new(obj, 0, true);
    if cur.expect(b'{', "{").is_err() || cur.peek_ws("}") == Ok(b'}') {
        return out;
    }
    loop {
        let Ok(k) = cur.string() else { return out };
        if cur.expect(b':', ":").is_err() {
            return out;
        }
        let Ok(v) = cur.value() else { return out };
        out.push((k, v));
        if cur.next_member(b'}', "}") != Ok(true) {
            return out;
        }
    }
}

/// Integer member `key` of the object `v` in `buf` (numbers, or strings holding one).
fn sub_num(buf: &[u8], v: Value, key: &[u8]) -> Option<i64> {
    let Value::Nested { start, end, object: true } = v else { return None };
    let obj = &buf[start..end];
    members(obj).into_iter().find(|(k, _)| k.eq(obj, key)).and_then(|(_, v)| match v {
        Value::Num(n) => n.as_i64(obj).or_else(|| Some(n.as_f64(obj).round() as i64)),
        Value::Str(s) => s.text(obj).parse().ok(),
        _ => None,
    })
}

/// A number (or a string holding one, as bpftrace writes integers a double cannot hold).
fn num(buf: &[u8], v: Value) -> Option<i64> {
    match v {
        Value::Num(n) => n.as_i64(buf).or_else(|| Some(n.as_f64(buf).round() as i64)),
        Value::Str(s) => s.text(buf).parse().ok(),
        _ => None,
    }
}

/// bpftrace's printed time point (`2025-03-01 12:34:56.123456789`, UTC, as C++ prints a
/// system_clock time) as epoch ns, or `HH:MM:SS[.frac]` as ns since midnight.
fn timestamp_ns(t: &[u8]) -> Option<i64> {
    let t = std::str::from_utf8(t).ok()?.trim();
    let (date, time) = match t.split_once([' ', 'T']) {
        Some((d, tm)) => (Some(d), tm.trim_end_matches('Z')),
        None => (None, t),
    };
    let mut hms = time.splitn(3, ':');
    let (h, m, sec) = (hms.next()?.parse::<i64>().ok()?, hms.next()?.parse::<i64>().ok()?, hms.next()?);
    let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let mut ns: i64 = 0;
    for (i, c) in frac.bytes().take(9).enumerate() {
        if !c.is_ascii_digit() {
            return None;
        }
        ns += (c - b'0') as i64 * 10i64.pow(8 - i as u32);
    }
    let day_ns = ((h * 60 + m) * 60 + whole.parse::<i64>().ok()?) * 1_000_000_000 + ns;
    let Some(date) = date else { return Some(day_ns) };
    let mut ymd = date.splitn(3, '-');
    let (y, mo, d) =
        (ymd.next()?.parse::<i64>().ok()?, ymd.next()?.parse::<i64>().ok()?, ymd.next()?.parse::<i64>().ok()?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    // Days since 1970-01-01 (proleptic Gregorian, Howard Hinnant's days_from_civil).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days.checked_mul(86_400_000_000_000)?.checked_add(day_ns)
}

/// A map value: (integer, else its text).
fn scalar(buf: &[u8], v: Value) -> (Option<i64>, Option<String>) {
    match v {
        Value::Num(n) if n.as_i64(buf).is_some() => (n.as_i64(buf), None),
        Value::Str(s) => {
            let t = s.text(buf).into_owned();
            match t.parse::<i64>() {
                Ok(i) => (Some(i), None),
                Err(_) => (None, Some(t)),
            }
        }
        v => (None, Some(String::from_utf8_lossy(v.raw(buf)).into_owned())),
    }
}

fn is_stap_header(t: &[u8]) -> bool {
    let Some(rest) = t.strip_prefix(b"value |") else { return false };
    let Some(dashes) = rest.strip_suffix(b" count") else { return false };
    !dashes.is_empty() && dashes.iter().all(|&c| c == b'-')
}

/// `[<|>]value |@@@ count`.
/// A line inside a histogram that looks like one of its rows (starts with one of
/// `first`, has a `|`) without being one.
fn row_like(t: &[u8], first: &[u8]) -> bool {
    t.first().is_some_and(|c| first.contains(c)) && t.contains(&b'|')
}

fn stap_row(t: &[u8]) -> Option<(u8, i64, i64)> {
    let (prefix, t) = match t.first()? {
        b'<' => (b'<', &t[1..]),
        b'>' => (b'>', &t[1..]),
        _ => (0, t),
    };
    let bar = t.iter().position(|&c| c == b'|')?;
    let value: i64 = std::str::from_utf8(&t[..bar]).ok()?.trim().parse().ok()?;
    let rest = &t[bar + 1..];
    let rest = &rest[rest.iter().take_while(|&&c| c == b'@').count()..];
    let count: i64 = std::str::from_utf8(rest).ok()?.trim().parse().ok()?;
    Some((prefix, value, count))
}

/// A bpftrace histogram value with its power-of-1024 suffix ("4K" = 4096).
fn bt_value(s: &str) -> Option<i64> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1i64 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        b'T' => (&s[..s.len() - 1], 1 << 40),
        b'P' => (&s[..s.len() - 1], 1 << 50),
        _ => (s, 1),
    };
    num.parse::<i64>().ok()?.checked_mul(mult)
}

/// `[lo, hi)   count |@@@|`, `[v]`, `(..., hi)`, `[lo, ...)`: (lo, hi exclusive, count).
fn bt_hist_row(t: &[u8]) -> Option<(Option<i64>, Option<i64>, i64)> {
    let s = std::str::from_utf8(t).ok()?;
    let open = s.chars().next()?;
    if open != '[' && open != '(' {
        return None;
    }
    let close = s.find([')', ']'])?;
    let label = &s[1..close];
    let closer = s.as_bytes()[close];
    let rest = s[close + 1..].trim_start();
    let bar = rest.find('|')?;
    let count: i64 = rest[..bar].trim().parse().ok()?;
    if !rest[bar + 1..].trim_end().ends_with('|') {
        return None;
    }
    let (lo, hi) = match label.split_once(',') {
        None if closer == b']' => {
            let v = bt_value(label)?;
            (Some(v), Some(v.saturating_add(1)))
        }
        None => return None,
        Some((a, b)) => {
            let lo = if a.trim() == "..." { None } else { Some(bt_value(a)?) };
            let hi = if b.trim() == "..." { None } else { Some(bt_value(b)?) };
            (lo, hi)
        }
    };
    Some((lo, hi, count))
}

/// `count N, average N, total N`.
fn parse_stats_text(v: &str) -> Option<(i64, i64, i64)> {
    let mut out = [0i64; 3];
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        return None;
    }
    for (i, (p, want)) in parts.iter().zip(["count", "average", "total"]).enumerate() {
        out[i] = p.strip_prefix(want)?.trim().parse().ok()?;
    }
    Some((out[0], out[1], out[2]))
}

pub mod decl;
#[cfg(test)]
mod tests;

super::chunk_parser!(ProbeParser {
    /// The tool, processes (pid) and threads (tid).
    fn producers(&self) -> Vec<ProducerRow> {
        self.producers
            .iter()
            .map(|p| {
                let mut attrs = Vec::new();
                if let Some(v) = p.pid {
                    attrs.push(("pid".to_string(), Attr::Int(v)));
                }
                if let Some(v) = p.tid {
                    attrs.push(("tid".to_string(), Attr::Int(v)));
                }
                ProducerRow { id: p.id, parent: p.parent, kind: p.kind.to_string(), name: p.name.clone(), attrs }
            })
            .collect()
    }

    /// Records by type, lost events, printf lines, rejected.
    fn stats(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self.counts.iter().map(|(k, v)| (k.clone(), *v)).collect();
        out.sort();
        out.push(("rejected".into(), self.rejected));
        out
    }

    fn problems(&self) -> Vec<super::parser::Problem> {
        self.problems.iter().map(|p| super::parser::Problem::at_line(p.line, p.reason.clone())).collect()
    }

    fn fatal(&self) -> Option<super::parser::Problem> {
        self.fatal.as_ref().map(|p| super::parser::Problem::at_line(p.line, p.reason.clone()))
    }

    /// The types of the patterns and spans, with each field's unit (the pattern's, else the
    /// same field's in another pattern, else "as printed").
    fn input_types(&self) -> Vec<InputType> {
        let mut by_field: Vec<(&str, &str)> = Vec::new();
        for p in &self.patterns {
            for f in &p.fields {
                if !by_field.iter().any(|(n, _)| *n == f.name) {
                    by_field.push((&f.name, &f.unit));
                }
            }
        }
        let mut out = Vec::new();
        for (t, kind) in self.tables.iter().zip(&self.kinds) {
            let pattern = self.patterns.iter().find(|p| p.name == t.name);
            if pattern.is_none() && !self.spans.iter().any(|s| s.def.name == t.name) {
                continue; // printf, tseries: declared
            }
            let own = |c: &str| pattern.and_then(|p| p.fields.iter().find(|f| f.name == c)).map(|f| f.unit.as_str());
            let mut columns = Vec::new();
            for (c, ptype) in t.columns() {
                if matches!(c.as_str(), "ts" | "producer" | "seq" | "dur") {
                    continue;
                }
                let field = match c.strip_prefix("end_") {
                    Some(f) if own(&c).is_none() => f.to_string(),
                    _ => c.clone(),
                };
                let unit = own(&c)
                    .filter(|u| !u.is_empty())
                    .or_else(|| by_field.iter().find(|(n, _)| *n == field).map(|(_, u)| *u))
                    .filter(|u| !u.is_empty())
                    .unwrap_or("as printed")
                    .to_string();
                let end = if field != c { " of the end event" } else { "" };
                columns.push((c.clone(), ptype, unit, format!("printf field '{field}'{end}")));
            }
            let doc = match pattern {
                Some(_) => format!("lines matching the --pattern '{}'", t.name),
                None => "a span: a start event paired with the most recent unmatched start of the same key".into(),
            };
            out.push(InputType { name: t.name.clone(), kind, doc, columns });
        }
        out
    }

    /// The aggregates: ("hist" | "map" | "stats", batch), non-empty ones only.
    fn take_results(&mut self) -> Vec<(String, RecordBatch)> {
        self.take_aggregates().into_iter().map(|(k, b)| (k.to_string(), b)).collect()
    }

    /// `{"spans": {name: {matched, unmatched_begin, unmatched_end}}, "empty_results": [[kind,
    /// map], ...]}` (aggregates printed with nothing in them).
    fn details_json(&self) -> String {
        let mut out = b"{\"spans\": {".to_vec();
        for (i, (name, s)) in self.span_stats().iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            super::json::write_str(&mut out, name.as_bytes());
            out.extend_from_slice(
                format!(
                    ": {{\"matched\": {}, \"unmatched_begin\": {}, \"unmatched_end\": {}}}",
                    s.matched, s.unmatched_begin, s.unmatched_end
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(b"}, \"empty_results\": [");
        for (i, (kind, map)) in self.empty.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"[" } else { b", [" });
            super::json::write_str(&mut out, kind.as_bytes());
            out.extend_from_slice(b", ");
            super::json::write_str(&mut out, map.as_bytes());
            out.push(b']');
        }
        out.extend_from_slice(b"]}");
        String::from_utf8_lossy(&out).into_owned()
    }
});
