//! pprof profiles (`profile.proto`, what Go's runtime/pprof, `go tool pprof`, pprof-rs, py-spy
//! and many others write): import as stack samples, and the encoder of the pprof exporter.
//!
//! Owns decoding a profile (gunzipped by the import loop; prost messages in [`proto`]) into the
//! one event type `sample` of `decl.rs`, one row per pprof sample: its stack resolved through
//! locations, inlined lines and functions into the folded form perf's samples use (function
//! names root first, joined by `;`; `;` in a name written `:`; a location without a function
//! named by its object `[file]` or, without one, its address), its leaf's file, line and
//! object, its value of the default sample type (`value`, what the flame graph weighs), of the
//! first count type (`count`) and of every type (`values`, `type/unit=v` joined by `,`), and
//! its labels. A profile is one message whose string table may come last, so the parser
//! keeps the bytes until the end of the input (at most [`MAX_PROFILE`]), decodes the tables
//! then, and the samples one batch at a time as the batches are taken (peak memory: the
//! profile's bytes, its tables and one batch, not every row);
//! pprof keeps no per-sample time, so every sample has the profile's start time (`ts`). The
//! producer is the profiled program (the first mapping's file, or `profile`).
//!
//! [`encode`] writes stacks and values back as a profile (the exporter gzips it).

use arrow_array::RecordBatch;
use prost::Message;

use super::parser::{Attr, Problem, ProducerRow, Rejects};
use super::pbwire;
use super::table::{FastMap, Table};

pub mod decl;
pub mod proto;
#[cfg(test)]
mod tests;

/// Largest profile accepted, in bytes (gunzipped): a profile is decoded whole.
pub const MAX_PROFILE: usize = 1 << 30;
/// Columns of `sample` (after ts, producer, seq).
const C_VALUE: usize = 3;
const C_COUNT: usize = 4;
const C_VALUES: usize = 5;
const C_LEAF: usize = 6;
const C_FILE: usize = 7;
const C_LINE: usize = 8;
const C_DSO: usize = 9;
const C_STACK: usize = 10;
const C_DEPTH: usize = 11;
const C_LABELS: usize = 12;

/// The pprof parser: bytes kept until the end, then one row per sample.
pub struct PprofParser {
    strict: bool,
    batch_rows: usize,
    buf: Vec<u8>,
    too_big: bool,
    table: Table,
    rejects: Rejects,
    producer: Option<String>,
    samples: u64,
    locations: u64,
    functions: u64,
    unknown_locations: u64,
    details: String,
    /// The profile being turned into rows, after `finish`.
    pending: Option<Pending>,
    // Buffers reused from row to row.
    syms: String,
    frames: Vec<(usize, usize)>,
    stack: String,
    values: String,
    labels: String,
}

impl PprofParser {
    /// A parser cutting batches of `batch_rows` rows.
    pub fn new(strict: bool, batch_rows: usize) -> Self {
        let et = &decl::PPROF.event_types[0];
        PprofParser {
            strict,
            batch_rows: batch_rows.max(1),
            buf: Vec::new(),
            too_big: false,
            table: Table::new(et.name, false, &et.columns(), batch_rows.clamp(1, 1 << 16)),
            rejects: Rejects::default(),
            producer: None,
            samples: 0,
            locations: 0,
            functions: 0,
            unknown_locations: 0,
            details: "{}".into(),
            pending: None,
            syms: String::new(),
            frames: Vec::new(),
            stack: String::new(),
            values: String::new(),
            labels: String::new(),
        }
    }

    /// Keeps a chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.too_big {
            return;
        }
        if self.buf.len() + chunk.len() > MAX_PROFILE {
            self.too_big = true;
            self.buf = Vec::new();
            return;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// Decodes what the samples index (strings, functions, locations, mappings, types); the
    /// samples are decoded and made rows `batch_rows` at a time by `take_batches`.
    pub fn finish(&mut self) {
        if self.too_big {
            self.reject(0, format!("profile larger than {MAX_PROFILE} bytes (gunzipped)"));
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        if buf.is_empty() {
            return;
        }
        match proto::ProfileTables::decode(buf.as_slice()) {
            Ok(p) => self.prepare(p, buf),
            Err(e) => {
                self.reject(0, format!("not a pprof profile (profile.proto): {e}"));
            }
        }
    }

    /// Batches that reached the batch size (all non-empty ones when `all`). After `finish`, each
    /// call with `all` decodes the next `batch_rows` samples: rows are made as they are taken,
    /// so memory holds one batch, not the profile's rows (1M samples 24 frames deep: 1.7 GB
    /// peak when every row was made before the first batch left).
    pub fn take_batches(&mut self, all: bool) -> Vec<(String, RecordBatch)> {
        if all {
            if let Some(mut pend) = self.pending.take() {
                let done = self.rows(&mut pend, self.batch_rows);
                if !done {
                    self.pending = Some(pend);
                }
            }
        }
        if (all || self.table.rows() >= self.batch_rows) && self.table.rows() > 0 {
            if let Some(b) = self.table.take() {
                return vec![(self.table.name.clone(), b)];
            }
        }
        Vec::new()
    }

    fn reject(&mut self, sample: u64, reason: String) -> bool {
        self.rejects.reject(self.strict, Problem { line: sample, offset: 0, reason })
    }

    fn prepare(&mut self, p: proto::ProfileTables, buf: Vec<u8>) {
        let st = |i: i64| -> &str { usize::try_from(i).ok().and_then(|i| p.string_table.get(i)).map_or("", |s| s) };
        if p.string_table.first().is_some_and(|s| !s.is_empty()) {
            self.reject(0, "string_table[0] is not the empty string (profile.proto requires it)".into());
            return;
        }
        self.locations = p.location.len() as u64;
        self.functions = p.function.len() as u64;
        let ntypes = p.sample_type.len();
        let types: Vec<String> = p.sample_type.iter().map(|t| format!("{}/{}", st(t.r#type), st(t.unit))).collect();
        // pprof's default: the type named by default_sample_type, else the last one.
        let default = p
            .sample_type
            .iter()
            .position(|t| p.default_sample_type != 0 && t.r#type == p.default_sample_type)
            .unwrap_or(ntypes.saturating_sub(1));
        let count = p.sample_type.iter().position(|t| st(t.unit) == "count");
        self.producer = Some(
            p.mapping
                .first()
                .map(|m| st(m.filename))
                .filter(|f| !f.is_empty())
                .map(|f| f.rsplit('/').next().unwrap_or(f).to_string())
                .unwrap_or_else(|| "profile".into()),
        );
        let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        let ptype = p.period_type.as_ref().map(|t| q(&format!("{}/{}", st(t.r#type), st(t.unit))));
        self.details = format!(
            "{{\"sample_types\":[{}],\"default_sample_type\":{},\"period_type\":{},\"period\":{},\"time_nanos\":{},\
             \"duration_nanos\":{}}}",
            types.iter().map(|t| q(t)).collect::<Vec<_>>().join(","),
            types.get(default).map_or("null".into(), |t| q(t)),
            ptype.unwrap_or_else(|| "null".into()),
            p.period,
            p.time_nanos,
            p.duration_nanos
        );
        let functions = p.function.iter().enumerate().map(|(i, f)| (f.id, i)).collect();
        let mappings = p.mapping.iter().enumerate().map(|(i, m)| (m.id, i)).collect();
        let locations = p.location.iter().enumerate().map(|(i, l)| (l.id, i)).collect();
        self.pending =
            Some(Pending { buf, pos: 0, index: 0, p, functions, mappings, locations, types, default, count });
    }

    /// Decodes samples from `pend.pos` on and makes their rows until `max` more rows are in the
    /// table; true when the profile's bytes are used up (or the parse stops).
    fn rows(&mut self, pend: &mut Pending, max: usize) -> bool {
        let want = self.table.rows() + max;
        while self.table.rows() < want {
            let rest = &pend.buf[pend.pos..];
            if rest.is_empty() {
                return true;
            }
            // The profile decoded whole as ProfileTables: every top-level field is well formed.
            let Some((num, v, n)) = pbwire::field(rest) else { return true };
            pend.pos += n;
            let (2, pbwire::Value::Bytes(body)) = (num, v) else { continue };
            pend.index += 1;
            let i = pend.index;
            let s = match proto::Sample::decode(body) {
                Ok(s) => s,
                Err(e) => {
                    if !self.reject(i, format!("sample {}: not a profile.proto Sample: {e}", i - 1)) {
                        return true;
                    }
                    continue;
                }
            };
            if !self.row(pend, &s, i) {
                return true;
            }
        }
        false
    }

    /// One sample's row; false when the parse stops (strict mode).
    fn row(&mut self, pend: &Pending, s: &proto::Sample, i: u64) -> bool {
        let p = &pend.p;
        let st = |i: i64| -> &str { usize::try_from(i).ok().and_then(|i| p.string_table.get(i)).map_or("", |s| s) };
        let ntypes = pend.types.len();
        if s.value.len() != ntypes {
            let why = format!("sample {}: {} values for {ntypes} sample types", i - 1, s.value.len());
            return self.reject(i, why);
        }
        let (syms, frames) = (&mut self.syms, &mut self.frames);
        syms.clear();
        frames.clear();
        let (mut leaf_file, mut leaf_line, mut leaf_dso) = ("", None, "");
        for (k, id) in s.location_id.iter().enumerate() {
            let Some(loc) = pend.locations.get(id).map(|&j| &p.location[j]) else {
                self.unknown_locations += 1;
                let a = syms.len();
                syms.push_str(&format!("[location {id}]"));
                frames.push((a, syms.len()));
                continue;
            };
            let dso = pend.mappings.get(&loc.mapping_id).map_or("", |&j| st(p.mapping[j].filename));
            if k == 0 {
                leaf_dso = dso;
            }
            if loc.line.is_empty() {
                let a = syms.len();
                if dso.is_empty() {
                    syms.push_str(&format!("0x{:x}", loc.address));
                } else {
                    syms.push('[');
                    syms.push_str(dso.rsplit('/').next().unwrap_or(dso));
                    syms.push(']');
                }
                frames.push((a, syms.len()));
                continue;
            }
            for (j, line) in loc.line.iter().enumerate() {
                let f = pend.functions.get(&line.function_id).map(|&j| &p.function[j]);
                let name = f.map(|f| if f.name != 0 { st(f.name) } else { st(f.system_name) }).unwrap_or("");
                if k == 0 && j == 0 {
                    leaf_file = f.map_or("", |f| st(f.filename));
                    leaf_line = (line.line != 0).then_some(line.line);
                }
                let a = syms.len();
                if name.is_empty() {
                    syms.push_str(&format!("0x{:x}", loc.address));
                } else if name.contains(';') {
                    syms.push_str(&name.replace(';', ":"));
                } else {
                    syms.push_str(name);
                }
                frames.push((a, syms.len()));
            }
        }
        let stack = &mut self.stack;
        stack.clear();
        for (j, &(a, b)) in frames.iter().rev().enumerate() {
            if j > 0 {
                stack.push(';');
            }
            stack.push_str(&syms[a..b]);
        }
        let values = &mut self.values;
        values.clear();
        for (j, v) in s.value.iter().enumerate() {
            if j > 0 {
                values.push(',');
            }
            values.push_str(&pend.types[j]);
            values.push('=');
            values.push_str(&v.to_string());
        }
        let labels = &mut self.labels;
        labels.clear();
        for l in &s.label {
            if !labels.is_empty() {
                labels.push(',');
            }
            labels.push_str(st(l.key));
            labels.push('=');
            if l.str != 0 {
                labels.push_str(st(l.str));
            } else {
                labels.push_str(&l.num.to_string());
                labels.push_str(st(l.num_unit));
            }
        }
        let t = &mut self.table;
        t.start(p.time_nanos, 0, self.samples as i64);
        if ntypes > 0 {
            t.set_i64(C_VALUE, s.value[pend.default]);
            t.set_str(C_VALUES, values);
        }
        if let Some(c) = pend.count {
            t.set_i64(C_COUNT, s.value[c]);
        }
        if let Some(&(a, b)) = frames.first() {
            t.set_str(C_LEAF, &syms[a..b]);
            t.set_str(C_STACK, stack);
            if !leaf_file.is_empty() {
                t.set_str(C_FILE, leaf_file);
            }
            if let Some(l) = leaf_line {
                t.set_i64(C_LINE, l);
            }
            if !leaf_dso.is_empty() {
                t.set_str(C_DSO, leaf_dso);
            }
        }
        t.set_i64(C_DEPTH, frames.len() as i64);
        if !labels.is_empty() {
            t.set_str(C_LABELS, labels);
        }
        t.end();
        self.samples += 1;
        true
    }
}

/// A decoded profile's tables and the bytes its samples are still to be read from.
struct Pending {
    buf: Vec<u8>,
    /// Offset of the next top-level field of `buf`.
    pos: usize,
    /// Samples met so far (numbering the rejects, from 1).
    index: u64,
    p: proto::ProfileTables,
    functions: FastMap<u64, usize>,
    mappings: FastMap<u64, usize>,
    locations: FastMap<u64, usize>,
    /// `type/unit` of each sample type.
    types: Vec<String>,
    default: usize,
    count: Option<usize>,
}

super::chunk_parser!(PprofParser {
    /// The profiled program (kind `process`), when the profile had samples.
    fn producers(&self) -> Vec<ProducerRow> {
        match (&self.producer, self.samples) {
            (Some(name), n) if n > 0 => vec![ProducerRow {
                id: 0,
                parent: None,
                kind: "process".into(),
                name: name.clone(),
                attrs: Vec::<(String, Attr)>::new(),
            }],
            _ => Vec::new(),
        }
    }

    fn stats(&self) -> Vec<(String, u64)> {
        [
            ("samples", self.samples),
            ("locations", self.locations),
            ("functions", self.functions),
            ("unknown_locations", self.unknown_locations),
            ("rejected", self.rejects.count),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn problems(&self) -> Vec<Problem> {
        self.rejects.first.clone()
    }

    fn fatal(&self) -> Option<Problem> {
        self.rejects.fatal.clone()
    }

    fn details_json(&self) -> String {
        self.details.clone()
    }
});

/// A profile of `stacks` (frames root first, joined by `;`), each with one value per entry of
/// `sample_types` ((type, unit) pairs), as profile.proto bytes (not gzipped). Each distinct
/// frame name becomes one function and one location; `program` names the one mapping.
pub fn encode(
    stacks: &[String],
    values: &[Vec<i64>],
    sample_types: &[(String, String)],
    program: &str,
    time_nanos: i64,
    duration_nanos: i64,
) -> Result<Vec<u8>, String> {
    if stacks.len() != values.len() {
        return Err(format!("{} stacks but {} value lists", stacks.len(), values.len()));
    }
    let mut strings: Vec<String> = vec![String::new()];
    let mut string_ids: FastMap<String, i64> = FastMap::default();
    let mut intern = |s: &str, strings: &mut Vec<String>| -> i64 {
        if s.is_empty() {
            return 0;
        }
        if let Some(&i) = string_ids.get(s) {
            return i;
        }
        strings.push(s.to_string());
        let i = strings.len() as i64 - 1;
        string_ids.insert(s.to_string(), i);
        i
    };
    let mut p = proto::Profile::default();
    for (t, u) in sample_types {
        let vt = proto::ValueType { r#type: intern(t, &mut strings), unit: intern(u, &mut strings) };
        p.sample_type.push(vt);
    }
    let file = intern(program, &mut strings);
    p.mapping.push(proto::Mapping { id: 1, filename: file, has_functions: true, ..Default::default() });
    let mut loc_of: FastMap<String, u64> = FastMap::default();
    for (i, (stack, vals)) in stacks.iter().zip(values).enumerate() {
        if vals.len() != sample_types.len() {
            return Err(format!("stack {i}: {} values for {} sample types", vals.len(), sample_types.len()));
        }
        let mut ids: Vec<u64> = Vec::new();
        for frame in stack.split(';').rev() {
            let id = match loc_of.get(frame) {
                Some(&id) => id,
                None => {
                    let id = p.location.len() as u64 + 1;
                    let name = intern(frame, &mut strings);
                    p.function.push(proto::Function { id, name, system_name: name, ..Default::default() });
                    p.location.push(proto::Location {
                        id,
                        mapping_id: 1,
                        address: id,
                        line: vec![proto::Line { function_id: id, line: 0, column: 0 }],
                        is_folded: false,
                    });
                    loc_of.insert(frame.to_string(), id);
                    id
                }
            };
            ids.push(id);
        }
        p.sample.push(proto::Sample { location_id: ids, value: vals.clone(), label: Vec::new() });
    }
    p.string_table = strings;
    p.time_nanos = time_nanos;
    p.duration_nanos = duration_nanos;
    if let Some(last) = p.sample_type.last() {
        p.default_sample_type = last.r#type;
    }
    Ok(p.encode_to_vec())
}
