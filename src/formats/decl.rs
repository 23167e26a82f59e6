//! Event types declared once, as data: the single source of every format whose events a
//! Rust parser or generator makes.
//!
//! Owns the declaration types ([`FormatDecl`], [`EventTypeDecl`], [`Param`]) and the list
//! of declared formats ([`FORMATS`]). Each format declares its event types beside its
//! parser (`formats/<format>/decl.rs`, `workload/tod/decl.rs`): name, kind, a sentence,
//! and every parameter column with its type, its unit and a sentence. The parsers build
//! their Arrow tables from these declarations, and Python reads the same data through
//! `_core.format_declarations()` (`python/tracehouse/formats/declared.py`), so the two
//! sides cannot drift apart. The common columns (`ts`, `producer`, `seq`, `dur` for
//! spans) are not repeated here: every stored event has them (`schema.py` documents them).

use arrow_schema::{DataType, Field, Schema};

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

/// A format: its name, a one-line description, its event types and result tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatDecl {
    /// Format name (`tracehouse import <name>`, `th.traces.format`).
    pub name: &'static str,
    /// One line for `tracehouse tools` and the catalog.
    pub description: &'static str,
    /// Its fixed event types (a parser may add more from its input: bpftrace patterns).
    pub event_types: &'static [EventTypeDecl],
    /// Result tables its imports save.
    pub results: &'static [ResultDecl],
}

/// Every declared format, in the order Python lists them.
pub const FORMATS: [&FormatDecl; 7] = [
    &crate::workload::tod::decl::TOD,
    &crate::record::decl::PYTHON,
    &super::strace::decl::STRACE,
    &super::chrome::decl::CHROME,
    &super::probe::decl::BPFTRACE,
    &super::probe::decl::STAP,
    &super::paje::decl::PAJE,
];

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
}
