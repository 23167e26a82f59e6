//! Python face of the native InfluxQL executor (`analysis::influx`): `_core.SeriesPart` (one
//! part of a measurement's columns, sorted by producer, time and seq) and
//! `_core.influx_aggregate` / `_core.influx_raw` over a list of them.
//!
//! Owns argument conversion (pyarrow arrays in, zero-copy, nulls allowed in the fields; pyarrow
//! arrays out) and runs the loops with the interpreter lock released when they are long enough
//! for that to pay (`DETACH_VALUES`: the server's other threads go on meanwhile).

use std::sync::Arc;

use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, StructArray, UInt32Array};
use arrow_data::ArrayData;
use arrow_pyarrow::{FromPyArrowUnchecked, ToPyArrow};
use arrow_schema::{DataType, Field as ArrowField};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PyString};

use super::arrow::primitive_from_pyarrow;
use super::detach_if;
use crate::analysis::influx::{self, Agg, AggQuery, Answer, Field, Op, Part, Selection, Value};

/// Values a call walks above which it lets the interpreter lock go (`detach_if`): getting the
/// lock back after a short call waits for the server's other threads, up to the interpreter's
/// switch interval (src/py/mod.rs), for a call of well under a millisecond.
const DETACH_VALUES: usize = 200_000;

/// A part of a measurement's columns held for the native executor.
#[pyclass(name = "SeriesPart", frozen, module = "tracehouse._core")]
struct PySeriesPart {
    inner: Arc<Part>,
}

fn field_from_pyarrow(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Field> {
    // SAFETY: imported through the Arrow C data interface; `validate` checks the buffers.
    let data = unsafe { ArrayData::from_pyarrow_bound_unchecked(obj) }
        .map_err(|e| PyTypeError::new_err(format!("{what}: expected a pyarrow array ({e})")))?;
    data.validate().map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
    match data.data_type() {
        DataType::Float64 => Ok(Field::F(Float64Array::from(data))),
        DataType::Int64 => Ok(Field::I(Int64Array::from(data))),
        t => Err(PyTypeError::new_err(format!("{what}: expected double or int64 values, got {t}"))),
    }
}

#[pymethods]
impl PySeriesPart {
    /// A part from its columns: `producer` (int32), `ts` and `seq` (int64), sorted by the three
    /// and non-null; `fields` by the measurement's field index, each double or int64 (nulls
    /// allowed) or None.
    #[new]
    fn new(
        producer: &Bound<'_, PyAny>,
        ts: &Bound<'_, PyAny>,
        seq: &Bound<'_, PyAny>,
        fields: &Bound<'_, PyList>,
    ) -> PyResult<Self> {
        let producer = primitive_from_pyarrow::<Int32Type>(producer, "producer")?;
        let ts = primitive_from_pyarrow::<Int64Type>(ts, "ts")?;
        let seq = primitive_from_pyarrow::<Int64Type>(seq, "seq")?;
        let fields = fields
            .iter()
            .enumerate()
            .map(
                |(i, f)| if f.is_none() { Ok(None) } else { field_from_pyarrow(&f, &format!("fields[{i}]")).map(Some) },
            )
            .collect::<PyResult<Vec<_>>>()?;
        let part = Part::new(producer.values(), ts, seq, fields).map_err(PyValueError::new_err)?;
        Ok(PySeriesPart { inner: Arc::new(part) })
    }

    /// Rows held.
    #[getter]
    fn rows(&self) -> usize {
        self.inner.rows()
    }

    /// Bytes of its columns.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.bytes()
    }
}

fn parts_of(parts: &Bound<'_, PyList>) -> PyResult<Vec<Arc<Part>>> {
    parts.iter().map(|p| Ok(p.cast::<PySeriesPart>()?.get().inner.clone())).collect()
}

fn value_of(v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_instance_of::<PyInt>() {
        Ok(Value::I(v.extract()?))
    } else {
        Ok(Value::F(v.extract()?))
    }
}

/// A `Selection` from its Python form: (groups: [[producer]], lo, hi, filters: [(field, op,
/// value)], present: [field]).
fn selection(obj: &Bound<'_, PyAny>) -> PyResult<Selection> {
    let (groups, lo, hi, filters, present): (Vec<Vec<i32>>, i64, i64, Bound<'_, PyList>, Vec<usize>) = obj.extract()?;
    let filters = filters
        .iter()
        .map(|f| {
            let (field, op, value): (usize, String, Bound<'_, PyAny>) = f.extract()?;
            let op =
                Op::parse(&op).ok_or_else(|| PyValueError::new_err(format!("filters: unknown operator {op:?}")))?;
            Ok((field, op, value_of(&value)?))
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Selection { groups, lo, hi, filters, present })
}

/// A column of values as an Arrow array (int64 when `int`, else double; None is null).
fn column(values: &[Option<Value>], int: bool) -> ArrayRef {
    if int {
        Arc::new(values.iter().map(|v| v.map(Value::as_i64)).collect::<Int64Array>())
    } else {
        Arc::new(values.iter().map(|v| v.map(Value::as_f64)).collect::<Float64Array>())
    }
}

/// (group, time, producer, [values]) as pyarrow arrays, exported as one struct array: one
/// crossing of the C data interface, not one per column (~30 us each: TSBS lastpoint's 13
/// arrays cost more than its query).
fn answer_to_py<'py>(py: Python<'py>, ans: Answer, ints: &[bool]) -> PyResult<Bound<'py, PyAny>> {
    let n = ans.time.len();
    let producer = if ans.producer.len() == n { ans.producer } else { vec![0; n] };
    let mut cols: Vec<(Arc<ArrowField>, ArrayRef)> = vec![
        (Arc::new(ArrowField::new("group", DataType::UInt32, false)), Arc::new(UInt32Array::from(ans.group))),
        (Arc::new(ArrowField::new("time", DataType::Int64, false)), Arc::new(Int64Array::from(ans.time))),
        (Arc::new(ArrowField::new("producer", DataType::Int32, false)), Arc::new(Int32Array::from(producer))),
    ];
    for (k, (values, &int)) in ans.columns.iter().zip(ints).enumerate() {
        let c = column(values, int);
        cols.push((Arc::new(ArrowField::new(format!("v{k}"), c.data_type().clone(), true)), c));
    }
    let whole = StructArray::from(cols).into_data().to_pyarrow(py)?;
    let arrays = whole.call_method0(intern!(py, "flatten"))?;
    let group = arrays.get_item(0)?;
    let time = arrays.get_item(1)?;
    let producer = arrays.get_item(2)?;
    let values = PyList::empty(py);
    for k in 0..ans.columns.len() {
        values.append(arrays.get_item(3 + k)?)?;
    }
    Ok((group, time, producer, values).into_pyobject(py)?.into_any())
}

/// An aggregate query over `parts` and `selection` (`selection`'s form; module docstring of
/// `analysis::influx`): (group uint32,
/// time int64, producer int32 (empty), [values]), or None when it has more than `max_buckets`
/// windows. `aggs`: (function name, field index); `int_fields`: each field's integer-ness.
/// With `prefixes` (group `g`'s series object up to `"values":`), the answer is whole InfluxDB
/// series instead, JSON text, one bytes per group with rows, times as `influx_raw_json` writes
/// them (`epoch_div`): no Arrow crossing (TSBS single-groupby's few rows went through one).
#[pyfunction]
#[pyo3(signature = (parts, selection, aggs, int_fields, interval, offset, fill_none, stamp, selector_time, descending, page_offset, page_limit, max_buckets, grid_hi, prefixes=None, epoch_div=0))]
#[allow(clippy::too_many_arguments)]
fn influx_aggregate<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyList>,
    selection: &Bound<'py, PyAny>,
    aggs: Vec<(String, usize)>,
    int_fields: Vec<bool>,
    interval: i64,
    offset: i64,
    fill_none: bool,
    stamp: i64,
    selector_time: bool,
    descending: bool,
    page_offset: usize,
    page_limit: usize,
    max_buckets: i64,
    grid_hi: i64,
    prefixes: Option<Vec<String>>,
    epoch_div: i64,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let parts = parts_of(parts)?;
    let sel = self::selection(selection)?;
    let aggs = aggs
        .into_iter()
        .map(|(name, f)| {
            let a =
                Agg::parse(&name).ok_or_else(|| PyValueError::new_err(format!("aggs: unknown function {name:?}")))?;
            Ok((a, f))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let ints: Vec<bool> = aggs
        .iter()
        .map(|&(a, f)| match a {
            Agg::Count => true,
            Agg::Mean => false,
            _ => int_fields.get(f).copied().unwrap_or(false),
        })
        .collect();
    let q = AggQuery {
        aggs,
        int_fields,
        interval,
        offset,
        fill_none,
        stamp,
        selector_time,
        descending,
        page_offset,
        page_limit,
        max_buckets,
        grid_hi,
    };
    let refs: Vec<&Part> = parts.iter().map(|p| p.as_ref()).collect();
    let big = walks_much(&sel, &refs, usize::MAX, q.aggs.len());
    if let Some(prefixes) = prefixes {
        if prefixes.len() < sel.groups.len() {
            return Err(PyValueError::new_err(format!("prefixes: {} for {} groups", prefixes.len(), sel.groups.len())));
        }
        let outs: Vec<influx::Out> = (0..q.aggs.len()).map(influx::Out::Field).collect();
        let texts = detach_if(py, big, || {
            influx::aggregate(&refs, &sel, &q)
                .map(|ans| influx::raw_series_json(&ans, epoch_div, &outs, &ints, &[], &[] as &[Vec<&str>], &prefixes))
        });
        return match texts {
            Ok(texts) => Ok(Some(PyList::new(py, texts.iter().map(|b| PyBytes::new(py, b)))?.into_any())),
            Err(_) => Ok(None),
        };
    }
    let ans = detach_if(py, big, || influx::aggregate(&refs, &sel, &q));
    match ans {
        Ok(ans) => Ok(Some(answer_to_py(py, ans, &ints)?)),
        Err(_) => Ok(None),
    }
}

/// A raw query over `parts` and `selection`: (group uint32, time int64, producer int32, [values of `fields`]),
/// the rows of each group by (time, producer, seq), descending with `descending`, `offset` and
/// `limit` (0: none) per group.
#[pyfunction]
#[pyo3(signature = (parts, selection, fields, int_fields, descending, offset, limit))]
#[allow(clippy::too_many_arguments)]
fn influx_raw<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyList>,
    selection: &Bound<'py, PyAny>,
    fields: Vec<usize>,
    int_fields: Vec<bool>,
    descending: bool,
    offset: usize,
    limit: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let parts = parts_of(parts)?;
    let sel = self::selection(selection)?;
    let (ans, ints) = run_raw(py, &parts, &sel, &fields, &int_fields, (descending, offset, limit), |ans, _| ans);
    answer_to_py(py, ans, &ints)
}

/// `influx::raw` over `parts` and `sel`, then `then` with its answer and each output field's
/// integer flag, the two together outside the interpreter's lock when the query is big; returns
/// what `then` made and the flags. `page`: (descending, offset, limit).
/// Whether a query walks more than `DETACH_VALUES` values: `Selection::work` (a range per series
/// and part) only when the bound of `per_range` rows of each cannot tell (TSBS lastpoint's 100
/// series x 10 parts x 1 row: the count was a second pass over the ranges, ~7 % of the call).
fn walks_much(sel: &Selection, parts: &[&Part], per_range: usize, columns: usize) -> bool {
    let ranges = sel.groups.iter().map(Vec::len).sum::<usize>().saturating_mul(parts.len());
    let most = ranges.saturating_mul(per_range).saturating_mul(columns.max(1));
    most > DETACH_VALUES && sel.work(parts, per_range).saturating_mul(columns.max(1)) > DETACH_VALUES
}

fn run_raw<T: Send>(
    py: Python<'_>,
    parts: &[Arc<Part>],
    sel: &Selection,
    fields: &[usize],
    int_fields: &[bool],
    page: (bool, usize, usize),
    then: impl Send + FnOnce(Answer, &[bool]) -> T,
) -> (T, Vec<bool>) {
    let (descending, offset, limit) = page;
    let ints: Vec<bool> = fields.iter().map(|&f| int_fields.get(f).copied().unwrap_or(false)).collect();
    let refs: Vec<&Part> = parts.iter().map(|p| p.as_ref()).collect();
    let want = if limit == 0 { usize::MAX } else { offset.saturating_add(limit) };
    let big = walks_much(sel, &refs, want, fields.len());
    let got = detach_if(py, big, || then(influx::raw(&refs, sel, fields, descending, offset, limit), &ints));
    (got, ints)
}

/// A raw query as `influx_raw` runs it, answered as whole InfluxDB series, JSON text (one bytes
/// per group with rows, `analysis::influx::raw_series_json`): `outs` per output column
/// (is a tag, index: into `fields`, or into `tag_text`), `tag_text[j]` each producer's value of
/// tag `j` as JSON text, by its place in `producers` (sorted), `prefixes[g]` group `g`'s series
/// object up to `"values":`. No Arrow crossing: TSBS lastpoint's 100 rows went through one
/// (and pyarrow lets the interpreter lock go there, waiting on the server's other threads).
#[pyfunction]
#[pyo3(signature = (parts, selection, fields, int_fields, descending, offset, limit, epoch_div, outs, producers, tag_text, prefixes))]
#[allow(clippy::too_many_arguments)]
fn influx_raw_json<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyList>,
    selection: &Bound<'py, PyAny>,
    fields: Vec<usize>,
    int_fields: Vec<bool>,
    descending: bool,
    offset: usize,
    limit: usize,
    epoch_div: i64,
    outs: Vec<(bool, usize)>,
    producers: Vec<i32>,
    tag_text: Vec<Vec<Bound<'py, PyString>>>,
    prefixes: Vec<Bound<'py, PyString>>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    // (the strings' own UTF-8, borrowed: copied, TSBS lastpoint's 900 tags and 100 openings were
    // a thousand allocations a call)
    let tag_text = tag_text
        .iter()
        .map(|t| t.iter().map(|s| s.to_str()).collect::<PyResult<Vec<&str>>>())
        .collect::<PyResult<Vec<_>>>()?;
    let prefixes = prefixes.iter().map(|s| s.to_str()).collect::<PyResult<Vec<&str>>>()?;
    let parts = parts_of(parts)?;
    let sel = self::selection(selection)?;
    if prefixes.len() < sel.groups.len() {
        return Err(PyValueError::new_err(format!("prefixes: {} for {} groups", prefixes.len(), sel.groups.len())));
    }
    if producers.windows(2).any(|w| w[0] >= w[1]) {
        return Err(PyValueError::new_err("producers: not ascending"));
    }
    let mut out = Vec::with_capacity(outs.len());
    for &(tag, i) in &outs {
        if tag {
            match tag_text.get(i) {
                Some(t) if t.len() == producers.len() => out.push(influx::Out::Tag(i)),
                _ => return Err(PyValueError::new_err(format!("outs: tag {i} has no text for each producer"))),
            }
        } else if i < fields.len() {
            out.push(influx::Out::Field(i));
        } else {
            return Err(PyValueError::new_err(format!("outs: field {i} of {}", fields.len())));
        }
    }
    let (texts, _) = run_raw(py, &parts, &sel, &fields, &int_fields, (descending, offset, limit), |ans, ints| {
        influx::raw_series_json(&ans, epoch_div, &out, ints, &producers, &tag_text, &prefixes)
    });
    Ok(texts.iter().map(|b| PyBytes::new(py, b)).collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySeriesPart>()?;
    m.add_function(wrap_pyfunction!(influx_aggregate, m)?)?;
    m.add_function(wrap_pyfunction!(influx_raw, m)?)?;
    m.add_function(wrap_pyfunction!(influx_raw_json, m)?)
}
