//! Row-at-a-time builders of Arrow record batches whose columns may be discovered
//! while parsing.
//!
//! Owns [`Table`]: the common event columns (`ts`, `producer`, `seq`, optionally
//! `dur`), fixed typed columns declared up front, and dynamic columns added when a
//! parser first meets them (Chrome `args` keys, fields of a bpftrace printf pattern).
//! A row sets the columns it has; every other column reads null for it. Padding with
//! nulls is lazy (a column catches up when it is next written, or when the batch is
//! cut), so a row costs nothing for the columns it does not have.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

/// A HashMap with rustc's FxHash (the `rustc-hash` crate; see Cargo.toml for why not SipHash).
pub type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// The parameter types of tracehouse (Python's `schema.PARAM_TYPES`), plus int32 for
/// the producer column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PType {
    /// int64
    Int,
    /// float64
    Float,
    /// bool
    Bool,
    /// string (UTF-8)
    Str,
    /// int32 (only the `producer` column)
    I32,
}

impl PType {
    /// The tracehouse name of the type ("int64", "float64", "bool", "string", "int32").
    pub fn name(self) -> &'static str {
        match self {
            PType::Int => "int64",
            PType::Float => "float64",
            PType::Bool => "bool",
            PType::Str => "string",
            PType::I32 => "int32",
        }
    }

    /// The type named `s` (as [`PType::name`] spells it).
    pub fn from_name(s: &str) -> Option<PType> {
        Some(match s {
            "int64" => PType::Int,
            "float64" => PType::Float,
            "bool" => PType::Bool,
            "string" => PType::Str,
            "int32" => PType::I32,
            _ => return None,
        })
    }

    /// Its Arrow type.
    pub fn data_type(self) -> DataType {
        match self {
            PType::Int => DataType::Int64,
            PType::Float => DataType::Float64,
            PType::Bool => DataType::Boolean,
            PType::Str => DataType::Utf8,
            PType::I32 => DataType::Int32,
        }
    }
}

enum Builder {
    I64(Int64Builder),
    F64(Float64Builder),
    Bool(BooleanBuilder),
    Str(StringBuilder),
    I32(Int32Builder),
}

impl Builder {
    fn new(t: PType, cap: usize) -> Self {
        match t {
            PType::Int => Builder::I64(Int64Builder::with_capacity(cap)),
            PType::Float => Builder::F64(Float64Builder::with_capacity(cap)),
            PType::Bool => Builder::Bool(BooleanBuilder::with_capacity(cap)),
            PType::Str => Builder::Str(StringBuilder::with_capacity(cap, cap * 16)),
            PType::I32 => Builder::I32(Int32Builder::with_capacity(cap)),
        }
    }

    fn len(&self) -> usize {
        match self {
            Builder::I64(b) => b.len(),
            Builder::F64(b) => b.len(),
            Builder::Bool(b) => b.len(),
            Builder::Str(b) => b.len(),
            Builder::I32(b) => b.len(),
        }
    }

    fn nulls(&mut self, n: usize) {
        match self {
            Builder::I64(b) => b.append_nulls(n),
            Builder::F64(b) => b.append_nulls(n),
            Builder::Bool(b) => b.append_nulls(n),
            Builder::Str(b) => {
                for _ in 0..n {
                    b.append_null()
                }
            }
            Builder::I32(b) => b.append_nulls(n),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::I64(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Str(b) => Arc::new(b.finish()),
            Builder::I32(b) => Arc::new(b.finish()),
        }
    }
}

struct Col {
    name: String,
    ptype: PType,
    nullable: bool,
    b: Builder,
}

/// A value for a dynamic column.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// int64
    Int(i64),
    /// float64
    Float(f64),
    /// bool
    Bool(bool),
    /// string
    Str(String),
}

impl Val {
    /// The column type this value is stored as.
    pub fn ptype(&self) -> PType {
        match self {
            Val::Int(_) => PType::Int,
            Val::Float(_) => PType::Float,
            Val::Bool(_) => PType::Bool,
            Val::Str(_) => PType::Str,
        }
    }
}

/// One event type's rows of the batch being built.
pub struct Table {
    /// The event type name.
    pub name: String,
    cols: Vec<Col>,
    index: HashMap<String, usize>,
    rows: usize,
    cap: usize,
    /// Bytes of string data buffered (to cut batches by size as well as rows).
    pub str_bytes: usize,
}

/// Index of `ts` in every table.
pub const TS: usize = 0;
/// Index of `producer`.
pub const PRODUCER: usize = 1;
/// Index of `seq`.
pub const SEQ: usize = 2;
/// Index of `dur` in span tables.
pub const DUR: usize = 3;

impl Table {
    /// A table with the common columns (`dur` when `span`) then `fixed` (all nullable).
    pub fn new(name: &str, span: bool, fixed: &[(&str, PType)], cap: usize) -> Self {
        let mut t =
            Table { name: name.to_string(), cols: Vec::new(), index: HashMap::new(), rows: 0, cap, str_bytes: 0 };
        t.push_col("ts", PType::Int, false);
        t.push_col("producer", PType::I32, false);
        t.push_col("seq", PType::Int, false);
        if span {
            t.push_col("dur", PType::Int, false);
        }
        for (n, ty) in fixed {
            t.push_col(n, *ty, true);
        }
        t
    }

    fn push_col(&mut self, name: &str, ptype: PType, nullable: bool) -> usize {
        let i = self.cols.len();
        self.cols.push(Col { name: name.to_string(), ptype, nullable, b: Builder::new(ptype, self.cap) });
        self.index.insert(name.to_string(), i);
        i
    }

    /// Index of the column `name`, if the table has it.
    pub fn col(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Whether the table has a column named `name` in any case (SQL names ignore case).
    pub fn has_col_in_any_case(&self, name: &str) -> bool {
        self.cols.iter().any(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// Type of column `i`.
    pub fn col_type(&self, i: usize) -> PType {
        self.cols[i].ptype
    }

    /// Number of columns.
    pub fn width(&self) -> usize {
        self.cols.len()
    }

    /// Adds a nullable column (null for the rows already in the batch); returns its index.
    pub fn add_col(&mut self, name: &str, ptype: PType) -> usize {
        if let Some(i) = self.col(name) {
            return i;
        }
        self.push_col(name, ptype, true)
    }

    /// Rows in the batch being built.
    pub fn rows(&self) -> usize {
        self.rows
    }

    #[inline]
    fn pad(&mut self, i: usize) -> &mut Builder {
        let rows = self.rows;
        let c = &mut self.cols[i].b;
        let n = c.len();
        if n < rows {
            c.nulls(rows - n);
        }
        c
    }

    /// Starts a row with its common columns.
    #[inline]
    pub fn start(&mut self, ts: i64, producer: i32, seq: i64) {
        self.set_i64(TS, ts);
        if let Builder::I32(b) = self.pad(PRODUCER) {
            b.append_value(producer);
        }
        self.set_i64(SEQ, seq);
    }

    /// Ends the row: columns not set read null.
    #[inline]
    pub fn end(&mut self) {
        self.rows += 1;
    }

    /// Sets int64 column `i` of the current row.
    #[inline]
    pub fn set_i64(&mut self, i: usize, v: i64) {
        match self.pad(i) {
            Builder::I64(b) => b.append_value(v),
            Builder::F64(b) => b.append_value(v as f64),
            _ => debug_assert!(false, "set_i64 on a non-integer column"),
        }
    }

    /// Sets float64 column `i` of the current row.
    #[inline]
    pub fn set_f64(&mut self, i: usize, v: f64) {
        if let Builder::F64(b) = self.pad(i) {
            b.append_value(v)
        }
    }

    /// Sets bool column `i` of the current row.
    #[inline]
    pub fn set_bool(&mut self, i: usize, v: bool) {
        if let Builder::Bool(b) = self.pad(i) {
            b.append_value(v)
        }
    }

    /// Sets string column `i` of the current row.
    #[inline]
    pub fn set_str(&mut self, i: usize, v: &str) {
        self.str_bytes += v.len();
        if let Builder::Str(b) = self.pad(i) {
            b.append_value(v)
        }
    }

    /// Sets column `i` from a [`Val`] of its type (an int into a float column is
    /// converted); returns false, setting nothing, when the types do not fit.
    pub fn set_val(&mut self, i: usize, v: &Val) -> bool {
        match (self.cols[i].ptype, v) {
            (PType::Int, Val::Int(x)) => self.set_i64(i, *x),
            (PType::Float, Val::Int(x)) => self.set_f64(i, *x as f64),
            (PType::Float, Val::Float(x)) => self.set_f64(i, *x),
            (PType::Bool, Val::Bool(x)) => self.set_bool(i, *x),
            (PType::Str, Val::Str(x)) => self.set_str(i, x),
            _ => return false,
        }
        true
    }

    /// True when column `i` already has a value in the current row.
    pub fn is_set(&self, i: usize) -> bool {
        self.cols[i].b.len() > self.rows
    }

    /// Cuts the batch: every column padded to the row count. None when empty.
    pub fn take(&mut self) -> Option<RecordBatch> {
        if self.rows == 0 {
            return None;
        }
        let rows = self.rows;
        let mut fields = Vec::with_capacity(self.cols.len());
        let mut arrays = Vec::with_capacity(self.cols.len());
        for c in &mut self.cols {
            let n = c.b.len();
            if n < rows {
                c.b.nulls(rows - n);
            }
            fields.push(Field::new(&c.name, c.ptype.data_type(), c.nullable));
            arrays.push(c.b.finish());
        }
        self.rows = 0;
        self.str_bytes = 0;
        let schema = Arc::new(Schema::new(fields));
        Some(RecordBatch::try_new(schema, arrays).expect("columns padded to one length"))
    }

    /// (name, type) of every column, in order.
    pub fn columns(&self) -> Vec<(String, PType)> {
        self.cols.iter().map(|c| (c.name.clone(), c.ptype)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, Int64Array, StringArray};

    #[test]
    fn lazy_nulls_and_late_columns() {
        let mut t = Table::new("x", true, &[("name", PType::Str)], 4);
        t.start(1, 0, 0);
        t.set_i64(DUR, 5);
        t.set_str(4, "a");
        t.end();
        let c = t.add_col("arg_k", PType::Int);
        t.start(2, 0, 1);
        t.set_i64(DUR, 6);
        t.set_i64(c, 42);
        t.end();
        t.start(3, 1, 0);
        t.set_i64(DUR, 7);
        t.end();
        let b = t.take().unwrap();
        assert_eq!(b.num_rows(), 3);
        let names = b.column(4).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!((names.value(0), names.is_null(1), names.is_null(2)), ("a", true, true));
        let k = b.column(5).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!((k.is_null(0), k.value(1), k.is_null(2)), (true, 42, true));
        assert!(t.take().is_none());
        assert!(!b.schema().field(0).is_nullable());
    }
}
