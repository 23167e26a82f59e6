//! The one driver of the chunk parsers from Python: feed a chunk, or end the input, with the
//! GIL released, and hand the filled batches back as (event type, `pyarrow.RecordBatch`)
//! pairs, each distinct schema converted once; and the producer row every parser reports
//! its producers as. `NativeParser` (`parser.rs`) uses it for every format's parser;
//! strace's glue has its own (several sources per parser, read-ahead sizing).

use std::collections::HashMap;

use arrow_array::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::arrow::{batch_to_pyarrow, schema_to_pyarrow};
use crate::formats::parser::{Attr, ProducerRow};
use crate::formats::ChunkParser;

/// Batches as a list of (event type, pyarrow.RecordBatch), converting each distinct
/// schema once.
pub fn batches_to_py<'py>(
    py: Python<'py>,
    batches: Vec<(String, RecordBatch)>,
    cache: &mut HashMap<(String, usize), Py<PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (name, b) in batches {
        let key = (name.clone(), b.num_columns());
        let schema = match cache.get(&key) {
            Some(s) => s.bind(py).clone(),
            None => {
                let s = schema_to_pyarrow(py, &b.schema())?;
                cache.insert(key, s.clone().unbind());
                s
            }
        };
        out.append((name, batch_to_pyarrow(py, b, &schema)?))?;
    }
    Ok(out)
}

/// Feeds `chunk` to `parser` without the GIL; returns the batches it filled, for Python.
pub fn feed_parser<'py, P: ChunkParser + ?Sized>(
    py: Python<'py>,
    parser: &mut P,
    chunk: &[u8],
    cache: &mut HashMap<(String, usize), Py<PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let b = py.detach(|| {
        parser.feed(chunk);
        parser.take_batches(false)
    });
    batches_to_py(py, b, cache)
}

/// Every row `parser` holds as batches now, without ending its input (an import from a
/// pipe commits what has arrived), for Python.
pub fn drain_parser<'py, P: ChunkParser + ?Sized>(
    py: Python<'py>,
    parser: &mut P,
    cache: &mut HashMap<(String, usize), Py<PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let b = py.detach(|| parser.take_batches(true));
    batches_to_py(py, b, cache)
}

/// Ends `parser`'s input without the GIL; returns every remaining batch, for Python.
pub fn finish_parser<'py, P: ChunkParser + ?Sized>(
    py: Python<'py>,
    parser: &mut P,
    cache: &mut HashMap<(String, usize), Py<PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let b = py.detach(|| {
        parser.finish();
        parser.take_batches(true)
    });
    batches_to_py(py, b, cache)
}

/// One producer row as `Store.add_producers` takes it: {id, parent, kind, name, attrs}.
pub fn producer_row<'py>(
    py: Python<'py>,
    id: impl IntoPyObject<'py>,
    parent: impl IntoPyObject<'py>,
    kind: &str,
    name: &str,
    attrs: Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", id)?;
    d.set_item("parent", parent)?;
    d.set_item("kind", kind)?;
    d.set_item("name", name)?;
    d.set_item("attrs", attrs)?;
    Ok(d)
}

/// Producers as the list of dicts `Store.add_producers` takes.
pub fn producer_rows<'py>(py: Python<'py>, rows: Vec<ProducerRow>) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for p in rows {
        let attrs = PyDict::new(py);
        for (k, v) in p.attrs {
            match v {
                Attr::Int(i) => attrs.set_item(k, i)?,
                Attr::Str(s) => attrs.set_item(k, s)?,
            }
        }
        out.append(producer_row(py, p.id, p.parent, &p.kind, &p.name, attrs)?)?;
    }
    Ok(out)
}
