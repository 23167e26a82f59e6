//! Formats declared once, as data: what a format is to the rest of the house.
//!
//! Owns the declaration types. A [`FormatDecl`] names a format and holds, beside its parser
//! (`formats/<format>/decl.rs`): its event types ([`EventTypeDecl`]: name, kind, a sentence,
//! and every parameter column with its type, its unit and a sentence), the result tables its
//! imports save, its sniffer and the priority it is asked at, the factory of its streaming
//! parser with the options it takes ([`ParserDecl`]), the analyses' profile of it ([`Profile`]:
//! which types pair into spans, which are stack samples, which column names an event) and
//! example queries. The list of formats is `formats/mod.rs`'s [`super::FORMATS`]. The parsers
//! build their Arrow tables from these declarations, and Python reads the same data through
//! `_core.format_declarations()` (`python/tracehouse/formats/declared.py`), so the two sides
//! cannot drift apart. The common columns (`ts`, `producer`, `seq`, `dur` for spans) are not
//! repeated here: every stored event has them (`schema.py` documents them).

use arrow_schema::{DataType, Field, Schema};

use super::parser::{ChunkParser, OptionDecl, Options};
use super::table::PType;

/// One parameter column of an event type (after the common columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// Column name (an SQL identifier).
    pub name: &'static str,
    /// Its type.
    pub ptype: PType,
    /// Its unit ("ns", "B", "text", "as recorded", ...).
    pub unit: &'static str,
    /// A sentence saying what it holds.
    pub doc: &'static str,
}

/// A parameter column (a `const fn`, so declarations stay `const` data).
pub const fn param(name: &'static str, ptype: PType, unit: &'static str, doc: &'static str) -> Param {
    Param { name, ptype, unit, doc }
}

/// One event type of a format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTypeDecl {
    /// Type name (an SQL identifier: the table name in `"<trace>".<name>`).
    pub name: &'static str,
    /// instant, span, begin, end, counter or link.
    pub kind: &'static str,
    /// Its parameter columns, in stored order.
    pub params: &'static [Param],
    /// A sentence saying what one event of it is.
    pub doc: &'static str,
}

impl EventTypeDecl {
    /// Spans carry the `dur` common column.
    pub fn is_span(&self) -> bool {
        self.kind == "span"
    }

    /// (name, type) of each parameter, the shape `Table::new` takes.
    pub fn columns(&self) -> Vec<(&'static str, PType)> {
        self.params.iter().map(|p| (p.name, p.ptype)).collect()
    }

    /// The Arrow schema of its batches: the common columns (never null), then the
    /// parameters, nullable except those named in `never_null` (what a generator always sets).
    pub fn arrow_schema(&self, never_null: &[&str]) -> Schema {
        let mut fields = vec![
            Field::new("ts", DataType::Int64, false),
            Field::new("producer", DataType::Int32, false),
            Field::new("seq", DataType::Int64, false),
        ];
        if self.is_span() {
            fields.push(Field::new("dur", DataType::Int64, false));
        }
        fields
            .extend(self.params.iter().map(|p| Field::new(p.name, p.ptype.data_type(), !never_null.contains(&p.name))));
        Schema::new(fields)
    }
}

/// A result table a format's import saves beside the trace (bpftrace's aggregates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultDecl {
    /// Result kind (`hist`, `map`, `stats`).
    pub name: &'static str,
    /// Its columns, in order.
    pub params: &'static [Param],
}

/// How the spans of a format are made (`analysis/profiles.py` `SpanConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanProfile {
    /// The begin event type, or the span-kind type when `end` is None.
    pub begin: &'static str,
    /// The end event type (None: `begin` is a span-kind type, nested by time).
    pub end: Option<&'static str>,
    /// The column both halves have that pairs an end with its begin.
    pub key: Option<&'static str>,
    /// The column naming a span in call trees and flame graphs (default: `key`).
    pub name: Option<&'static str>,
}

/// Which event type writes object fields, and its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectProfile {
    /// The event type.
    pub event_type: &'static str,
    /// The column of the object written.
    pub object: &'static str,
    /// The field column.
    pub field: &'static str,
    /// The value column.
    pub value: &'static str,
}

/// Which event type writes local variables, and its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalsProfile {
    /// The event type.
    pub event_type: &'static str,
    /// The column holding the seq of the frame's begin (same producer).
    pub frame: &'static str,
    /// The variable column.
    pub var: &'static str,
    /// The value column.
    pub value: &'static str,
}

/// Which event type holds stack samples: the flame graph and call tree of a sampled trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleProfile {
    /// The event type.
    pub event_type: &'static str,
    /// The column holding the call stack, root first, frames joined by `;`.
    pub stack: &'static str,
    /// The column weighing a sample (its period); None: each sample weighs one.
    pub weight: Option<&'static str>,
}

/// What the analyses and the surfaces know of a format's event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// How its spans are made.
    pub spans: Option<SpanProfile>,
    /// Object field writes (state of an object at time t).
    pub objects: Option<ObjectProfile>,
    /// Local variable writes (a frame's locals at time t).
    pub locals: Option<LocalsProfile>,
    /// Stack samples.
    pub samples: Option<SampleProfile>,
    /// (event type, column naming an event of it better than the type does, column of its
    /// category): how exporters name events (a strace syscall by its name).
    pub labels: &'static [(&'static str, &'static str, Option<&'static str>)],
}

impl Profile {
    /// No profile: the analyses are told the types and columns (or infer them).
    pub const NONE: Profile = Profile { spans: None, objects: None, locals: None, samples: None, labels: &[] };
}

/// A format's streaming parser: the options it takes and its factory.
#[derive(Debug, Clone, Copy)]
pub struct ParserDecl {
    /// Options beyond the common ones (`strict`, `batch_rows`, `max_line`).
    pub options: &'static [OptionDecl],
    /// Makes a parser from checked options; an error says which option is wrong.
    pub make: fn(&Options) -> Result<Box<dyn ChunkParser>, String>,
}

/// A format: its name, a one-line description, its event types and result tables, how it is
/// recognised and parsed, and what the analyses know of it.
#[derive(Debug, Clone, Copy)]
pub struct FormatDecl {
    /// Format name (`tracehouse import <name>`, `th.traces.format`).
    pub name: &'static str,
    /// One line for `tracehouse tools` and the catalog.
    pub description: &'static str,
    /// Its fixed event types (a parser may add more from its input: bpftrace patterns).
    pub event_types: &'static [EventTypeDecl],
    /// Result tables its imports save.
    pub results: &'static [ResultDecl],
    /// Order in which sniffers are asked, highest first: a strict signature high, a
    /// permissive one low (CSV, which takes any text with a comma, is asked last).
    pub priority: i32,
    /// Whether the first bytes of an input (gunzipped) are this format; None: the format's
    /// sniffer is its Python importer's, or it is never guessed.
    pub sniff: Option<fn(&[u8]) -> bool>,
    /// Its streaming parser, driven by `_core.NativeParser` (None: the format's importer
    /// drives a parser of its own, or it has no file to parse).
    pub parser: Option<ParserDecl>,
    /// What the analyses know of its event types.
    pub profile: Profile,
    /// Example queries: (title, SQL with `{t}` for the quoted trace, `{s}` for its name as an
    /// SQL string).
    pub examples: &'static [(&'static str, &'static str)],
    /// Views made in each trace's schema beside its event types: (name, SELECT with `{t}` for
    /// the quoted trace and `{s}` for its name as an SQL string).
    pub views: &'static [(&'static str, &'static str)],
}

impl FormatDecl {
    /// What a format without a parser, sniffer, profile or examples leaves as is:
    /// `FormatDecl { name, description, event_types, ..FormatDecl::BASE }`.
    pub const BASE: FormatDecl = FormatDecl {
        name: "",
        description: "",
        event_types: &[],
        results: &[],
        priority: 0,
        sniff: None,
        parser: None,
        profile: Profile::NONE,
        examples: &[],
        views: &[],
    };

    /// The declared format called `name`.
    pub fn get(name: &str) -> Option<&'static FormatDecl> {
        super::FORMATS.iter().copied().find(|f| f.name == name)
    }
}

/// Shorthands for the declarations' column types.
pub mod types {
    use super::PType;
    /// string
    pub const S: PType = PType::Str;
    /// int64
    pub const I: PType = PType::Int;
    /// float64
    pub const F: PType = PType::Float;
    /// bool
    pub const B: PType = PType::Bool;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::FORMATS;

    const KINDS: [&str; 6] = ["instant", "span", "begin", "end", "counter", "link"];
    const COMMON: [&str; 5] = ["ts", "producer", "seq", "dur", "type"];

    fn ident(s: &str) -> bool {
        let mut c = s.chars();
        matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
            && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            && s.len() <= 63
    }

    #[test]
    fn every_column_has_a_type_a_unit_and_a_sentence() {
        for f in FORMATS {
            assert!(!f.description.is_empty(), "{}", f.name);
            let results = f.results.iter().map(|r| (r.name, "result", r.params, "a result table"));
            for (name, kind, params, doc) in
                f.event_types.iter().map(|e| (e.name, e.kind, e.params, e.doc)).chain(results)
            {
                assert!(ident(name), "{}.{name}", f.name);
                assert!(kind == "result" || KINDS.contains(&kind), "{}.{name}: {kind}", f.name);
                assert!(!doc.is_empty(), "{}.{name}", f.name);
                let mut seen = Vec::new();
                for p in params {
                    assert!(ident(p.name) && !COMMON.contains(&p.name), "{}.{name}.{}", f.name, p.name);
                    assert!(!seen.contains(&p.name), "{}.{name}.{} twice", f.name, p.name);
                    assert!(p.ptype != PType::I32, "{}.{name}.{}: int32 is the producer's only", f.name, p.name);
                    assert!(!p.unit.is_empty() && !p.doc.is_empty(), "{}.{name}.{}", f.name, p.name);
                    seen.push(p.name);
                }
            }
        }
    }

    #[test]
    fn format_and_type_names_are_unique() {
        let names: Vec<&str> = FORMATS.iter().map(|f| f.name).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[i + 1..].contains(n), "{n} twice");
        }
        for f in FORMATS {
            for (i, e) in f.event_types.iter().enumerate() {
                assert!(f.event_types[i + 1..].iter().all(|o| o.name != e.name), "{}.{}", f.name, e.name);
            }
        }
    }

    /// The column `col` of type `t` of format `f` (a common column counts), as the profile names it.
    fn has(f: &FormatDecl, t: &str, col: Option<&str>) -> bool {
        let Some(et) = f.event_types.iter().find(|e| e.name == t) else { return false };
        col.is_none_or(|c| ["ts", "producer", "seq", "dur"].contains(&c) || et.params.iter().any(|p| p.name == c))
    }

    #[test]
    fn profiles_name_declared_types_and_columns() {
        for f in FORMATS {
            let p = &f.profile;
            if let Some(s) = p.spans {
                assert!(has(f, s.begin, s.key) && has(f, s.begin, s.name), "{}: spans {s:?}", f.name);
                if let Some(end) = s.end {
                    assert!(has(f, end, s.key), "{}: spans {s:?}", f.name);
                }
            }
            if let Some(o) = p.objects {
                for c in [o.object, o.field, o.value] {
                    assert!(has(f, o.event_type, Some(c)), "{}: objects {o:?}", f.name);
                }
            }
            if let Some(l) = p.locals {
                for c in [l.frame, l.var, l.value] {
                    assert!(has(f, l.event_type, Some(c)), "{}: locals {l:?}", f.name);
                }
            }
            if let Some(s) = p.samples {
                assert!(has(f, s.event_type, Some(s.stack)) && has(f, s.event_type, s.weight), "{}: {s:?}", f.name);
            }
            for (t, name, cat) in p.labels {
                assert!(has(f, t, Some(name)) && has(f, t, *cat), "{}: label {t}.{name}", f.name);
            }
            for (title, sql) in f.examples {
                assert!(!title.is_empty() && (sql.contains("{t}") || sql.contains("{s}")), "{}: {title}", f.name);
            }
        }
    }
}
