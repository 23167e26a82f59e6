"""A pure-Python `sys.settrace` recorder: the baseline of `bench record` and the reference of
the equivalence tests.

Owns two recorders built the way a Python-level omniscient debugger is (a trace function per
frame, opcode events, `frame.f_locals`):

- `EventRecorder` captures the events the native recorder captures (calls with their
  arguments, returns with their value or exception, yields, line steps, writes of locals,
  globals, cells, attributes and items, each value encoded as kind/value/type/short repr) into
  Python lists. A Python trace function cannot read the value stack, so a write seen at its
  `STORE_*` opcode is read back at the frame's next event (`f_locals[name]`, or the attribute or
  item of the target the instruction before it loaded): what such a recorder can do at best.
- `LineRecorder` is the reference of `tests/record/test_equivalence.py`: at every line of
  recorded code it keeps the frame's locals (`f_locals`, as the interpreter shows them) and the
  attributes of the objects they hold, plus every call and return, per thread.

Both record the files `child.rules` records (the standard library and tracehouse excluded).

    python -m tracehouse.record.reference --lines OUT.json -- prog.py ARGS
    python -m tracehouse.record.reference --events -- prog.py ARGS     # prints the event count and time
    python -m tracehouse.record.reference --none -- prog.py ARGS       # the same run untraced: its time
"""

from __future__ import annotations

import opcode
import sys
import threading
import time

from . import child

_OP = opcode.opmap
STORE_LOCAL = {_OP[n] for n in ("STORE_FAST", "STORE_NAME", "STORE_DEREF") if n in _OP}
STORE_GLOBAL = {_OP["STORE_GLOBAL"]}
STORE_ATTR = {_OP["STORE_ATTR"]}
STORE_SUBSCR = {_OP["STORE_SUBSCR"]}
LOADS = {_OP[n] for n in ("LOAD_FAST", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF") if n in _OP}
YIELD = _OP["YIELD_VALUE"]
RESUME = _OP.get("RESUME")


def included(rules: list[tuple[str, bool]]):
    """filename -> recorded? under `rules` (the longest prefix decides, as in the tracer)."""
    cache: dict[str, bool] = {}

    def decide(fname: str) -> bool:
        r = cache.get(fname)
        if r is None:
            best, r = -1, True
            for prefix, rec in rules:
                if fname.startswith(prefix) and len(prefix) >= best:
                    best, r = len(prefix), rec
            cache[fname] = r
        return r

    return decide


def _preview(v, n: int = 5) -> str:
    def one(x):
        t = type(x)
        if x is None or t in (bool, int, float):
            return repr(x)
        if t is str:
            return repr(x[:24])
        return f"<{t.__name__}>"

    t = type(v)
    if isinstance(v, list):
        return "[" + ", ".join(one(x) for x in v[:n]) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(one(x) for x in v[:n]) + ")"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{one(k)}: {one(x)}" for k, x in list(v.items())[:n]) + "}"
    return f"<{t.__name__}>"


class EventRecorder:
    """Records the native recorder's events with a Python trace function (see the module doc)."""

    def __init__(self, rules: list[tuple[str, bool]] | None = None) -> None:
        self.decide = included(rules if rules is not None else child.rules())
        self.events: list[tuple] = []
        self.symbols: dict[str, int] = {}
        self._seq: dict[int, int] = {}
        self._codes: dict = {}

    def _sym(self, s: str) -> int:
        i = self.symbols.get(s)
        if i is None:
            i = self.symbols[s] = len(self.symbols) + 1
        return i

    def _val(self, v) -> tuple:
        t = type(v)
        if v is None:
            return (1, 0)
        if t is bool:
            return (2, int(v))
        if t is int:
            return (3, v)
        if t is float:
            return (4, v)
        if t is str:
            return (5, self._sym(v[:200]))
        return (6, id(v), self._sym(t.__name__), self._sym(_preview(v)))

    def _next(self) -> tuple[int, int]:
        tid = threading.get_ident()
        s = self._seq.get(tid, 0)
        self._seq[tid] = s + 1
        return tid, s

    def _code(self, code) -> bool:
        c = self._codes.get(code)
        if c is None:
            c = self._codes[code] = self.decide(code.co_filename)
        return c

    def _global(self, frame, event, arg):
        if event != "call" or not self._code(frame.f_code):
            return None
        code = frame.f_code
        frame.f_trace_opcodes = True
        tid, s = self._next()
        lasti = frame.f_lasti
        resumed = not (RESUME is not None and code.co_code[lasti] == RESUME and code.co_code[lasti + 1] == 0)
        self.events.append(("enter", tid, s, id(code), resumed, time.perf_counter_ns()))
        for k, v in frame.f_locals.items():
            tid, s = self._next()
            self.events.append(("var", tid, s, self._sym(k), self._val(v), True))
        pending: list = []

        def local(frame, event, arg):
            if pending:
                self._resolve(frame, pending)
            if event == "line":
                tid, s = self._next()
                self.events.append(("line", tid, s, frame.f_lineno, time.perf_counter_ns()))
            elif event == "opcode":
                co = frame.f_code.co_code
                i = frame.f_lasti
                op, a = co[i], co[i + 1]
                if op in STORE_LOCAL or op in STORE_GLOBAL:
                    pending.append(("var", self._name(frame, op, a)))
                elif op in STORE_ATTR:
                    pending.append(("attr", self._loaded(frame, i - 2), frame.f_code.co_names[a]))
                elif op in STORE_SUBSCR:
                    pending.append(("item", self._loaded(frame, i - 4), self._loaded(frame, i - 2)))
            elif event == "return":
                tid, s = self._next()
                how = 2 if frame.f_code.co_code[frame.f_lasti] == YIELD else 0
                self.events.append(("exit", tid, s, how, self._val(arg), time.perf_counter_ns()))
            elif event == "exception":
                tid, s = self._next()
                self.events.append(("exception", tid, s, self._val(arg[1])))
            return local

        return local

    @staticmethod
    def _name(frame, op, arg) -> str:
        code = frame.f_code
        if op == _OP["STORE_FAST"]:
            return code.co_varnames[arg]
        if op == _OP["STORE_DEREF"]:
            return code._varname_from_oparg(arg)
        return code.co_names[arg]

    @staticmethod
    def _loaded(frame, i: int):
        """The variable name loaded by the instruction at byte offset i (None if another kind)."""
        code = frame.f_code
        if i < 0:
            return None
        op, a = code.co_code[i], code.co_code[i + 1]
        if op == _OP["LOAD_FAST"]:
            return code.co_varnames[a]
        if op == _OP.get("LOAD_GLOBAL"):
            return code.co_names[a >> 1]
        if op == _OP.get("LOAD_NAME"):
            return code.co_names[a]
        return None

    def _resolve(self, frame, pending: list) -> None:
        loc = frame.f_locals
        for p in pending:
            tid, s = self._next()
            if p[0] == "var":
                v = loc.get(p[1], frame.f_globals.get(p[1]))
                self.events.append(("var", tid, s, self._sym(p[1]), self._val(v), False))
                continue
            target = None if p[1] is None else loc.get(p[1], frame.f_globals.get(p[1]))
            if p[0] == "attr":
                v = getattr(target, p[2], None) if target is not None else None
                self.events.append(("field", tid, s, id(target), self._sym(p[2]), self._val(v), False))
            else:
                key = None if p[2] is None else loc.get(p[2])
                try:
                    v = target[key]
                except Exception:  # noqa: BLE001 - a target the loads before it cannot name
                    v = None
                self.events.append(("field", tid, s, id(target), self._sym(f"[{key!r}]"), self._val(v), False))
        pending.clear()

    def start(self) -> None:
        threading.settrace(self._global)
        sys.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)


def norm(v, depth: int = 0):
    """A value as the equivalence tests compare it: scalars as themselves (str cut at 200
    bytes as the recorder cuts them), other objects by type, with a user object's attributes
    one level deep."""
    t = type(v)
    if v is None or t in (bool, int, float):
        return v
    if t is str:
        return v.encode("utf-8")[:200].decode("utf-8", "ignore")
    return ["object", t.__name__]


class LineRecorder:
    """At every line of recorded code: the thread, file, line, the frame's locals and, for each
    local holding an instance of a class defined in recorded code, its attributes; every call
    and return (qualified name, return/raise/yield) per thread."""

    def __init__(self, rules: list[tuple[str, bool]] | None = None) -> None:
        self.decide = included(rules if rules is not None else child.rules())
        self.threads: list[dict] = []
        self._lock = threading.Lock()
        # Known by a thread-local, not threading.get_ident(): an ended thread's ident is
        # often given to the next one started.
        self._local = threading.local()

    def _thread(self) -> dict:
        t = getattr(self._local, "record", None)
        if t is None:
            with self._lock:
                t = self._local.record = {"order": len(self.threads), "lines": [], "calls": []}
                self.threads.append(t)
        return t

    def _state(self, frame) -> dict:
        out = {}
        for k, v in frame.f_locals.items():
            # __warningregistry__: put in a module's globals by the warnings module (not recorded
            # code); on 3.12 reading f_locals inside an inlined comprehension warns by itself.
            if k in ("__builtins__", "__warningregistry__"):
                continue
            n = norm(v)
            fields = None
            if type(v).__module__ != "builtins" and self.decide(
                getattr(sys.modules.get(type(v).__module__), "__file__", "") or ""
            ):
                d = getattr(v, "__dict__", None)
                if isinstance(d, dict):
                    fields = {a: norm(x) for a, x in d.items()}
            out[k] = [n, fields, id(v)]
        return out

    def _global(self, frame, event, arg):
        if event != "call" or not self.decide(frame.f_code.co_filename):
            return None
        t = self._thread()
        t["calls"].append(["call", frame.f_code.co_qualname])
        last = [None]

        def local(frame, event, arg):
            if event == "line":
                t["lines"].append(
                    [frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_qualname, self._state(frame)]
                )
            elif event == "return":
                how = (
                    "yield"
                    if frame.f_code.co_code[frame.f_lasti] == YIELD
                    else "raise"
                    if last[0] == "exception"
                    else "return"
                )
                t["calls"].append([how, frame.f_code.co_qualname])
            last[0] = event
            return local

        return local

    def start(self) -> None:
        threading.settrace(self._global)
        sys.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)

    def to_json(self) -> list[dict]:
        return list(self.threads)


def run(recorder, program: list[str]) -> int:
    """Runs `program` as `python PROGRAM` would under `recorder` (None: untraced); returns its
    exit status. `run.seconds` is the program's own time (no interpreter start-up), `run.cpu_seconds`
    the CPU time of its process meanwhile."""
    status = 0
    child.preload()
    if recorder is not None:
        recorder.start()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        try:
            child._run_program(program)
        finally:
            child._join_threads()
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the program's uncaught exception, reported as Python would
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        run.seconds = time.perf_counter() - t0
        run.cpu_seconds = time.process_time() - c0
        if recorder is not None:
            recorder.stop()
    return status


def main(argv: list[str]) -> int:
    if "--" not in argv:
        raise SystemExit("usage: python -m tracehouse.record.reference (--lines OUT.json | --events) -- PROGRAM ARGS")
    opts, program = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    if opts[:1] == ["--lines"] and len(opts) == 2:
        rec = LineRecorder()
        status = run(rec, program)
        import json

        with open(opts[1], "w") as f:
            json.dump(rec.to_json(), f)
        return status
    rec = None if opts[:1] == ["--none"] else EventRecorder()
    status = run(rec, program)
    out = {"events": len(rec.events) if rec else 0, "seconds": run.seconds, "cpu_seconds": run.cpu_seconds}
    print(child.to_json(out), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
