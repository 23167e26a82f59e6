//! What a format's streaming parser is to the rest of the house: the [`ChunkParser`] trait the
//! one Python class `_core.NativeParser` drives (`src/py/parser.rs`), whatever the format.
//!
//! Owns the parser interface (chunks in, Arrow batches out, then producers, counts and
//! problems), the values it hands over ([`Problem`], [`ProducerRow`]) and the options a
//! format's factory is built from ([`Options`], checked against the [`OptionDecl`]s its
//! declaration lists). A format adds a parser by implementing the trait and naming its
//! factory in its declaration (`formats/<fmt>/decl.rs`, [`super::decl::ParserDecl`]); no
//! Python glue is written per format.

use arrow_array::RecordBatch;

use super::table::PType;

/// A record that could not be imported: its line (1-based), byte offset (0 when the format
/// counts lines only) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Line of the record's first byte.
    pub line: u64,
    /// Byte offset of the record's first byte in the (decompressed) input, or 0.
    pub offset: u64,
    /// What is wrong with it.
    pub reason: String,
}

impl Problem {
    /// A problem of a line-based format (no byte offset).
    pub fn at_line(line: u64, reason: impl Into<String>) -> Self {
        Problem { line, offset: 0, reason: reason.into() }
    }
}

/// A producer attribute value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    /// An integer (pid, tid, cpu, a time in ns).
    Int(i64),
    /// Text.
    Str(String),
}

/// One producer as `Store.add_producers` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerRow {
    /// Producer id (the `producer` column of the batches).
    pub id: i32,
    /// Its parent, None at the root.
    pub parent: Option<i32>,
    /// Its kind: process, thread, cpu, container type ...
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its typed attributes.
    pub attrs: Vec<(String, Attr)>,
}

/// An event type a parser makes from its options or its input (bpftrace's patterns), declared
/// as the fixed ones are: name, kind, a sentence, and its parameters after the common columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputType {
    /// Type name.
    pub name: String,
    /// instant, span, begin, end, counter or link.
    pub kind: &'static str,
    /// A sentence saying what one event of it is.
    pub doc: String,
    /// (column, type, unit, sentence) of each parameter.
    pub columns: Vec<(String, PType, String, String)>,
}

/// A column discovered in the input: (event type, column, type, original key).
pub type NewColumn = (String, String, PType, String);

/// A parser fed chunks cut anywhere, handing out full batches per event type.
pub trait ChunkParser: Send + Sync {
    /// Parses a chunk.
    fn feed(&mut self, chunk: &[u8]);
    /// Ends the input (last partial record, open state).
    fn finish(&mut self);
    /// Batches that reached the batch size (every non-empty one when `all`).
    fn take_batches(&mut self, all: bool) -> Vec<(String, RecordBatch)>;
    /// Every producer met so far.
    fn producers(&self) -> Vec<ProducerRow>;
    /// Counts for the import report (records, unmatched halves, ...), `rejected` included.
    fn stats(&self) -> Vec<(String, u64)>;
    /// The first rejected records.
    fn problems(&self) -> Vec<Problem>;
    /// In strict mode, the record that stopped the parse.
    fn fatal(&self) -> Option<Problem>;
    /// Columns discovered since the last call (Chrome's `args` keys).
    fn take_new_columns(&mut self) -> Vec<NewColumn> {
        Vec::new()
    }
    /// Declares a column known from an earlier trace of the format (`end`: of the closing
    /// half); false when the type is unknown or the name taken, or the format has none.
    fn declare(&mut self, _event_type: &str, _column: &str, _ptype: PType, _key: &str, _end: bool) -> bool {
        false
    }
    /// Event types made from the input or the options rather than declared.
    fn input_types(&self) -> Vec<InputType> {
        Vec::new()
    }
    /// Result tables (aggregates) to save beside the trace: (result kind, batch).
    fn take_results(&mut self) -> Vec<(String, RecordBatch)> {
        Vec::new()
    }
    /// Anything else the import report shows, as one JSON object text (`{}` when nothing).
    fn details_json(&self) -> String {
        "{}".into()
    }
}

/// Implements [`ChunkParser`]'s input half for a parser type by its inherent `feed`,
/// `finish` and `take_batches` (the Rust tests call those without importing the trait);
/// the block given holds the rest of the trait's methods.
macro_rules! chunk_parser {
    ($t:ty { $($rest:tt)* }) => {
        impl $crate::formats::ChunkParser for $t {
            fn feed(&mut self, chunk: &[u8]) {
                <$t>::feed(self, chunk)
            }
            fn finish(&mut self) {
                <$t>::finish(self)
            }
            fn take_batches(&mut self, all: bool) -> Vec<(String, arrow_array::RecordBatch)> {
                <$t>::take_batches(self, all)
            }
            $($rest)*
        }
    };
}
pub(crate) use chunk_parser;

/// The type of a parser option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptKind {
    /// true / false
    Bool,
    /// a non-negative integer
    Int,
    /// text
    Str,
    /// a list of texts (an option given several times)
    List,
}

impl OptKind {
    /// Its name in messages and in `_core.format_declarations()`.
    pub fn name(self) -> &'static str {
        match self {
            OptKind::Bool => "bool",
            OptKind::Int => "int",
            OptKind::Str => "str",
            OptKind::List => "list",
        }
    }
}

/// One option a format's parser takes, beyond the ones every parser takes ([`COMMON_OPTIONS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionDecl {
    /// Its name (an identifier: the keyword argument of `_core.NativeParser`).
    pub name: &'static str,
    /// Its type.
    pub kind: OptKind,
    /// A sentence saying what it does.
    pub doc: &'static str,
}

/// The options every parser takes.
pub const COMMON_OPTIONS: &[OptionDecl] = &[
    OptionDecl { name: "strict", kind: OptKind::Bool, doc: "stop at the first bad record instead of skipping it" },
    OptionDecl { name: "batch_rows", kind: OptKind::Int, doc: "rows per event type after which a batch is cut" },
    OptionDecl {
        name: "max_line",
        kind: OptKind::Int,
        doc: "the longest line (or record) accepted, in bytes; a longer one is rejected and skipped",
    },
];

/// An option's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptValue {
    /// A bool option.
    Bool(bool),
    /// An int option.
    Int(u64),
    /// A str option.
    Str(String),
    /// A list option.
    List(Vec<String>),
}

/// The options a factory is built from, checked against its declaration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    values: Vec<(String, OptValue)>,
}

impl Options {
    /// Checked options: every name declared (common or the format's), every value of its type.
    pub fn new(declared: &[OptionDecl], given: Vec<(String, OptValue)>) -> Result<Self, String> {
        for (name, v) in &given {
            let Some(d) = COMMON_OPTIONS.iter().chain(declared).find(|d| d.name == name) else {
                let known: Vec<&str> = COMMON_OPTIONS.iter().chain(declared).map(|d| d.name).collect();
                return Err(format!("unknown option {name:?} (options: {})", known.join(", ")));
            };
            let ok = matches!(
                (d.kind, v),
                (OptKind::Bool, OptValue::Bool(_))
                    | (OptKind::Int, OptValue::Int(_))
                    | (OptKind::Str, OptValue::Str(_))
                    | (OptKind::List, OptValue::List(_))
            );
            if !ok {
                return Err(format!("option {name}: expected {}", d.kind.name()));
            }
        }
        Ok(Options { values: given })
    }

    fn get(&self, name: &str) -> Option<&OptValue> {
        self.values.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// A bool option, `default` when not given.
    pub fn bool(&self, name: &str, default: bool) -> bool {
        match self.get(name) {
            Some(OptValue::Bool(b)) => *b,
            _ => default,
        }
    }

    /// An int option, `default` when not given.
    pub fn int(&self, name: &str, default: u64) -> u64 {
        match self.get(name) {
            Some(OptValue::Int(i)) => *i,
            _ => default,
        }
    }

    /// An int option, None when not given.
    pub fn int_given(&self, name: &str) -> Option<u64> {
        match self.get(name) {
            Some(OptValue::Int(i)) => Some(*i),
            _ => None,
        }
    }

    /// A str option, None when not given.
    pub fn str(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(OptValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// A list option, empty when not given.
    pub fn list(&self, name: &str) -> &[String] {
        match self.get(name) {
            Some(OptValue::List(l)) => l,
            _ => &[],
        }
    }

    /// `strict` (default false).
    pub fn strict(&self) -> bool {
        self.bool("strict", false)
    }

    /// `batch_rows` (default 65,536; at least 1).
    pub fn batch_rows(&self) -> usize {
        (self.int("batch_rows", 65_536) as usize).max(1)
    }

    /// `max_line` (default [`super::MAX_LINE`]; at least 1).
    pub fn max_line(&self) -> usize {
        (self.int("max_line", super::MAX_LINE as u64) as usize).max(1)
    }
}

/// Keeps the first `keep` problems and counts them all; the shared bookkeeping of the
/// line-based parsers' rejects.
#[derive(Debug, Default)]
pub struct Rejects {
    /// Records rejected.
    pub count: u64,
    /// The first ones.
    pub first: Vec<Problem>,
    /// In strict mode, the one that stopped the parse.
    pub fatal: Option<Problem>,
}

/// How many rejected records are kept with their line and reason.
pub const KEEP_PROBLEMS: usize = 10;

impl Rejects {
    /// Records a rejected record; in strict mode it becomes the fatal one. Returns false when
    /// the parse must stop.
    pub fn reject(&mut self, strict: bool, p: Problem) -> bool {
        self.count += 1;
        if strict {
            if self.fatal.is_none() {
                self.fatal = Some(p);
            }
            return false;
        }
        if self.first.len() < KEEP_PROBLEMS {
            self.first.push(p);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINE: &[OptionDecl] = &[OptionDecl { name: "unit", kind: OptKind::Str, doc: "a unit" }];

    #[test]
    fn options_are_checked_against_the_declaration() {
        let o = Options::new(
            MINE,
            vec![("unit".into(), OptValue::Str("ms".into())), ("strict".into(), OptValue::Bool(true))],
        )
        .unwrap();
        assert_eq!((o.str("unit"), o.strict(), o.batch_rows()), (Some("ms"), true, 65_536));
        let e = Options::new(MINE, vec![("color".into(), OptValue::Bool(true))]).unwrap_err();
        assert!(e.contains("unknown option \"color\"") && e.contains("unit"), "{e}");
        let e = Options::new(MINE, vec![("unit".into(), OptValue::Int(3))]).unwrap_err();
        assert_eq!(e, "option unit: expected str");
        assert_eq!(Options::default().batch_rows(), 65_536);
        let zero = Options::new(&[], vec![("batch_rows".into(), OptValue::Int(0))]).unwrap();
        assert_eq!(zero.batch_rows(), 1);
    }

    #[test]
    fn strict_rejects_stop_and_keep_the_first() {
        let mut r = Rejects::default();
        for i in 0..20 {
            assert!(r.reject(false, Problem::at_line(i, "bad")));
        }
        assert_eq!((r.count, r.first.len()), (20, KEEP_PROBLEMS));
        assert!(!r.reject(true, Problem::at_line(99, "worse")));
        assert_eq!(r.fatal.as_ref().map(|p| p.line), Some(99));
    }
}
