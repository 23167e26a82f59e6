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
//! This file owns the parser's state (tables, producers, open spans) and the line reader;
//! `pattern.rs` the templates and spans, `text.rs` the text output of both tools, `records.rs`
//! bpftrace's JSON records, `agg.rs` the result tables; tests are in tests.rs.

use arrow_array::RecordBatch;

use super::parser::{Attr, InputType, ProducerRow};
use super::table::{FastMap, PType, Table, DUR};

mod agg;
mod pattern;
mod records;
mod text;

use agg::{Agg, AV};
use pattern::{parse_field, FVal};
pub use pattern::{FieldDef, FieldType, Pattern, SpanDef};

/// Which tool wrote the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// bpftrace: `-f json` records, or text (printf lines, `@map` output, histograms).
    Bpftrace,
    /// SystemTap: printf lines and histogram tables.
    Stap,
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
}

fn set(t: &mut Table, c: usize, v: &FVal) {
    match v {
        FVal::Int(x) => t.set_i64(c, *x),
        FVal::Float(x) => t.set_f64(c, *x),
        FVal::Str(s) => t.set_str(c, s),
    }
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
