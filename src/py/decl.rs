//! Python face of the format declarations (`formats/decl.rs`, `formats/mod.rs` `FORMATS`):
//! `_core.format_declarations()` and `_core.sniff_formats(head)`.
//!
//! Owns their conversion to plain Python data; `python/tracehouse/formats/declared.py` turns it
//! into `schema.EventType`s and the registry's format table, so each format is declared once,
//! in Rust.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::formats::decl::{FormatDecl, Param, Profile};
use crate::formats::parser::COMMON_OPTIONS;
use crate::formats::{sniff, FORMATS};

type ColumnRow = (&'static str, &'static str, &'static str, &'static str);

fn columns(params: &[Param]) -> Vec<ColumnRow> {
    params.iter().map(|p| (p.name, p.ptype.name(), p.unit, p.doc)).collect()
}

fn profile<'py>(py: Python<'py>, p: &Profile) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if let Some(s) = p.spans {
        let e = PyDict::new(py);
        e.set_item("begin", s.begin)?;
        e.set_item("end", s.end)?;
        e.set_item("key", s.key)?;
        e.set_item("name", s.name)?;
        d.set_item("spans", e)?;
    }
    if let Some(o) = p.objects {
        let e = PyDict::new(py);
        e.set_item("type", o.event_type)?;
        e.set_item("object", o.object)?;
        e.set_item("field", o.field)?;
        e.set_item("value", o.value)?;
        d.set_item("objects", e)?;
    }
    if let Some(l) = p.locals {
        let e = PyDict::new(py);
        e.set_item("type", l.event_type)?;
        e.set_item("frame", l.frame)?;
        e.set_item("var", l.var)?;
        e.set_item("value", l.value)?;
        d.set_item("locals", e)?;
    }
    if let Some(s) = p.samples {
        let e = PyDict::new(py);
        e.set_item("type", s.event_type)?;
        e.set_item("stack", s.stack)?;
        e.set_item("weight", s.weight)?;
        d.set_item("samples", e)?;
    }
    d.set_item("labels", p.labels.to_vec())?;
    Ok(d)
}

fn format<'py>(py: Python<'py>, f: &FormatDecl) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("description", f.description)?;
    let types: Vec<_> = f.event_types.iter().map(|e| (e.name, e.kind, e.doc, columns(e.params))).collect();
    d.set_item("event_types", types)?;
    let results = PyDict::new(py);
    for r in f.results {
        results.set_item(r.name, columns(r.params))?;
    }
    d.set_item("results", results)?;
    d.set_item("priority", f.priority)?;
    d.set_item("sniffs", f.sniff.is_some())?;
    let options: Option<Vec<_>> =
        f.parser.map(|p| COMMON_OPTIONS.iter().chain(p.options).map(|o| (o.name, o.kind.name(), o.doc)).collect());
    d.set_item("parser_options", options)?;
    d.set_item("profile", profile(py, &f.profile)?)?;
    d.set_item("examples", f.examples.to_vec())?;
    d.set_item("views", f.views.to_vec())?;
    Ok(d)
}

/// {format: {"description", "event_types": [(name, kind, doc, [(column, type, unit, doc),
/// ...]), ...], "results": {kind: [(column, type, unit, doc), ...]}, "priority", "sniffs",
/// "parser_options": [(name, type, doc)] or None, "profile": {...}, "examples": [(title,
/// sql)], "views": [(name, sql)]}} of every format declared in Rust, parameters only (the common columns are
/// `schema.py`'s).
#[pyfunction]
fn format_declarations(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for f in FORMATS {
        out.set_item(f.name, format(py, f)?)?;
    }
    Ok(out)
}

/// The declared formats whose sniffer recognises `head` (an input's first bytes, gunzipped),
/// highest priority first.
#[pyfunction]
fn sniff_formats(head: &[u8]) -> Vec<&'static str> {
    sniff(head)
}

/// Adds the declarations to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(format_declarations, m)?)?;
    m.add_function(wrap_pyfunction!(sniff_formats, m)?)?;
    Ok(())
}
