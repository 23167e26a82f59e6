//! Python face of the IO replayer: `_core.ReplayPlan` and `_core.ReplayRun`.
//!
//! Owns the conversion of the stored `syscall` batches (pyarrow, through the C data
//! interface) into plan rows, and of the run's records into pyarrow arrays. Planning,
//! preparing and waiting run with the GIL released; the workers never touch Python.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::types::{Int32Type, Int64Type, Int8Type};
use arrow_array::{Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_pyarrow::{FromPyArrow, ToPyArrow};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::arrow::vec_to_pyarrow;
use crate::replay::paths::Mapper;
use crate::replay::plan::{Plan, PlanBuilder, Prep, Row, KIND_NAMES, NONE, SKIP_NAMES};
use crate::replay::run::{self, RunConfig, Runner, Timing};

/// The columns of the stored `syscall` table the planner reads.
struct Cols<'a> {
    ts: &'a Int64Array,
    dur: &'a Int64Array,
    producer: &'a Int32Array,
    name: &'a StringArray,
    fd: &'a Int64Array,
    path: &'a StringArray,
    path2: &'a StringArray,
    pos: &'a Int64Array,
    size: &'a Int64Array,
    ret: &'a Int64Array,
    errno: &'a StringArray,
    flags: &'a StringArray,
    args: &'a StringArray,
    fd2: &'a Int64Array,
    pos2: &'a Int64Array,
    target: &'a StringArray,
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str, ty: &str) -> PyResult<&'a T> {
    let c =
        b.column_by_name(name).ok_or_else(|| PyValueError::new_err(format!("syscall batch: no column {name:?}")))?;
    c.as_any().downcast_ref::<T>().ok_or_else(|| {
        PyValueError::new_err(format!("syscall batch: column {name:?} is {}, expected {ty}", c.data_type()))
    })
}

impl<'a> Cols<'a> {
    fn of(b: &'a RecordBatch) -> PyResult<Self> {
        Ok(Cols {
            ts: col(b, "ts", "int64")?,
            dur: col(b, "dur", "int64")?,
            producer: col(b, "producer", "int32")?,
            name: col(b, "name", "string")?,
            fd: col(b, "fd", "int64")?,
            path: col(b, "path", "string")?,
            path2: col(b, "path2", "string")?,
            pos: col(b, "pos", "int64")?,
            size: col(b, "size", "int64")?,
            ret: col(b, "ret", "int64")?,
            errno: col(b, "errno", "string")?,
            flags: col(b, "flags", "string")?,
            args: col(b, "args", "string")?,
            fd2: col(b, "fd2", "int64")?,
            pos2: col(b, "pos2", "int64")?,
            target: col(b, "target", "string")?,
        })
    }

    fn row(&self, i: usize) -> Row<'a> {
        let int = |a: &Int64Array| if a.is_null(i) { None } else { Some(a.value(i)) };
        let text = |a: &'a StringArray| if a.is_null(i) { None } else { Some(a.value(i)) };
        Row {
            ts: self.ts.value(i),
            dur: if self.dur.is_null(i) { 0 } else { self.dur.value(i) },
            producer: self.producer.value(i),
            name: text(self.name).unwrap_or(""),
            fd: int(self.fd),
            path: text(self.path).map(str::as_bytes),
            path2: text(self.path2).map(str::as_bytes),
            pos: int(self.pos),
            size: int(self.size),
            ret: int(self.ret),
            errno: text(self.errno),
            flags: text(self.flags),
            args: text(self.args),
            fd2: int(self.fd2),
            pos2: int(self.pos2),
            target: text(self.target).map(str::as_bytes),
        }
    }
}

/// A replay plan built from a strace trace (see `tracehouse/_core.pyi`).
#[pyclass(module = "tracehouse._core", name = "ReplayPlan", frozen)]
pub struct PyReplayPlan {
    plan: Arc<Plan>,
}

fn os_err(what: &str, e: i32) -> String {
    format!("{what}: {}", std::io::Error::from_raw_os_error(e))
}

#[pymethods]
impl PyReplayPlan {
    /// Builds the plan from `batches` (the `syscall` table in `ts` order).
    #[new]
    #[pyo3(signature = (batches, process_of, parent_of, maps=Vec::new(), only=Vec::new()))]
    fn new(
        py: Python<'_>,
        batches: &Bound<'_, PyList>,
        process_of: HashMap<i32, i32>,
        parent_of: HashMap<i32, i32>,
        maps: Vec<(String, String)>,
        only: Vec<String>,
    ) -> PyResult<Self> {
        let maps: Vec<_> = maps.into_iter().map(|(a, b)| (a.into_bytes(), b.into_bytes())).collect();
        let only: Vec<_> = only.into_iter().map(String::into_bytes).collect();
        let mapper = Mapper::new(&maps, &only).map_err(PyValueError::new_err)?;
        let rbs: Vec<RecordBatch> =
            batches.iter().map(|b| RecordBatch::from_pyarrow_bound(&b)).collect::<PyResult<_>>()?;
        let total: usize = rbs.iter().map(|b| b.num_rows()).sum();
        if total > u32::MAX as usize - 1 {
            return Err(PyValueError::new_err("more than 2^32 - 2 syscalls"));
        }
        let cols = rbs.iter().map(Cols::of).collect::<PyResult<Vec<_>>>()?;
        let plan = py.detach(move || {
            let mut b = PlanBuilder::new(mapper, process_of, parent_of);
            let mut i = 0u32;
            for c in &cols {
                for r in 0..c.ts.len() {
                    b.push(i, &c.row(r));
                    i += 1;
                }
            }
            b.finish()
        });
        Ok(PyReplayPlan { plan: Arc::new(plan) })
    }

    /// Counts: rows, ops, threads, slots, dependencies, span and start (ns), ops by kind,
    /// skips by reason, preparation.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = &self.plan;
        let d = PyDict::new(py);
        d.set_item("rows", p.rows)?;
        d.set_item("ops", p.ops())?;
        d.set_item("threads", p.threads.len())?;
        d.set_item("slots", p.slots)?;
        d.set_item("dependencies", p.deps.len())?;
        d.set_item("span_ns", p.span)?;
        d.set_item("t_start", p.t_start)?;
        let mut kinds: HashMap<&str, u64> = HashMap::new();
        for t in &p.threads {
            for o in &t.ops {
                *kinds.entry(KIND_NAMES[o.kind as usize]).or_default() += 1;
            }
        }
        d.set_item("ops_by_kind", kinds)?;
        let mut skips: HashMap<&str, u64> = HashMap::new();
        for (_, why) in &p.skips {
            *skips.entry(SKIP_NAMES[*why as usize]).or_default() += 1;
        }
        d.set_item("skipped_by_reason", skips)?;
        let (mut dirs, mut files, mut bytes, mut absent) = (0u64, 0u64, 0u64, 0u64);
        for pr in &p.prep {
            match pr {
                Prep::Dir(_) => dirs += 1,
                Prep::File(_, s) => {
                    files += 1;
                    bytes += s;
                }
                Prep::Absent(_) => absent += 1,
            }
        }
        let prep = PyDict::new(py);
        prep.set_item("dirs", dirs)?;
        prep.set_item("files", files)?;
        prep.set_item("bytes", bytes)?;
        prep.set_item("absent", absent)?;
        d.set_item("prepare", prep)?;
        Ok(d)
    }

    /// Producer id of each plan thread.
    fn threads(&self) -> Vec<i32> {
        self.plan.threads.iter().map(|t| t.producer).collect()
    }

    /// Mapped paths (relative to a copy's root), by path id.
    fn paths(&self) -> Vec<String> {
        self.plan.paths.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect()
    }

    /// What the target gets before the run: [(what, path, size)], what = dir | file | absent.
    fn prep(&self) -> Vec<(&'static str, String, u64)> {
        let path = |i: u32| String::from_utf8_lossy(&self.plan.paths[i as usize]).into_owned();
        self.plan
            .prep
            .iter()
            .map(|p| match *p {
                Prep::Dir(i) => ("dir", path(i), 0),
                Prep::File(i, s) => ("file", path(i), s),
                Prep::Absent(i) => ("absent", path(i), 0),
            })
            .collect()
    }

    /// The ops, one row each in (thread, index) order: thread, src (input row), kind
    /// (index into `KIND_NAMES`), path (path id, -1 when none), at (planned offset, ns),
    /// deps (number of dependencies).
    fn op_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let n = self.plan.ops();
        let (mut thread, mut src, mut kind, mut path, mut at, mut deps) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for (ti, t) in self.plan.threads.iter().enumerate() {
            for o in &t.ops {
                thread.push(ti as i32);
                src.push(o.src as i64);
                kind.push(o.kind as i8);
                path.push(if o.path == NONE { -1 } else { o.path as i32 });
                at.push(o.at);
                deps.push(o.ndeps as i32);
            }
        }
        let d = PyDict::new(py);
        d.set_item("thread", vec_to_pyarrow::<Int32Type>(py, thread)?)?;
        d.set_item("src", vec_to_pyarrow::<Int64Type>(py, src)?)?;
        d.set_item("kind", vec_to_pyarrow::<Int8Type>(py, kind)?)?;
        d.set_item("path", vec_to_pyarrow::<Int32Type>(py, path)?)?;
        d.set_item("at", vec_to_pyarrow::<Int64Type>(py, at)?)?;
        d.set_item("deps", vec_to_pyarrow::<Int32Type>(py, deps)?)?;
        Ok(d)
    }

    /// The skipped rows: src (input row) and reason (index into `SKIP_NAMES`).
    fn skip_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let src: Vec<i64> = self.plan.skips.iter().map(|s| s.0 as i64).collect();
        let why: Vec<i8> = self.plan.skips.iter().map(|s| s.1 as i8).collect();
        let d = PyDict::new(py);
        d.set_item("src", vec_to_pyarrow::<Int64Type>(py, src)?)?;
        d.set_item("reason", vec_to_pyarrow::<Int8Type>(py, why)?)?;
        Ok(d)
    }

    /// Prepares the root of each copy (`root` for one, `root/copy-<k>` for several):
    /// directories, files of the implied sizes (real data), removals. Returns one dict
    /// per copy: dirs, files, kept, bytes, removed, errors [(path, message)].
    #[pyo3(signature = (root, copies=1, cold=false))]
    fn prepare<'py>(&self, py: Python<'py>, root: PathBuf, copies: usize, cold: bool) -> PyResult<Bound<'py, PyList>> {
        if copies == 0 {
            return Err(PyValueError::new_err("copies: expected at least 1"));
        }
        let plan = self.plan.clone();
        let out = py.detach(move || -> Result<_, String> {
            let roots = run::copy_roots(&root, copies)?;
            Ok(run::prepare(&plan, &roots, cold))
        });
        let out = out.map_err(PyOSError::new_err)?;
        let list = PyList::empty(py);
        for p in out {
            let d = PyDict::new(py);
            d.set_item("dirs", p.dirs)?;
            d.set_item("files", p.files)?;
            d.set_item("kept", p.kept)?;
            d.set_item("bytes", p.bytes)?;
            d.set_item("removed", p.removed)?;
            d.set_item("unlinked", p.unlinked)?;
            // The target filesystem is full (or a quota, or the file-size limit).
            d.set_item("full", p.errors.iter().any(|(_, e)| run::is_full(*e)))?;
            let errs: Vec<(String, String)> = p
                .errors
                .iter()
                .map(|(path, e)| (String::from_utf8_lossy(path).into_owned(), os_err("prepare", *e)))
                .collect();
            d.set_item("errors", errs)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Starts the replay: timing "original" | "think" | "asap" | "relative", speed factor,
    /// spin window (None: calibrated), lead time before the schedule's zero.
    #[pyo3(signature = (root, copies=1, timing="original", speed=1.0, spin_ns=None, lead_ns=20_000_000, realtime=false))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        root: PathBuf,
        copies: usize,
        timing: &str,
        speed: f64,
        spin_ns: Option<i64>,
        lead_ns: i64,
        realtime: bool,
    ) -> PyResult<PyReplayRun> {
        let timing = match timing {
            "original" => Timing::Original(speed),
            "think" => Timing::Think(speed),
            "asap" => Timing::Asap,
            "relative" => Timing::Relative,
            t => {
                return Err(PyValueError::new_err(format!("timing {t:?}: expected original | think | asap | relative")))
            }
        };
        if copies == 0 {
            return Err(PyValueError::new_err("copies: expected at least 1"));
        }
        let plan = self.plan.clone();
        let cfg = RunConfig { copies, timing, spin_ns, lead_ns, realtime };
        let runner = py.detach(move || {
            let roots = run::copy_roots(&root, copies)?;
            Runner::start(plan.clone(), roots, &cfg)
        });
        let runner = runner.map_err(PyValueError::new_err)?;
        Ok(PyReplayRun { runner: std::sync::Mutex::new(Some(runner)), plan: self.plan.clone() })
    }
}

/// A replay running in its own threads (see `tracehouse/_core.pyi`).
#[pyclass(module = "tracehouse._core", name = "ReplayRun", frozen)]
pub struct PyReplayRun {
    runner: std::sync::Mutex<Option<Runner>>,
    plan: Arc<Plan>,
}

impl PyReplayRun {
    fn with<T>(&self, f: impl FnOnce(&Runner) -> T) -> PyResult<T> {
        let g = self.runner.lock().map_err(|_| PyRuntimeError::new_err("replay run poisoned"))?;
        g.as_ref().map(f).ok_or_else(|| PyRuntimeError::new_err("the replay's result was already taken"))
    }
}

#[pymethods]
impl PyReplayRun {
    /// Calls completed so far (all threads, all copies).
    fn done_ops(&self) -> PyResult<u64> {
        self.with(|r| r.done_ops())
    }

    /// Waits up to `timeout` seconds for the run to end; True when it has.
    fn wait(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let deadline = Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
        py.detach(|| loop {
            match self.with(|r| r.finished()) {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(e) => return Err(e),
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(2));
        })
    }

    /// Asks every worker to stop after its current call.
    fn cancel(&self) -> PyResult<()> {
        self.with(|r| r.cancel())
    }

    /// Clock facts: t0 (monotonic ns), wall0 (epoch ns at t0), spin_ns, late_p50_ns,
    /// late_p90_ns (calibration), slack_ok.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let i = self.with(|r| r.info)?;
        let d = PyDict::new(py);
        d.set_item("t0", i.t0)?;
        d.set_item("wall0", i.wall0)?;
        d.set_item("spin_ns", i.spin)?;
        d.set_item("late_p50_ns", i.late_p50)?;
        d.set_item("late_p90_ns", i.late_p90)?;
        d.set_item("slack_ok", i.slack_ok)?;
        d.set_item("realtime", self.with(|r| r.realtime())?)?;
        Ok(d)
    }

    /// Joins the workers and returns the records as pyarrow arrays, one row per replayed
    /// call in (copy, thread, index) order: copy, thread, op (index into the plan's
    /// `op_columns`), planned (epoch ns; null for asap), issue (epoch ns), latency (ns),
    /// lag (issue minus planned, ns; null for asap), ret, errno (0 = ok), wait (ns on
    /// dependencies), ready (the worker was ready before the planned time); and `cancelled`.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let runner = self
            .runner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("replay run poisoned"))?
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("the replay's result was already taken"))?;
        let info = runner.info;
        let cancelled = runner.cancelled();
        let realtime = runner.realtime();
        let aborted = runner.aborted();
        let recs = py.detach(move || runner.join());
        let mut offsets = Vec::with_capacity(self.plan.threads.len());
        let mut acc = 0i64;
        for t in &self.plan.threads {
            offsets.push(acc);
            acc += t.ops.len() as i64;
        }
        let n: usize = recs.iter().flatten().map(Vec::len).sum();
        let mut copy = Vec::with_capacity(n);
        let mut thread = Vec::with_capacity(n);
        let mut op = Vec::with_capacity(n);
        let mut planned: Vec<Option<i64>> = Vec::with_capacity(n);
        let mut issue = Vec::with_capacity(n);
        let mut latency = Vec::with_capacity(n);
        let mut lag: Vec<Option<i64>> = Vec::with_capacity(n);
        let mut ret = Vec::with_capacity(n);
        let mut errno = Vec::with_capacity(n);
        let mut wait = Vec::with_capacity(n);
        let mut ready = Vec::with_capacity(n);
        let wall = |t: i64| info.wall0 + (t - info.t0);
        for (c, threads) in recs.iter().enumerate() {
            for (t, rs) in threads.iter().enumerate() {
                for (i, r) in rs.iter().enumerate() {
                    copy.push(c as i32);
                    thread.push(t as i32);
                    op.push(offsets[t] + i as i64);
                    let p = (r.planned != i64::MIN).then_some(r.planned);
                    planned.push(p.map(wall));
                    lag.push(p.map(|p| r.issue - p));
                    issue.push(wall(r.issue));
                    latency.push(r.done - r.issue);
                    ret.push(r.ret);
                    errno.push(r.errno);
                    wait.push(r.wait);
                    ready.push(r.ready);
                }
            }
        }
        let d = PyDict::new(py);
        d.set_item("copy", vec_to_pyarrow::<Int32Type>(py, copy)?)?;
        d.set_item("thread", vec_to_pyarrow::<Int32Type>(py, thread)?)?;
        d.set_item("op", vec_to_pyarrow::<Int64Type>(py, op)?)?;
        d.set_item("planned", Int64Array::from(planned).into_data().to_pyarrow(py)?)?;
        d.set_item("issue", vec_to_pyarrow::<Int64Type>(py, issue)?)?;
        d.set_item("latency", vec_to_pyarrow::<Int64Type>(py, latency)?)?;
        d.set_item("lag", Int64Array::from(lag).into_data().to_pyarrow(py)?)?;
        d.set_item("ret", vec_to_pyarrow::<Int64Type>(py, ret)?)?;
        d.set_item("errno", vec_to_pyarrow::<Int32Type>(py, errno)?)?;
        d.set_item("wait", vec_to_pyarrow::<Int64Type>(py, wait)?)?;
        d.set_item("ready", super::arrow::bools_to_pyarrow(py, &ready)?)?;
        d.set_item("cancelled", cancelled)?;
        d.set_item("realtime", realtime)?;
        match aborted {
            Some((e, c, t, i)) => {
                let a = PyDict::new(py);
                a.set_item("errno", e)?;
                a.set_item("message", std::io::Error::from_raw_os_error(e).to_string())?;
                a.set_item("copy", c)?;
                a.set_item("op", offsets[t] + i as i64)?;
                d.set_item("aborted", a)?;
            }
            None => d.set_item("aborted", py.None())?,
        }
        Ok(d)
    }
}

/// The benchmark's peer: `offsets` preads of `size` bytes in a bare loop over `threads`
/// threads (thread t on `paths[t % len]`); wall seconds.
#[pyfunction]
fn replay_raw_preads(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    offsets: &Bound<'_, PyAny>,
    size: usize,
    threads: usize,
) -> PyResult<f64> {
    let offs = super::arrow::primitive_from_pyarrow::<Int64Type>(offsets, "offsets")?;
    if paths.is_empty() {
        return Err(PyValueError::new_err("paths: expected at least one file"));
    }
    py.detach(|| run::raw_preads(&paths, offs.values(), size, threads)).map_err(|e| PyOSError::new_err(e.to_string()))
}

/// Registers the replay classes and the kind and skip-reason names.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(replay_raw_preads, m)?)?;
    m.add_class::<PyReplayPlan>()?;
    m.add_class::<PyReplayRun>()?;
    m.add("REPLAY_KINDS", KIND_NAMES.to_vec())?;
    m.add("REPLAY_SKIP_REASONS", SKIP_NAMES.to_vec())?;
    Ok(())
}
