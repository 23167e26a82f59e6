//! Writing events as Chrome Trace Event JSON (what Perfetto UI and chrome://tracing open).
//!
//! Owns the per-row encoding. The caller (Python's `formats/chrome/exporter.py`) selects each
//! event type's rows with SQL that names the columns by role, so this module needs no
//! knowledge of formats:
//!
//! - `ts`, `producer` (required); `dur` (spans);
//! - `__ph` (phase, else the batch default), `__name`, `__cat`, `__s` (instant scope),
//!   `__id`, `__id_local` (written as `id2.local`), `__tts`, `__tdur`, `__sf`, `__stack`
//!   (JSON text), `__series` + `__value` (a counter sample), `__dst_producer` + `__dst_ts`
//!   (+ `__bp`) (the far end of a flow/link), `__args` / `__end_args` (JSON object text
//!   merged into `args`);
//! - `a:<key>` columns become `args.<key>`; `e:<key>` the args of the closing event;
//! - `__ivalue`: a counter sample's exact integer (written instead of `__value` when set).
//!
//! Counter samples (`C` rows with `__series`) that came from one `C` event (same ts,
//! producer, name, category and id, consecutive `seq`, distinct series) are written back
//! as that one event with all its series: the open event's closing braces wait for the
//! next row, across batches, until [`ChromeWriter::finish`].
//!
//! A span with phase `B` (or `b`) is written as its begin and end events, one after the
//! other (the end carrying the `e:` args), so an importer pairing by thread order gets
//! the same spans back; other spans are `X` events. Timestamps are integer nanoseconds
//! written as exact decimal microseconds.

use std::io::Write;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use crate::formats::chrome::write_us;
use crate::formats::json::write_str;
use crate::formats::table::FastMap;

/// Turns record batches into Chrome JSON event text.
pub struct ChromeWriter {
    producers: FastMap<i32, (String, String)>,
    first: bool,
    /// Events written so far.
    pub events: u64,
    /// The counter event whose args are still open.
    open: Option<OpenCounter>,
    /// The batch's default name and category (rows without those columns).
    defaults: (String, String),
}

/// A `C` event written up to its last series, waiting to learn whether the next row
/// adds a series to it.
struct OpenCounter {
    ts: i64,
    producer: i32,
    seq: i64,
    name: String,
    cat: String,
    id: Option<String>,
    series: Vec<String>,
}

enum Col<'a> {
    I64(&'a arrow_array::Int64Array),
    I32(&'a arrow_array::Int32Array),
    F64(&'a arrow_array::Float64Array),
    Bool(&'a arrow_array::BooleanArray),
    Str(&'a arrow_array::StringArray),
    LStr(&'a arrow_array::LargeStringArray),
    Other,
}

impl<'a> Col<'a> {
    fn of(a: &'a ArrayRef) -> Col<'a> {
        match a.data_type() {
            DataType::Int64 => Col::I64(a.as_primitive::<Int64Type>()),
            DataType::Int32 => Col::I32(a.as_primitive::<Int32Type>()),
            DataType::Float64 => Col::F64(a.as_primitive::<Float64Type>()),
            DataType::Boolean => Col::Bool(a.as_boolean()),
            DataType::Utf8 => Col::Str(a.as_string::<i32>()),
            DataType::LargeUtf8 => Col::LStr(a.as_string::<i64>()),
            _ => Col::Other,
        }
    }

    fn valid(&self, i: usize) -> bool {
        match self {
            Col::I64(a) => a.is_valid(i),
            Col::I32(a) => a.is_valid(i),
            Col::F64(a) => a.is_valid(i),
            Col::Bool(a) => a.is_valid(i),
            Col::Str(a) => a.is_valid(i),
            Col::LStr(a) => a.is_valid(i),
            Col::Other => false,
        }
    }

    fn int(&self, i: usize) -> Option<i64> {
        if !self.valid(i) {
            return None;
        }
        match self {
            Col::I64(a) => Some(a.value(i)),
            Col::I32(a) => Some(a.value(i) as i64),
            _ => None,
        }
    }

    fn str(&self, i: usize) -> Option<&'a str> {
        if !self.valid(i) {
            return None;
        }
        match self {
            Col::Str(a) => Some(a.value(i)),
            Col::LStr(a) => Some(a.value(i)),
            _ => None,
        }
    }

    /// Writes the value as JSON; false when null.
    fn write(&self, out: &mut Vec<u8>, i: usize) -> bool {
        if !self.valid(i) {
            return false;
        }
        match self {
            Col::I64(a) => {
                let _ = write!(out, "{}", a.value(i));
            }
            Col::I32(a) => {
                let _ = write!(out, "{}", a.value(i));
            }
            Col::F64(a) => write_f64(out, a.value(i)),
            Col::Bool(a) => out.extend_from_slice(if a.value(i) { b"true" } else { b"false" }),
            Col::Str(a) => write_str(out, a.value(i).as_bytes()),
            Col::LStr(a) => write_str(out, a.value(i).as_bytes()),
            Col::Other => return false,
        }
        true
    }
}

/// A float as JSON: always with a '.' or exponent (so it reads back as a float), null
/// for NaN and infinities (JSON has none).
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    let start = out.len();
    let a = v.abs();
    if a != 0.0 && !(1e-5..1e16).contains(&a) {
        // Shortest exact digits with an exponent (1e300, not 301 digits).
        let _ = write!(out, "{v:e}");
        return;
    }
    let _ = write!(out, "{v}");
    if !out[start..].iter().any(|&c| c == b'.' || c == b'e' || c == b'E') {
        out.extend_from_slice(b".0");
    }
}

struct Roles<'a> {
    ts: Col<'a>,
    producer: Col<'a>,
    dur: Option<Col<'a>>,
    ph: Option<Col<'a>>,
    name: Option<Col<'a>>,
    cat: Option<Col<'a>>,
    s: Option<Col<'a>>,
    id: Option<Col<'a>>,
    id_local: Option<Col<'a>>,
    tts: Option<Col<'a>>,
    tdur: Option<Col<'a>>,
    sf: Option<Col<'a>>,
    stack: Option<Col<'a>>,
    series: Option<Col<'a>>,
    value: Option<Col<'a>>,
    ivalue: Option<Col<'a>>,
    seq: Option<Col<'a>>,
    dst_producer: Option<Col<'a>>,
    dst_ts: Option<Col<'a>>,
    dst_ph: Option<Col<'a>>,
    bp: Option<Col<'a>>,
    args: Option<Col<'a>>,
    end_args: Option<Col<'a>>,
    a: Vec<(Vec<u8>, Col<'a>)>,
    e: Vec<(Vec<u8>, Col<'a>)>,
}

impl ChromeWriter {
    /// A writer; `producers` maps producer id -> (pid, tid) as JSON text; `first` is
    /// false when events were already written before (a separator is needed).
    pub fn new(producers: Vec<(i32, String, String)>, first: bool) -> Self {
        ChromeWriter {
            producers: producers.into_iter().map(|(i, p, t)| (i, (p, t))).collect(),
            first,
            events: 0,
            open: None,
            defaults: Default::default(),
        }
    }

    /// Closes the counter event left open by the last rows, if any (call once at the end).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.open.take().is_some() {
            out.extend_from_slice(b"}}");
        }
    }

    /// Adds row `i` to the open counter event when it is the next series of that event.
    #[allow(clippy::too_many_arguments)]
    fn merge_counter(
        &mut self,
        out: &mut Vec<u8>,
        r: &Roles<'_>,
        i: usize,
        ts: i64,
        producer: i32,
        name: &str,
        cat: &str,
    ) -> bool {
        let (Some(o), Some(series)) = (self.open.as_mut(), r.series.as_ref().and_then(|c| c.str(i))) else {
            return false;
        };
        let seq = r.seq.as_ref().and_then(|c| c.int(i));
        let id = r.id.as_ref().and_then(|c| c.str(i));
        let same = o.ts == ts
            && o.producer == producer
            && seq == Some(o.seq + 1)
            && o.name == name
            && o.cat == cat
            && o.id.as_deref() == id
            && !o.series.iter().any(|s| s == series);
        if !same || !write_sample(out, r, i, true) {
            return false;
        }
        o.seq += 1;
        o.series.push(series.to_string());
        true
    }

    /// Appends the events of `batch` to `out`; `ph`, `name` and `cat` are the defaults
    /// for rows without those columns. Fails when `ts` or `producer` is missing.
    pub fn encode(
        &mut self,
        batch: &RecordBatch,
        ph: &str,
        name: &str,
        cat: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let schema = batch.schema();
        let get = |n: &str| schema.index_of(n).ok().map(|i| Col::of(batch.column(i)));
        let mut r = Roles {
            ts: get("ts").ok_or("no ts column")?,
            producer: get("producer").ok_or("no producer column")?,
            dur: get("dur"),
            ph: get("__ph"),
            name: get("__name"),
            cat: get("__cat"),
            s: get("__s"),
            id: get("__id"),
            id_local: get("__id_local"),
            tts: get("__tts"),
            tdur: get("__tdur"),
            sf: get("__sf"),
            stack: get("__stack"),
            series: get("__series"),
            value: get("__value"),
            ivalue: get("__ivalue"),
            seq: get("seq"),
            dst_producer: get("__dst_producer"),
            dst_ts: get("__dst_ts"),
            dst_ph: get("__dst_ph"),
            bp: get("__bp"),
            args: get("__args"),
            end_args: get("__end_args"),
            a: Vec::new(),
            e: Vec::new(),
        };
        for (i, f) in schema.fields().iter().enumerate() {
            match arg_role(f.name()) {
                Some((false, k)) => r.a.push((json_key(k), Col::of(batch.column(i)))),
                Some((true, k)) => r.e.push((json_key(k), Col::of(batch.column(i)))),
                None => {}
            }
        }
        let default_ph = ph.as_bytes().first().copied().unwrap_or(b'i');
        if self.defaults.0 != name || self.defaults.1 != cat {
            self.defaults = (name.to_string(), cat.to_string());
        }
        let (name_json, cat_json) = (json_key(name), json_key(cat));
        for i in 0..batch.num_rows() {
            let Some(ts) = r.ts.int(i) else { continue };
            let producer = r.producer.int(i).unwrap_or(0) as i32;
            let ph = r.ph.as_ref().and_then(|c| c.str(i)).and_then(|s| s.bytes().next()).unwrap_or(default_ph);
            let dur = r.dur.as_ref().and_then(|c| c.int(i));
            let dst = r.dst_ts.as_ref().and_then(|c| c.int(i));
            if ph == b'C' && r.series.is_some() {
                let n = r.name.as_ref().and_then(|c| c.str(i)).unwrap_or(name);
                let c = r.cat.as_ref().and_then(|c| c.str(i)).unwrap_or(cat);
                if self.merge_counter(out, &r, i, ts, producer, n, c) {
                    continue;
                }
            }
            match (ph, dur, dst) {
                (b'B' | b'b', Some(d), _) => {
                    let end = if ph == b'B' { b'E' } else { b'e' };
                    self.event(out, &r, i, ph, ts, producer, None, &name_json, &cat_json, Part::Begin);
                    self.event(out, &r, i, end, ts + d, producer, None, &name_json, &cat_json, Part::End);
                }
                (b's' | b't', _, Some(dts)) => {
                    // A flow step: a `t` source was already written as the destination of the
                    // previous arrow of its chain, so a chain s -> t -> f comes out as it went in.
                    let dp = r.dst_producer.as_ref().and_then(|c| c.int(i)).unwrap_or(producer as i64) as i32;
                    let dph = r.dst_ph.as_ref().and_then(|c| c.str(i)).and_then(|s| s.bytes().next()).unwrap_or(b'f');
                    if ph == b's' {
                        self.event(out, &r, i, b's', ts, producer, None, &name_json, &cat_json, Part::Begin);
                    }
                    self.event(out, &r, i, dph, dts, dp, None, &name_json, &cat_json, Part::FlowEnd);
                }
                (b't', _, None) if r.dst_ts.is_some() => {} // the last step of a chain: written already
                (_, Some(d), _) if ph == b'X' || !matches!(ph, b'B' | b'b' | b'E' | b'e') => {
                    let ph = if matches!(ph, b'i' | b'I' | b'C' | b'n' | b'P' | b'M') { b'X' } else { ph };
                    self.event(out, &r, i, ph, ts, producer, Some(d), &name_json, &cat_json, Part::Whole);
                }
                _ => self.event(out, &r, i, ph, ts, producer, None, &name_json, &cat_json, Part::Whole),
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn event(
        &mut self,
        out: &mut Vec<u8>,
        r: &Roles<'_>,
        i: usize,
        ph: u8,
        ts: i64,
        producer: i32,
        dur: Option<i64>,
        name_json: &[u8],
        cat_json: &[u8],
        part: Part,
    ) {
        self.finish(out);
        out.extend_from_slice(if self.first { b"\n{\"name\":" } else { b",\n{\"name\":" });
        self.first = false;
        self.events += 1;
        match r.name.as_ref().and_then(|c| c.str(i)) {
            Some(n) => write_str(out, n.as_bytes()),
            None => out.extend_from_slice(name_json),
        }
        match r.cat.as_ref().and_then(|c| c.str(i)) {
            Some("") => {}
            Some(c) => {
                out.extend_from_slice(b",\"cat\":");
                write_str(out, c.as_bytes());
            }
            None if cat_json != b"\"\"" => {
                out.extend_from_slice(b",\"cat\":");
                out.extend_from_slice(cat_json);
            }
            None => {}
        }
        out.extend_from_slice(b",\"ph\":\"");
        out.push(ph);
        out.extend_from_slice(b"\",\"ts\":");
        write_us(out, ts);
        if let Some(d) = dur {
            out.extend_from_slice(b",\"dur\":");
            write_us(out, d);
        }
        match self.producers.get(&producer) {
            Some((p, t)) if t.is_empty() => {
                let _ = write!(out, ",\"pid\":{p}");
            }
            Some((p, t)) => {
                let _ = write!(out, ",\"pid\":{p},\"tid\":{t}");
            }
            None => {
                let _ = write!(out, ",\"pid\":{producer},\"tid\":{producer}");
            }
        }
        let tts = r.tts.as_ref().and_then(|c| c.int(i));
        match part {
            Part::Whole | Part::Begin => {
                if let Some(t) = tts {
                    out.extend_from_slice(b",\"tts\":");
                    write_us(out, t);
                    if let (Some(td), Some(_)) = (r.tdur.as_ref().and_then(|c| c.int(i)), dur) {
                        out.extend_from_slice(b",\"tdur\":");
                        write_us(out, td);
                    }
                }
            }
            Part::End => {
                if let (Some(t), Some(td)) = (tts, r.tdur.as_ref().and_then(|c| c.int(i))) {
                    out.extend_from_slice(b",\"tts\":");
                    write_us(out, t + td);
                }
            }
            Part::FlowEnd => {}
        }
        if let Some(id) = r.id.as_ref().and_then(|c| c.str(i)) {
            let local = r.id_local.as_ref().filter(|c| c.valid(i)).map(|c| matches!(c, Col::Bool(a) if a.value(i)));
            match local {
                Some(l) => {
                    out.extend_from_slice(if l { b",\"id2\":{\"local\":" } else { b",\"id2\":{\"global\":" });
                    write_str(out, id.as_bytes());
                    out.push(b'}');
                }
                None => {
                    out.extend_from_slice(b",\"id\":");
                    write_str(out, id.as_bytes());
                }
            }
        }
        if matches!(part, Part::Whole) {
            if let Some(s) = r.s.as_ref().and_then(|c| c.str(i)) {
                out.extend_from_slice(b",\"s\":");
                write_str(out, s.as_bytes());
            }
            if let Some(s) = r.sf.as_ref().and_then(|c| c.str(i)) {
                out.extend_from_slice(b",\"sf\":");
                write_str(out, s.as_bytes());
            }
            if let Some(s) = r.stack.as_ref().and_then(|c| c.str(i)) {
                out.extend_from_slice(b",\"stack\":");
                out.extend_from_slice(s.as_bytes());
            }
        }
        if matches!(part, Part::FlowEnd) {
            if let Some(bp) = r.bp.as_ref().and_then(|c| c.str(i)) {
                out.extend_from_slice(b",\"bp\":");
                write_str(out, bp.as_bytes());
            }
            out.push(b'}');
            return;
        }
        // args
        let mark = out.len();
        out.extend_from_slice(b",\"args\":{");
        let body = out.len();
        let (typed, text) = if matches!(part, Part::End) { (&r.e, &r.end_args) } else { (&r.a, &r.args) };
        let sample = !matches!(part, Part::End) && write_sample(out, r, i, false);
        let after_sample = out.len();
        for (k, c) in typed {
            if c.valid(i) {
                if out.len() > body {
                    out.push(b',');
                }
                out.extend_from_slice(k);
                out.push(b':');
                c.write(out, i);
            }
        }
        if let Some(t) = text.as_ref().and_then(|c| c.str(i)) {
            let t = t.trim();
            if t.len() > 2 && t.starts_with('{') && t.ends_with('}') {
                if out.len() > body {
                    out.push(b',');
                }
                out.extend_from_slice(&t.as_bytes()[1..t.len() - 1]);
            }
        }
        if out.len() == body {
            out.truncate(mark);
        } else if sample && ph == b'C' && out.len() == after_sample {
            // Only the sample: the next rows may add their series to this event.
            self.open = Some(OpenCounter {
                ts,
                producer,
                seq: r.seq.as_ref().and_then(|c| c.int(i)).unwrap_or(i64::MIN + 1),
                name: r.name.as_ref().and_then(|c| c.str(i)).unwrap_or(&self.defaults.0).to_string(),
                cat: r.cat.as_ref().and_then(|c| c.str(i)).unwrap_or(&self.defaults.1).to_string(),
                id: r.id.as_ref().and_then(|c| c.str(i)).map(str::to_string),
                series: vec![r.series.as_ref().and_then(|c| c.str(i)).unwrap_or_default().to_string()],
            });
            return;
        } else {
            out.push(b'}');
        }
        out.push(b'}');
    }
}

/// Writes the counter sample of row `i` (`"series":value`, preceded by a comma when
/// `comma`); false (nothing written) when the row has none. The exact integer wins over
/// the float.
fn write_sample(out: &mut Vec<u8>, r: &Roles<'_>, i: usize, comma: bool) -> bool {
    let Some(s) = r.series.as_ref().and_then(|c| c.str(i)) else { return false };
    let v = match (r.ivalue.as_ref().filter(|c| c.valid(i)), r.value.as_ref().filter(|c| c.valid(i))) {
        (Some(c), _) | (None, Some(c)) => c,
        _ => return false,
    };
    if comma {
        out.push(b',');
    }
    write_str(out, s.as_bytes());
    out.push(b':');
    v.write(out, i);
    true
}

#[derive(Clone, Copy)]
enum Part {
    Whole,
    Begin,
    End,
    FlowEnd,
}

/// `a:<key>` / `a<digits>:<key>` (an arg) or `e...` (an arg of the closing event): the
/// digits let a UNION of several event types keep one column per type and key.
fn arg_role(name: &str) -> Option<(bool, &str)> {
    let end = match name.as_bytes().first()? {
        b'a' => false,
        b'e' => true,
        _ => return None,
    };
    let rest = &name[1..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[digits..].strip_prefix(':').map(|k| (end, k))
}

fn json_key(k: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(k.len() + 2);
    write_str(&mut v, k.as_bytes());
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::chrome::{ChromeParser, Options};
    use arrow_array::{BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};
    use arrow_schema::{Field, Schema};
    use std::sync::Arc;

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = cols.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols.into_iter().map(|(_, a)| a).collect()).unwrap()
    }

    #[test]
    fn spans_instants_and_args() {
        let b = batch(vec![
            ("ts", Arc::new(Int64Array::from(vec![1_000, 5_500])) as ArrayRef),
            ("producer", Arc::new(Int32Array::from(vec![1, 2]))),
            ("dur", Arc::new(Int64Array::from(vec![2_000, 1]))),
            ("__ph", Arc::new(StringArray::from(vec![Some("X"), Some("B")]))),
            ("a7:k", Arc::new(Int64Array::from(vec![Some(3), None]))),
            ("a:f", Arc::new(Float64Array::from(vec![Some(2.0), Some(f64::NAN)]))),
            ("e:ok", Arc::new(BooleanArray::from(vec![None, Some(true)]))),
            ("__args", Arc::new(StringArray::from(vec![Some("{\"n\":[1]}"), None]))),
        ]);
        let mut w = ChromeWriter::new(vec![(1, "10".into(), "11".into())], true);
        let mut out = Vec::new();
        w.encode(&b, "X", "work", "tod", &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(
            s,
            "\n{\"name\":\"work\",\"cat\":\"tod\",\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":10,\"tid\":11,\"args\":{\"k\":3,\"f\":2.0,\"n\":[1]}}\
             ,\n{\"name\":\"work\",\"cat\":\"tod\",\"ph\":\"B\",\"ts\":5.5,\"pid\":2,\"tid\":2,\"args\":{\"f\":null}}\
             ,\n{\"name\":\"work\",\"cat\":\"tod\",\"ph\":\"E\",\"ts\":5.501,\"pid\":2,\"tid\":2,\"args\":{\"ok\":true}}"
        );
        assert_eq!(w.events, 3);
        // And it parses back.
        let mut p = ChromeParser::new(Options::default());
        p.feed(format!("[{s}]").as_bytes());
        p.finish();
        assert_eq!(p.rejected, 0, "{:?}", p.problems);
        let rows: usize = p.take_batches(true).iter().map(|(_, b)| b.num_rows()).sum();
        assert_eq!(rows, 2);
    }
}
