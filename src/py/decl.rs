//! Python face of the event-type declarations (`formats/decl.rs`): `_core.format_declarations()`.
//!
//! Owns their conversion to plain Python data; `python/tracehouse/formats/declared.py` turns it
//! into `schema.EventType`s, so each format's event types are written once, in Rust.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::formats::decl::{Param, FORMATS};

type ColumnRow = (&'static str, &'static str, &'static str, &'static str);

fn columns(params: &[Param]) -> Vec<ColumnRow> {
    params.iter().map(|p| (p.name, p.ptype.name(), p.unit, p.doc)).collect()
}

/// {format: {"description": str, "event_types": [(name, kind, doc, [(column, type, unit,
/// doc), ...]), ...], "results": {kind: [(column, type, unit, doc), ...]}}} of every format
/// declared in Rust, parameters only (the common columns are `schema.py`'s).
#[pyfunction]
fn format_declarations(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for f in FORMATS {
        let d = PyDict::new(py);
        d.set_item("description", f.description)?;
        let types: Vec<_> = f.event_types.iter().map(|e| (e.name, e.kind, e.doc, columns(e.params))).collect();
        d.set_item("event_types", types)?;
        let results = PyDict::new(py);
        for r in f.results {
            results.set_item(r.name, columns(r.params))?;
        }
        d.set_item("results", results)?;
        out.set_item(f.name, d)?;
    }
    Ok(out)
}

/// Adds the declarations to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(format_declarations, m)?)?;
    Ok(())
}
