//! Python face of the analysis passes: `_core.stable_order`, `_core.running_max_by_key`, `_core.pair_spans`, `_core.SpanPairer`, `_core.nest_spans`,
//! `_core.call_tree`, `_core.window_paths`, `_core.window_candidates`, `_core.window_groups`, `_core.hist_log2`, `_core.hist_linear`, `_core.binned_counts`,
//! `_core.pack_int64` and `_core.PackedColumn` (the derived indexes' packed columns; its
//! `seq_lookup` and `rank_many` read the density index's seqs for `statistics.seq_at`).
//!
//! Owns argument conversion (pyarrow arrays in, zero-copy; pyarrow arrays out) and runs
//! every pass with the GIL released. The passes themselves are the pure Rust modules
//! `order`, `spans`, `calltree`, `hist` and `density`.

use arrow_array::types::{ArrowPrimitiveType, Int32Type, Int64Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, Int32Array, Int64Array, LargeBinaryArray, PrimitiveArray, UInt8Array};
use arrow_buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_data::ArrayData;
use arrow_pyarrow::{FromPyArrowUnchecked, ToPyArrow};
use arrow_schema::DataType;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::arrow::{bools_to_pyarrow, primitive_from_pyarrow, vec_to_pyarrow};
use crate::analysis::{calltree, density, hist, packed, spans, window};
use crate::store::order;

fn i64s(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Int64Array> {
    primitive_from_pyarrow::<Int64Type>(obj, what)
}

fn i32s(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Int32Array> {
    primitive_from_pyarrow::<Int32Type>(obj, what)
}

/// The permutation (uint32) ordering rows by the int64 `keys` columns, stable.
#[pyfunction]
fn stable_order<'py>(py: Python<'py>, keys: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyAny>> {
    let cols: Vec<Int64Array> =
        keys.iter().enumerate().map(|(i, k)| i64s(&k, &format!("keys[{i}]"))).collect::<PyResult<_>>()?;
    let n = cols.first().map_or(0, |c| c.len());
    if cols.iter().any(|c| c.len() != n) {
        return Err(PyValueError::new_err("keys: columns differ in length"));
    }
    if n > order::MAX_ROWS {
        return Err(PyValueError::new_err("keys: more than 2^32 - 1 rows"));
    }
    let out = py.detach(|| {
        let slices: Vec<&[i64]> = cols.iter().map(|c| c.values().as_ref()).collect();
        order::stable_order(&slices)
    });
    vec_to_pyarrow::<UInt32Type>(py, out)
}

/// The running maximum of `values` within runs of rows with equal int64 `keys` (int64).
#[pyfunction]
fn running_max_by_key<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyList>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let cols: Vec<Int64Array> =
        keys.iter().enumerate().map(|(i, k)| i64s(&k, &format!("keys[{i}]"))).collect::<PyResult<_>>()?;
    let v = i64s(values, "values")?;
    if cols.iter().any(|c| c.len() != v.len()) {
        return Err(PyValueError::new_err("keys and values differ in length"));
    }
    let out = py.detach(|| {
        let slices: Vec<&[i64]> = cols.iter().map(|c| c.values().as_ref()).collect();
        order::running_max_by_key(&slices, v.values())
    });
    vec_to_pyarrow::<Int64Type>(py, out)
}

/// The chunks of a column: a pyarrow ChunkedArray, a list of arrays or one array.
fn chunks<T: ArrowPrimitiveType>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<PrimitiveArray<T>>> {
    if let Ok(list) = obj.cast::<PyList>() {
        return list.iter().map(|a| primitive_from_pyarrow::<T>(&a, what)).collect();
    }
    if obj.hasattr(intern!(obj.py(), "chunks"))? && obj.hasattr(intern!(obj.py(), "num_chunks"))? {
        let list = obj.getattr(intern!(obj.py(), "chunks"))?;
        return list.try_iter()?.map(|a| primitive_from_pyarrow::<T>(&a?, what)).collect();
    }
    Ok(vec![primitive_from_pyarrow::<T>(obj, what)?])
}

fn slices<T: ArrowPrimitiveType>(cols: &[PrimitiveArray<T>]) -> Vec<&[T::Native]> {
    cols.iter().map(|c| c.values().as_ref()).collect()
}

/// Pairs begin and end halves into spans; see `spans.rs` for the rules. Every column may
/// be chunked (ChunkedArray or list of arrays, the same chunk lengths within one side):
/// the chunks are read in place.
#[pyfunction]
#[pyo3(signature = (begin_ts, begin_producer, begin_seq, end_ts, end_producer, end_seq, begin_key=None, end_key=None))]
#[allow(clippy::too_many_arguments)]
fn pair_spans<'py>(
    py: Python<'py>,
    begin_ts: &Bound<'py, PyAny>,
    begin_producer: &Bound<'py, PyAny>,
    begin_seq: &Bound<'py, PyAny>,
    end_ts: &Bound<'py, PyAny>,
    end_producer: &Bound<'py, PyAny>,
    end_seq: &Bound<'py, PyAny>,
    begin_key: Option<&Bound<'py, PyAny>>,
    end_key: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (bt, bp, bs) = (
        chunks::<Int64Type>(begin_ts, "begin_ts")?,
        chunks::<Int32Type>(begin_producer, "begin_producer")?,
        chunks::<Int64Type>(begin_seq, "begin_seq")?,
    );
    let (et, ep, es) = (
        chunks::<Int64Type>(end_ts, "end_ts")?,
        chunks::<Int32Type>(end_producer, "end_producer")?,
        chunks::<Int64Type>(end_seq, "end_seq")?,
    );
    let bk = begin_key.map(|k| chunks::<Int64Type>(k, "begin_key")).transpose()?;
    let ek = end_key.map(|k| chunks::<Int64Type>(k, "end_key")).transpose()?;
    let result = py.detach(|| {
        let b =
            spans::Chunked { ts: slices(&bt), producer: slices(&bp), seq: slices(&bs), key: bk.as_deref().map(slices) };
        let e =
            spans::Chunked { ts: slices(&et), producer: slices(&ep), seq: slices(&es), key: ek.as_deref().map(slices) };
        spans::pair_chunked(&b, &e)
    });
    let s = result.map_err(PyValueError::new_err)?;
    spans_dict(py, s)
}

fn spans_dict(py: Python<'_>, s: spans::Spans) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("closed", bools_to_pyarrow(py, &s.closed)?)?;
    out.set_item("end_row", vec_to_pyarrow::<Int64Type>(py, s.end_row)?)?;
    out.set_item("end_ts", vec_to_pyarrow::<Int64Type>(py, s.end_ts)?)?;
    out.set_item("depth", vec_to_pyarrow::<Int32Type>(py, s.depth)?)?;
    out.set_item("parent", vec_to_pyarrow::<Int64Type>(py, s.parent)?)?;
    out.set_item("self_ns", vec_to_pyarrow::<Int64Type>(py, s.self_ns)?)?;
    out.set_item("unmatched_end", vec_to_pyarrow::<Int64Type>(py, s.unmatched_end)?)?;
    out.set_item("open_at_end", vec_to_pyarrow::<Int64Type>(py, s.open_at_end)?)?;
    out.set_item("presorted", s.presorted)?;
    out.set_item("begins_ordered", s.begins_ordered)?;
    Ok(out)
}

/// Pairing fed batch by batch (`spans::Stream`): `push` begins and ends in their input
/// order as they are read, each call pairing (without the GIL) as far as both sides go;
/// `finish` returns what `pair_spans` returns, or None when the inputs were not both
/// sorted by ts with every producer's seq growing (pair them with `pair_spans` then).
#[pyclass(module = "tracehouse._core", name = "SpanPairer")]
struct SpanPairer {
    stream: Option<spans::Stream<spans::Batch>>,
}

#[pymethods]
impl SpanPairer {
    #[new]
    #[pyo3(signature = (keyed, begins_hint=0))]
    fn new(keyed: bool, begins_hint: usize) -> Self {
        SpanPairer { stream: Some(spans::Stream::new(keyed, begins_hint)) }
    }

    /// Adds begins (`is_end` false) or ends; False once the fast path is off.
    #[pyo3(signature = (is_end, ts, producer, seq, key=None))]
    fn push(
        &mut self,
        py: Python<'_>,
        is_end: bool,
        ts: &Bound<'_, PyAny>,
        producer: &Bound<'_, PyAny>,
        seq: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let (t, p, s) = (
            chunks::<Int64Type>(ts, "ts")?,
            chunks::<Int32Type>(producer, "producer")?,
            chunks::<Int64Type>(seq, "seq")?,
        );
        let k = key.map(|k| chunks::<Int64Type>(k, "key")).transpose()?;
        if p.len() != t.len() || s.len() != t.len() || k.as_ref().is_some_and(|k| k.len() != t.len()) {
            return Err(PyValueError::new_err("columns have different numbers of chunks"));
        }
        let batches: Vec<spans::Batch> = (0..t.len())
            .map(|i| spans::Batch {
                ts: t[i].values().clone(),
                producer: p[i].values().clone(),
                seq: s[i].values().clone(),
                key: k.as_ref().map(|k| k[i].values().clone()),
            })
            .collect();
        let stream = self.stream.as_mut().ok_or_else(|| PyValueError::new_err("the pairer is finished"))?;
        py.detach(|| {
            for b in batches {
                stream.push(is_end, b)?;
            }
            Ok::<_, String>(stream.ok())
        })
        .map_err(PyValueError::new_err)
    }

    /// The spans (a dict as `pair_spans` gives, plus the values of the unmatched ends:
    /// `unmatched_end_ts`, `_producer`, `_seq`, `_key`), None when the fast path was off.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let stream = self.stream.take().ok_or_else(|| PyValueError::new_err("the pairer is finished"))?;
        let Some((s, um)) = py.detach(|| stream.finish()) else {
            return Ok(None);
        };
        let out = spans_dict(py, s)?;
        out.set_item("unmatched_end_ts", vec_to_pyarrow::<Int64Type>(py, um.ts)?)?;
        out.set_item("unmatched_end_producer", vec_to_pyarrow::<Int32Type>(py, um.producer)?)?;
        out.set_item("unmatched_end_seq", vec_to_pyarrow::<Int64Type>(py, um.seq)?)?;
        out.set_item("unmatched_end_key", vec_to_pyarrow::<Int64Type>(py, um.key)?)?;
        Ok(Some(out))
    }
}

/// Depth, parent (row) and self time of spans given with their durations, nested by time.
#[pyfunction]
fn nest_spans<'py>(
    py: Python<'py>,
    ts: &Bound<'py, PyAny>,
    dur: &Bound<'py, PyAny>,
    producer: &Bound<'py, PyAny>,
    seq: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let (t, d, p, s) = (i64s(ts, "ts")?, i64s(dur, "dur")?, i32s(producer, "producer")?, i64s(seq, "seq")?);
    let n = py.detach(|| spans::nest(t.values(), d.values(), p.values(), s.values())).map_err(PyValueError::new_err)?;
    let out = PyDict::new(py);
    out.set_item("depth", vec_to_pyarrow::<Int32Type>(py, n.depth)?)?;
    out.set_item("parent", vec_to_pyarrow::<Int64Type>(py, n.parent)?)?;
    out.set_item("self_ns", vec_to_pyarrow::<Int64Type>(py, n.self_ns)?)?;
    Ok(out)
}

/// Calling-context tree of spans given their parent span, key and depth.
#[pyfunction]
fn call_tree<'py>(
    py: Python<'py>,
    parent: &Bound<'py, PyAny>,
    key: &Bound<'py, PyAny>,
    depth: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let (p, k, d) = (i64s(parent, "parent")?, i64s(key, "key")?, i32s(depth, "depth")?);
    let t = py.detach(|| calltree::build(p.values(), k.values(), d.values())).map_err(PyValueError::new_err)?;
    let out = PyDict::new(py);
    out.set_item("node_of", vec_to_pyarrow::<Int64Type>(py, t.node_of)?)?;
    out.set_item("parent", vec_to_pyarrow::<Int64Type>(py, t.parent)?)?;
    out.set_item("key", vec_to_pyarrow::<Int64Type>(py, t.key)?)?;
    out.set_item("depth", vec_to_pyarrow::<Int32Type>(py, t.depth)?)?;
    Ok(out)
}

/// Per call path, the spans of the span index rows `[starts[k], ends[k])` overlapping
/// `[lo, hi)`: dict of int64 arrays ids, ppos, calls, total, self_ns (`window::overlap_paths`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn window_paths<'py>(
    py: Python<'py>,
    node: &Bound<'py, PyAny>,
    ts: &Bound<'py, PyAny>,
    end_ts: &Bound<'py, PyAny>,
    parent: &Bound<'py, PyAny>,
    starts: &Bound<'py, PyAny>,
    ends: &Bound<'py, PyAny>,
    lo: i64,
    hi: i64,
) -> PyResult<Bound<'py, PyDict>> {
    let (nd, t, e, p) = (i32s(node, "node")?, i64s(ts, "ts")?, i64s(end_ts, "end_ts")?, i64s(parent, "parent")?);
    let (s, z) = (i64s(starts, "starts")?, i64s(ends, "ends")?);
    let got = py
        .detach(|| {
            window::overlap_paths(nd.values(), t.values(), e.values(), p.values(), s.values(), z.values(), lo, hi)
        })
        .map_err(PyValueError::new_err)?;
    let out = PyDict::new(py);
    out.set_item("ids", vec_to_pyarrow::<Int64Type>(py, got.ids)?)?;
    out.set_item("ppos", vec_to_pyarrow::<Int64Type>(py, got.ppos)?)?;
    out.set_item("calls", vec_to_pyarrow::<Int64Type>(py, got.calls)?)?;
    out.set_item("total", vec_to_pyarrow::<Int64Type>(py, got.total)?)?;
    out.set_item("self_ns", vec_to_pyarrow::<Int64Type>(py, got.self_ns)?)?;
    Ok(out)
}

/// `window::overlap_candidates`: dict of int64 arrays calls, total, self_ns (per candidate),
/// edges (rows), and ints spans, paths.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn window_candidates<'py>(
    py: Python<'py>,
    node: &Bound<'py, PyAny>,
    ts: &Bound<'py, PyAny>,
    end_ts: &Bound<'py, PyAny>,
    self_time: &Bound<'py, PyAny>,
    starts: &Bound<'py, PyAny>,
    ends: &Bound<'py, PyAny>,
    lo: i64,
    hi: i64,
    n_paths: usize,
    cand: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let (nd, t, e, st) = (i32s(node, "node")?, i64s(ts, "ts")?, i64s(end_ts, "end_ts")?, i64s(self_time, "self_time")?);
    let (s, z, c) = (i64s(starts, "starts")?, i64s(ends, "ends")?, i64s(cand, "cand")?);
    let got = py
        .detach(|| {
            window::overlap_candidates(
                nd.values(),
                t.values(),
                e.values(),
                st.values(),
                s.values(),
                z.values(),
                lo,
                hi,
                n_paths,
                c.values(),
            )
        })
        .map_err(PyValueError::new_err)?;
    let out = PyDict::new(py);
    out.set_item("calls", vec_to_pyarrow::<Int64Type>(py, got.calls)?)?;
    out.set_item("total", vec_to_pyarrow::<Int64Type>(py, got.total)?)?;
    out.set_item("self_ns", vec_to_pyarrow::<Int64Type>(py, got.self_ns)?)?;
    out.set_item("edges", vec_to_pyarrow::<Int64Type>(py, got.edges)?)?;
    out.set_item("spans", got.spans)?;
    out.set_item("paths", got.paths)?;
    Ok(out)
}

/// Per group, the spans of rows `[starts[k], ends[k])` that are closed (uint8 per row, None:
/// all): (count, total, self, longest) int64 arrays of `n_groups` (`window::start_groups`).
#[pyfunction]
#[pyo3(signature = (group, dur, self_time, closed, starts, ends, n_groups))]
#[allow(clippy::too_many_arguments)]
fn window_groups<'py>(
    py: Python<'py>,
    group: &Bound<'py, PyAny>,
    dur: &Bound<'py, PyAny>,
    self_time: &Bound<'py, PyAny>,
    closed: Option<&Bound<'py, PyAny>>,
    starts: &Bound<'py, PyAny>,
    ends: &Bound<'py, PyAny>,
    n_groups: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    let (g, d, st) = (i32s(group, "group")?, i64s(dur, "dur")?, i64s(self_time, "self_time")?);
    let c = closed.map(|c| primitive_from_pyarrow::<UInt8Type>(c, "closed")).transpose()?;
    let (s, z) = (i64s(starts, "starts")?, i64s(ends, "ends")?);
    let (count, total, selfs, longest) = py
        .detach(|| {
            window::start_groups(
                g.values(),
                d.values(),
                st.values(),
                c.as_ref().map(|c| c.values().as_ref()),
                s.values(),
                z.values(),
                n_groups,
            )
        })
        .map_err(PyValueError::new_err)?;
    PyTuple::new(
        py,
        [
            vec_to_pyarrow::<Int64Type>(py, count)?,
            vec_to_pyarrow::<Int64Type>(py, total)?,
            vec_to_pyarrow::<Int64Type>(py, selfs)?,
            vec_to_pyarrow::<Int64Type>(py, longest)?,
        ],
    )
}

fn groups_arg(groups: Option<&Bound<'_, PyAny>>, n: usize) -> PyResult<Option<Int64Array>> {
    let g = groups.map(|g| i64s(g, "groups")).transpose()?;
    if g.as_ref().is_some_and(|g| g.len() != n) {
        return Err(PyValueError::new_err("groups: expected one group per value"));
    }
    Ok(g)
}

/// bpftrace `hist(v, k)` counts: uint64 array of `n_groups` x `hist_log2_buckets(k)`.
#[pyfunction]
#[pyo3(signature = (values, k=0, groups=None, n_groups=1))]
fn hist_log2<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    k: u32,
    groups: Option<&Bound<'py, PyAny>>,
    n_groups: usize,
) -> PyResult<Bound<'py, PyAny>> {
    if k > 5 {
        return Err(PyValueError::new_err(format!("hist k {k}: expected 0..=5")));
    }
    let v = i64s(values, "values")?;
    let g = groups_arg(groups, v.len())?;
    let buckets = hist::log2_buckets(k);
    let out = py.detach(|| {
        hist::count(v.values(), g.as_ref().map(|g| g.values().as_ref()), n_groups, buckets, |x| hist::log2_index(x, k))
    });
    vec_to_pyarrow::<UInt64Type>(py, out)
}

/// Number of `hist(v, k)` buckets.
#[pyfunction]
fn hist_log2_buckets(k: u32) -> PyResult<usize> {
    if k > 5 {
        return Err(PyValueError::new_err(format!("hist k {k}: expected 0..=5")));
    }
    Ok(hist::log2_buckets(k))
}

/// bpftrace `lhist(v, min, max, step)` counts: uint64 array of `n_groups` x buckets.
#[pyfunction]
#[pyo3(signature = (values, min, max, step, groups=None, n_groups=1))]
fn hist_linear<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    min: i64,
    max: i64,
    step: i64,
    groups: Option<&Bound<'py, PyAny>>,
    n_groups: usize,
) -> PyResult<Bound<'py, PyAny>> {
    hist::check_linear(min, max, step).map_err(PyValueError::new_err)?;
    let v = i64s(values, "values")?;
    let g = groups_arg(groups, v.len())?;
    let buckets = hist::linear_buckets(min, max, step);
    let out = py.detach(|| {
        hist::count(v.values(), g.as_ref().map(|g| g.values().as_ref()), n_groups, buckets, |x| {
            hist::linear_index(x, min, max, step)
        })
    });
    vec_to_pyarrow::<UInt64Type>(py, out)
}

/// Events per (stream, bin): int64 array of streams x (len(edges) - 1); stream s is
/// `ts[starts[s]:ends[s]]`, sorted.
#[pyfunction]
fn binned_counts<'py>(
    py: Python<'py>,
    ts: &Bound<'py, PyAny>,
    starts: &Bound<'py, PyAny>,
    ends: &Bound<'py, PyAny>,
    edges: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let (t, s, n, e) = (i64s(ts, "ts")?, i64s(starts, "starts")?, i64s(ends, "ends")?, i64s(edges, "edges")?);
    let out = py
        .detach(|| density::binned_counts(t.values(), s.values(), n.values(), e.values()))
        .map_err(PyValueError::new_err)?;
    vec_to_pyarrow::<Int64Type>(py, out)
}

/// An int64 pyarrow array that may hold nulls (values, validity; validity empty = none).
fn i64s_nullable(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<(Int64Array, Vec<bool>)> {
    // SAFETY: as in `primitive_from_pyarrow`: imported through the C data interface, then validated.
    let data = unsafe { ArrayData::from_pyarrow_bound_unchecked(obj) }
        .map_err(|e| PyTypeError::new_err(format!("{what}: expected a pyarrow array ({e})")))?;
    if data.data_type() != &Int64Type::DATA_TYPE {
        return Err(PyTypeError::new_err(format!("{what}: expected int64 values, got {}", data.data_type())));
    }
    data.validate().map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
    let a = Int64Array::from(data);
    let valid = match a.nulls() {
        Some(n) if n.null_count() > 0 => n.iter().collect(),
        _ => Vec::new(),
    };
    Ok((a, valid))
}

fn packed_to_pyarrow<'py>(py: Python<'py>, e: packed::Encoded) -> PyResult<Bound<'py, PyTuple>> {
    let data = LargeBinaryArray::new(OffsetBuffer::new(ScalarBuffer::from(e.offsets)), Buffer::from_vec(e.data), None);
    let data = data.into_data().to_pyarrow(py)?;
    PyTuple::new(py, [data, vec_to_pyarrow::<Int64Type>(py, e.base)?, vec_to_pyarrow::<UInt8Type>(py, e.bits)?])
}

/// (data, base, bits): int64 `values` packed in blocks of 1,024 (`packed.rs`); nullable
/// reserves a code for null.
#[pyfunction]
#[pyo3(signature = (values, nullable=false))]
fn pack_int64<'py>(py: Python<'py>, values: &Bound<'py, PyAny>, nullable: bool) -> PyResult<Bound<'py, PyTuple>> {
    let (v, valid) = i64s_nullable(values, "values")?;
    let e = py.detach(|| packed::encode(v.values(), &valid, nullable)).map_err(PyValueError::new_err)?;
    packed_to_pyarrow(py, e)
}

/// A packed index column read in place: the arrays (typically memory-mapped) are kept
/// alive by this object; every method reads only the values it needs. With `rel`, the
/// stored values are `value - rel` and reads add `rel`'s.
#[pyclass(module = "tracehouse._core", name = "PackedColumn", frozen)]
struct PackedColumn {
    data: LargeBinaryArray,
    base: Int64Array,
    bits: UInt8Array,
    len: usize,
    nullable: bool,
    rel: Option<Py<PackedColumn>>,
}

impl PackedColumn {
    fn view(&self) -> packed::Packed<'_> {
        packed::Packed {
            data: self.data.values().as_slice(),
            offsets: self.data.value_offsets(),
            base: self.base.values(),
            bits: self.bits.values(),
            len: self.len,
            nullable: self.nullable,
        }
    }

    /// `f` over this column as read (the sum with `rel` when stored relative).
    fn with<R>(&self, f: &mut dyn FnMut(&dyn packed::Read) -> R) -> R {
        let own = self.view();
        match &self.rel {
            None => f(&own),
            Some(r) => r.get().with(&mut |b: &dyn packed::Read| f(&packed::Rel { diff: &own, base: b })),
        }
    }

    fn out<'py>(&self, py: Python<'py>, vals: Vec<i64>, valid: Vec<bool>) -> PyResult<Bound<'py, PyAny>> {
        let nulls = if valid.is_empty() { None } else { Some(NullBuffer::from(valid)) };
        Int64Array::new(ScalarBuffer::from(vals), nulls).into_data().to_pyarrow(py)
    }
}

/// Rows with a ts below `x` in the sorted ranges [r[i], r[width + i]) (a thread's streams
/// in a density index part; but `skip`): the rank the density index's ranked seq is stored
/// against.
fn thread_rank(ts: &dyn packed::Read, r: &[i64], width: usize, x: i64, skip: Option<(usize, usize)>) -> i64 {
    (0..width)
        .map(|i| (r[i] as usize, r[width + i] as usize))
        .filter(|&ab| Some(ab) != skip)
        .map(|(a, b)| (packed::search(ts, a, b, x, false) - a) as i64)
        .sum()
}

/// `args` as int64, checked to hold n rows of `per_row` values (one array: one conversion).
fn flat_args(args: &Bound<'_, PyAny>, n: usize, per_row: usize) -> PyResult<Int64Array> {
    let a = i64s(args, "args")?;
    if a.len() != n * per_row {
        return Err(PyValueError::new_err(format!("args: expected {n} x {per_row} values, got {}", a.len())));
    }
    Ok(a)
}

#[pymethods]
impl PackedColumn {
    #[new]
    #[pyo3(signature = (data, base, bits, len, nullable, rel=None))]
    fn new(
        data: &Bound<'_, PyAny>,
        base: &Bound<'_, PyAny>,
        bits: &Bound<'_, PyAny>,
        len: usize,
        nullable: bool,
        rel: Option<Py<PackedColumn>>,
    ) -> PyResult<Self> {
        // SAFETY: imported through the C data interface and validated before use.
        let d = unsafe { ArrayData::from_pyarrow_bound_unchecked(data) }
            .map_err(|e| PyTypeError::new_err(format!("data: expected a pyarrow array ({e})")))?;
        if d.data_type() != &DataType::LargeBinary {
            return Err(PyTypeError::new_err(format!("data: expected large_binary, got {}", d.data_type())));
        }
        d.validate().map_err(|e| PyValueError::new_err(format!("data: {e}")))?;
        if rel.as_ref().is_some_and(|r| r.get().len != len) {
            return Err(PyValueError::new_err("rel: a column of another length"));
        }
        let col = PackedColumn {
            data: LargeBinaryArray::from(d),
            base: i64s(base, "base")?,
            bits: primitive_from_pyarrow::<UInt8Type>(bits, "bits")?,
            len,
            nullable,
            rel,
        };
        let v = col.view();
        packed::Packed::new(v.data, v.offsets, v.base, v.bits, len, nullable).map_err(PyValueError::new_err)?;
        Ok(col)
    }

    fn __len__(&self) -> usize {
        self.len
    }

    /// Value i (None = null).
    fn get(&self, i: usize) -> PyResult<Option<i64>> {
        if i >= self.len {
            return Err(PyValueError::new_err(format!("row {i} beyond {} values", self.len)));
        }
        Ok(self.with(&mut |c| c.get(i)))
    }

    /// First row in [lo, hi) (a range sorted ascending) whose value is >= v (right: > v).
    #[pyo3(signature = (lo, hi, v, right=false))]
    fn search(&self, lo: usize, hi: usize, v: i64, right: bool) -> usize {
        let hi = hi.min(self.len);
        self.with(&mut |c| packed::search(c, lo.min(hi), hi, v, right))
    }

    /// `statistics.seq_at` over one density index part, in one call (this column is its
    /// `ts`, `seq` its stored seq). `args` (one int64 array: one conversion) holds n values,
    /// then per value a row of 2 + 2 * width: the [lo, hi) of its stream (sorted by ts), then
    /// its thread's stream lows and highs (width > 0: the part's seq is ranked). For each
    /// value: the smallest stored seq among the stream's rows with exactly that ts, plus
    /// its rank among the thread's rows (`thread_rank`); i64::MAX when there are none.
    /// Before (numpy around a search per needle and stream, and a take): ~0.3 ms for a few
    /// rows at load 5; now ~0.01 ms a call plus ~4 us a row (the searches).
    fn seq_lookup<'py>(
        &self,
        py: Python<'py>,
        seq: &Bound<'py, PackedColumn>,
        args: &Bound<'py, PyAny>,
        n: usize,
        width: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let w = 2 + 2 * width;
        let a = flat_args(args, n, 1 + w)?;
        let (v, rows) = a.values().split_at(n);
        let seq = seq.get();
        if rows.chunks(w).any(|r| {
            let bad = |x: i64, y: i64, len: usize| x < 0 || y < x || y as usize > len;
            bad(r[0], r[1], self.len.min(seq.len)) || (0..width).any(|i| bad(r[2 + i], r[2 + width + i], self.len))
        }) {
            return Err(PyValueError::new_err("ranges must lie inside the columns"));
        }
        let out: Vec<i64> = py.detach(|| {
            self.with(&mut |ts| {
                seq.with(&mut |sq| {
                    (0..n)
                        .map(|k| {
                            let r = &rows[k * w..(k + 1) * w];
                            let (lo, hi, x) = (r[0] as usize, r[1] as usize, v[k]);
                            let mut best = i64::MAX;
                            let first = packed::search(ts, lo, hi, x, false);
                            let mut j = first;
                            while j < hi && ts.get(j) == Some(x) {
                                if let Some(s) = sq.get(j) {
                                    best = best.min(s);
                                }
                                j += 1;
                            }
                            if best == i64::MAX || width == 0 {
                                return best;
                            }
                            // The rank: the first match's place in its own stream (no
                            // second search), plus the thread's other streams' rows below x.
                            let others = thread_rank(ts, &r[2..], width, x, Some((lo, hi)));
                            best.wrapping_add((first - lo) as i64 + others)
                        })
                        .collect()
                })
            })
        });
        vec_to_pyarrow::<Int64Type>(py, out)
    }

    /// For each of n values: its rank among its thread's rows (`thread_rank`). `args`: the
    /// n values, then per value a row of its thread's `width` stream lows and as many highs.
    fn rank_many<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyAny>,
        n: usize,
        width: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let a = flat_args(args, n, 1 + 2 * width)?;
        let (v, rows) = a.values().split_at(n);
        if rows
            .chunks(2 * width.max(1))
            .any(|r| (0..width).any(|i| r[i] < 0 || r[width + i] < r[i] || r[width + i] as usize > self.len))
        {
            return Err(PyValueError::new_err("ranges must lie inside the column"));
        }
        let out: Vec<i64> = py.detach(|| {
            self.with(&mut |ts| {
                (0..n).map(|k| thread_rank(ts, &rows[k * 2 * width..(k + 1) * 2 * width], width, v[k], None)).collect()
            })
        });
        vec_to_pyarrow::<Int64Type>(py, out)
    }

    /// The row holding `v` in one of the sorted runs [starts[k], ends[k]) (the span index's
    /// span_id, sorted within each (thread, depth)), or -1: one binary search per run.
    fn search_runs(&self, starts: &Bound<'_, PyAny>, ends: &Bound<'_, PyAny>, v: i64) -> PyResult<i64> {
        let (s, e) = (i64s(starts, "starts")?, i64s(ends, "ends")?);
        if s.len() != e.len()
            || s.values().iter().zip(e.values()).any(|(&a, &b)| a < 0 || b < a || b as usize > self.len)
        {
            return Err(PyValueError::new_err("runs must lie inside the column"));
        }
        Ok(self.with(&mut |c| {
            for (&a, &b) in s.values().iter().zip(e.values()) {
                let r = packed::search(c, a as usize, b as usize, v, false);
                if r < b as usize && c.get(r) == Some(v) {
                    return r as i64;
                }
            }
            -1
        }))
    }

    /// Values [a, b) as an int64 pyarrow array.
    fn decode<'py>(&self, py: Python<'py>, a: usize, b: usize) -> PyResult<Bound<'py, PyAny>> {
        if b > self.len {
            return Err(PyValueError::new_err(format!("end {b} beyond {} values", self.len)));
        }
        let a = a.min(b);
        let (vals, valid) = py.detach(|| {
            self.with(&mut |c| {
                let (mut vals, mut valid) = (Vec::with_capacity(b - a), Vec::new());
                c.decode(a, b, &mut vals, &mut valid);
                (vals, valid)
            })
        });
        self.out(py, vals, valid)
    }

    /// The values at int64 `rows` as an int64 pyarrow array.
    fn take<'py>(&self, py: Python<'py>, rows: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let r = i64s(rows, "rows")?;
        if r.values().iter().any(|&i| i < 0 || i as usize >= self.len) {
            return Err(PyValueError::new_err(format!("rows: a row outside 0..{}", self.len)));
        }
        let (vals, valid) = py.detach(|| {
            self.with(&mut |c| {
                let nullable = c.nullable();
                let mut vals = Vec::with_capacity(r.len());
                let mut valid = Vec::with_capacity(if nullable { r.len() } else { 0 });
                for &i in r.values().iter() {
                    let v = c.get(i as usize);
                    if nullable {
                        valid.push(v.is_some());
                    }
                    vals.push(v.unwrap_or(0));
                }
                (vals, valid)
            })
        });
        self.out(py, vals, valid)
    }

    /// `binned_counts` over this (sorted per stream) column.
    fn binned_counts<'py>(
        &self,
        py: Python<'py>,
        starts: &Bound<'py, PyAny>,
        ends: &Bound<'py, PyAny>,
        edges: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (s, n, e) = (i64s(starts, "starts")?, i64s(ends, "ends")?, i64s(edges, "edges")?);
        let out = py
            .detach(|| self.with(&mut |c| packed::binned_counts(c, s.values(), n.values(), e.values())))
            .map_err(PyValueError::new_err)?;
        vec_to_pyarrow::<Int64Type>(py, out)
    }
}

/// Adds the analysis functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(stable_order, m)?)?;
    m.add_function(wrap_pyfunction!(running_max_by_key, m)?)?;
    m.add_function(wrap_pyfunction!(pair_spans, m)?)?;
    m.add_class::<SpanPairer>()?;
    m.add_function(wrap_pyfunction!(nest_spans, m)?)?;
    m.add_function(wrap_pyfunction!(call_tree, m)?)?;
    m.add_function(wrap_pyfunction!(window_paths, m)?)?;
    m.add_function(wrap_pyfunction!(window_groups, m)?)?;
    m.add_function(wrap_pyfunction!(window_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(hist_log2, m)?)?;
    m.add_function(wrap_pyfunction!(hist_log2_buckets, m)?)?;
    m.add_function(wrap_pyfunction!(hist_linear, m)?)?;
    m.add_function(wrap_pyfunction!(binned_counts, m)?)?;
    m.add_function(wrap_pyfunction!(pack_int64, m)?)?;
    m.add_class::<PackedColumn>()?;
    Ok(())
}
