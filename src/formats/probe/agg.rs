//! The result tables aggregates become (`hist`, `map`, `stats`, declared in `decl.rs`): their rows
//! built column by column, cut into one record batch per table.

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use crate::formats::decl::Param;
use crate::formats::table::PType;

/// Rows of one aggregate table, as strings/ints/bools by column.
pub(super) struct Agg {
    names: &'static [Param],
    cols: Vec<AggCol>,
    rows: usize,
}

pub(super) enum AggCol {
    S(StringBuilder),
    I(Int64Builder),
    B(BooleanBuilder),
}

/// A value for an aggregate row.
pub(super) enum AV<'a> {
    S(Option<&'a str>),
    I(Option<i64>),
    B(bool),
}

impl Agg {
    pub(super) fn new(names: &'static [Param]) -> Self {
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

    pub(super) fn push(&mut self, vals: &[AV<'_>]) {
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

    pub(super) fn take(&mut self) -> Option<RecordBatch> {
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
