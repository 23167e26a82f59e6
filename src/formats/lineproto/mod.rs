//! InfluxDB line protocol as a file format: `tracehouse import lineproto FILE`.
//!
//! Owns [`LineProtoParser`], the [`super::ChunkParser`] over the decoder the ingest server uses
//! (`ingest/lineproto.rs`, shared: one grammar, one set of escapes and limits): chunks are cut
//! at their last complete line, each run of whole lines is decoded into one batch per
//! measurement (numbered per producer, as the server stores them), tag sets become producers
//! (kind `tags`, named by the canonical `k=v,...` set) and fields typed columns, a field met
//! later becoming a new column of its measurement. Lines without a timestamp get the import's
//! start time, as a write without one gets the server's receive time.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use arrow_array::RecordBatch;

use super::parser::{Attr, NewColumn, Problem, ProducerRow, Rejects};
use super::table::{FastMap, PType};
use crate::ingest::lineproto::{decode_many, whole_lines, Input, Limits, Precision, Producers, Schemas};
use crate::store::seqnum::SeqCounters;

pub mod decl;
#[cfg(test)]
mod tests;

/// The streaming line-protocol parser.
pub struct LineProtoParser {
    schemas: Mutex<Schemas>,
    producers: Mutex<Producers>,
    seq: Mutex<SeqCounters>,
    limits: Limits,
    precision: Precision,
    default_ts: i64,
    strict: bool,
    carry: Vec<u8>,
    /// Number of the next line to decode.
    line: u64,
    out: Vec<(String, RecordBatch)>,
    /// Parameters of each measurement already handed out (its type exists downstream).
    reported: FastMap<String, usize>,
    new_cols: Vec<NewColumn>,
    prods: Vec<ProducerRow>,
    rejects: Rejects,
    lines: u64,
    rows: u64,
    stopped: bool,
}

impl LineProtoParser {
    /// A parser of timestamps in `precision`; lines longer than `max_line` bytes are rejected.
    pub fn new(precision: Precision, strict: bool, max_line: usize) -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
        LineProtoParser {
            schemas: Mutex::new(Schemas::new()),
            producers: Mutex::new(Producers::new(0)),
            seq: Mutex::new(SeqCounters::new()),
            limits: Limits { max_line, max_errors: super::parser::KEEP_PROBLEMS, ..Limits::default() },
            precision,
            default_ts: now,
            strict,
            carry: Vec::new(),
            line: 1,
            out: Vec::new(),
            reported: FastMap::default(),
            new_cols: Vec::new(),
            prods: Vec::new(),
            rejects: Rejects::default(),
            lines: 0,
            rows: 0,
            stopped: false,
        }
    }

    /// Stamps lines without a timestamp with `ts` (ns) instead of the parser's creation time.
    pub fn set_default_ts(&mut self, ts: i64) {
        self.default_ts = ts;
    }

    /// Parses a chunk (cut anywhere): its complete lines now, the rest with the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.stopped {
            return;
        }
        let last_nl = memchr::memrchr(b'\n', chunk);
        let quotes = memchr::memchr(b'"', &self.carry).is_some()
            || last_nl.is_some_and(|nl| memchr::memchr(b'"', &chunk[..nl]).is_some());
        if !quotes {
            // (no string anywhere: every newline ends a line; only the carry and the chunk's
            // whole lines are copied)
            match last_nl {
                None => self.carry.extend_from_slice(chunk),
                Some(nl) => {
                    if self.carry.is_empty() {
                        self.decode(&chunk[..=nl]);
                    } else {
                        let mut body = std::mem::take(&mut self.carry);
                        body.extend_from_slice(&chunk[..=nl]);
                        self.decode(&body);
                    }
                    self.carry.extend_from_slice(&chunk[nl + 1..]);
                }
            }
            return;
        }
        // (a string field may hold newlines: the cut is after the last line whose strings are closed)
        if self.carry.is_empty() {
            let whole = whole_lines(chunk, self.limits.max_line);
            if whole > 0 {
                self.decode(&chunk[..whole]);
            }
            self.carry.extend_from_slice(&chunk[whole..]);
        } else {
            let mut body = std::mem::take(&mut self.carry);
            body.extend_from_slice(chunk);
            let whole = whole_lines(&body, self.limits.max_line);
            if whole > 0 {
                self.decode(&body[..whole]);
            }
            body.drain(..whole);
            self.carry = body;
        }
    }

    /// Ends the input: the last line when it has no newline.
    pub fn finish(&mut self) {
        if !self.stopped && !self.carry.is_empty() {
            let last = std::mem::take(&mut self.carry);
            self.decode(&last);
        }
    }

    /// Every decoded batch (one per measurement per run of lines).
    pub fn take_batches(&mut self, _all: bool) -> Vec<(String, RecordBatch)> {
        std::mem::take(&mut self.out)
    }

    fn decode(&mut self, body: &[u8]) {
        let input = Input { body, first_line: self.line, precision: self.precision, default_ts: self.default_ts };
        let d = decode_many(&[input], &self.schemas, &self.producers, Some(&self.seq), &self.limits);
        let Some(stats) = d.bodies.into_iter().next() else { return };
        self.line = stats.last_line + 1;
        self.lines += stats.lines;
        self.rows += stats.rows;
        for e in &stats.errors {
            if !self.rejects.reject(self.strict, Problem::at_line(e.line, e.message.clone())) {
                self.stopped = true;
                return;
            }
        }
        // Errors beyond the kept ones are only counted.
        self.rejects.count += stats.error_count.saturating_sub(stats.errors.len() as u64);
        for p in crate::mutex::lock(&self.producers).take_new() {
            let attrs = p.tags.into_iter().map(|(k, v)| (k, Attr::Str(v))).collect();
            self.prods.push(ProducerRow { id: p.id, parent: None, kind: "tags".into(), name: p.name, attrs });
        }
        for (name, batch) in d.batches {
            let params = batch.num_columns().saturating_sub(3);
            match self.reported.get(&name).copied() {
                None => {
                    self.reported.insert(name.clone(), params);
                }
                Some(known) if known < params => {
                    let schema = batch.schema();
                    for f in &schema.fields()[3 + known..3 + params] {
                        let ptype = match f.data_type() {
                            arrow_schema::DataType::Int64 => PType::Int,
                            arrow_schema::DataType::Boolean => PType::Bool,
                            arrow_schema::DataType::Utf8 => PType::Str,
                            _ => PType::Float,
                        };
                        self.new_cols.push((name.clone(), f.name().clone(), ptype, f.name().clone()));
                    }
                    self.reported.insert(name.clone(), params);
                }
                Some(_) => {}
            }
            self.out.push((name, batch));
        }
    }
}

super::chunk_parser!(LineProtoParser {
    /// One producer per tag set (kind `tags`, attrs the tags).
    fn producers(&self) -> Vec<ProducerRow> {
        self.prods.clone()
    }

    fn stats(&self) -> Vec<(String, u64)> {
        vec![("lines".into(), self.lines), ("rows".into(), self.rows), ("rejected".into(), self.rejects.count)]
    }

    fn problems(&self) -> Vec<Problem> {
        self.rejects.first.clone()
    }

    fn fatal(&self) -> Option<Problem> {
        self.rejects.fatal.clone()
    }

    fn take_new_columns(&mut self) -> Vec<NewColumn> {
        std::mem::take(&mut self.new_cols)
    }
});
