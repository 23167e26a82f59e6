"""Travel back in a recording: the debugger's position, steps, stack, values and origins.

Owns `Session` (what `tracehouse debug` and the web UI's Debug page drive) and its small command
language (`run`). A session stands at a *stop*: a line step of a recorded Python program (format
`python`), or any event of a TOD trace (format `tod`, which has no lines). From there:

  step / back            the next / previous stop of the thread (into calls)
  next / back next       ... in the same frame, over calls (leaving the frame when it ends)
  out / back out         to the caller: after the frame returns / where it was called
  continue / back continue   to the next / previous breakpoint hit, in any thread
  origin NAME / next-write NAME   the previous / next write of a variable or field
  history NAME, print NAME, locals, stack, list (the source), goto, thread, break, watch

Nothing is replayed: every answer is a few binary searches in indexes built once per trace
and saved in the store (`analysis.timeline.keyed`: line steps by thread and by (code, line),
writes by (thread, frame, variable) and by (object, field), calls by function; the span index
for the stack), so a step costs the same at the start of a 100M-event recording as at its end
(`tracehouse bench record` measures it). Timestamps of both formats are unique and increase
with each event (the recorder's clock is one per process; TOD's generator steps by 1-50 ns),
so a stop is found by its thread and time alone.

Names: a local of the current frame, then a global of its module; `a.b.c` follows attributes
and `a[k]` items (the field `[k]` as the recording spells it: `[3]`, `['key']`). On a TOD trace
a variable is `v12` (var_id 12) and a field `#77.f5` (field 5 of object 77).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..analysis import stack as stackmod
from ..analysis import timeline
from ..errors import BadInput
from ..formats import python as pyfmt
from ..store.query import qident

if TYPE_CHECKING:
    from ..store import Store

TOD_STOPS = ("behavior_enter", "behavior_exit", "var_write", "field_write")
LOW = -(2**63)
HIGH = 2**63 - 1
OPS = {
    "==": lambda a, b: a == b,
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_COND = re.compile(r"^\s*(.+?)\s*(==|!=|<=|>=|=|<|>)\s*(.+?)\s*$")


@dataclass
class Target:
    """What a name denotes at the position: a local of a frame, or a field of an object."""

    kind: str  # "var" or "field"
    keys: list[int]  # var: (producer, frame, var_id); field: (target, field_id)
    name: str
    value: dict | None = None  # the write holding its value now (None: never written yet)


@dataclass
class Breakpoint:
    id: int
    kind: str  # "line", "call", "cond", "watch"
    spec: str
    codes: list[int] = field(default_factory=list)
    line: int = 0
    cond: tuple | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "spec": self.spec}


class Session:
    """A debugging session over one recorded trace (see the module doc)."""

    def __init__(self, store: Store, trace: str, *, producer: int | None = None) -> None:
        self.store, self.trace = store, trace
        info = store.trace(trace)
        if info.format not in ("python", "tod"):
            raise BadInput(
                f"trace {trace!r} is a {info.format} trace",
                expected="a recorded program (tracehouse record) or a TOD trace",
            )
        self.python = info.format == "python"
        self.q = qident(trace)
        self.threads = {p["id"]: p["name"] for p in store.producers(trace) if p["kind"] != "process"}
        self._symbols: dict[int, str] = {}
        self._sym_ids: dict[str, int | None] = {}
        self._codes: dict[int, dict] | None = None
        self._sources: dict[str, list[str] | None] = {}
        self._globals_of: dict[str, int | None] = {}
        self.breakpoints: list[Breakpoint] = []
        # Indexes held for the session (finding one through the store's catalog costs ~2 ms).
        self._indexes: dict[tuple, object] = {}
        self.focus: dict | None = None
        self.pos: dict | None = None
        types = store.event_types(trace)
        self.stop_types = ["line_step"] if self.python else [t for t in TOD_STOPS if t in types]
        first = self._main_stop(producer) or self._first_stop(producer)
        if first is None:
            raise BadInput(f"trace {trace!r} has no event to stand at", expected="a recording with line steps")
        self.pos = first

    # -- indexes ----------------------------------------------------------------------------

    def _keyed(self, t: str, keys: list[str]):
        k = (t, tuple(keys))
        idx = self._indexes.get(k)
        if idx is None:
            idx = self._indexes[k] = timeline.keyed(self.store, self.trace, t, keys)
        return idx

    def _stops(self, t: str):
        return self._keyed(t, ["producer"])

    def _vars(self):
        return self._keyed("var_write", ["producer", "parent_seq", "var_id"])

    def _fields(self):
        return self._keyed("field_write", ["target", "field_id"])

    def _spans(self):
        idx = self._indexes.get(("spans",))
        if idx is None:
            from ..analysis.spans import span_index

            idx = self._indexes[("spans",)] = span_index(self.store, self.trace)
        return idx

    def prepare(self) -> None:
        """Builds (or maps) every index the session uses."""
        for t in self.stop_types:
            self._stops(t)
        self._vars()
        self._fields()
        self._stack(self.pos["producer"], self.pos["ts"])
        if self.python:
            self._keyed("line_step", ["behavior_id", "line"])
            self._keyed("symbol", ["symbol_id"])
        self._keyed("behavior_enter", ["behavior_id"])

    # -- stops ------------------------------------------------------------------------------

    def _stop(self, producer: int, t: int, forward: bool, inclusive: bool = False) -> dict | None:
        """The next (previous) stop of thread `producer` after (before) time t."""
        best, typ = None, None
        for name in self.stop_types:
            found = timeline.locate(self._stops(name), ["producer"], [producer], t, forward, inclusive=inclusive)
            if found is not None and (best is None or (found[0] < best[0]) == forward):
                best, typ = found, name
        if best is None:
            return None
        row = timeline.row_at(best)
        row["type"] = typ
        return row

    def _first_stop(self, producer: int | None) -> dict | None:
        for p in [producer] if producer is not None else sorted(self.threads):
            s = self._stop(p, LOW, True, inclusive=True)
            if s is not None:
                return s
        return None

    def _main_stop(self, producer: int | None) -> dict | None:
        """The first line of the program's own file (the recording may start in an import hook)."""
        main = self.store.trace(self.trace).metadata.get("main_file") if self.python else None
        codes = [c for c, r in self.codes.items() if r["file"] == main and r["qualname"] == "<module>"]
        if not codes:
            return None
        idx = timeline.keyed(self.store, self.trace, "behavior_enter", ["behavior_id"])
        enters = [r for r in (timeline.first_after(idx, ["behavior_id"], [c], LOW, inclusive=True) for c in codes) if r]
        if not enters:
            return None
        e = min(enters, key=lambda r: r["ts"])
        return self._stop(e["producer"] if producer is None else producer, e["ts"], True)

    def _stack(self, producer: int, t: int, full: bool = True) -> list[dict]:
        """The frames open at t, outermost first (`full`: every column; else the few a step and
        a view need, without the seqs, which are read through the density index)."""
        cols = (
            None
            if full
            else ["ts", "end_ts", "closed", "depth", "behavior_id"] + (["namespace"] if self.python else [])
        )
        return stackmod.stack_at(self.store, self.trace, producer, t, index=self._spans(), columns=cols).to_pylist()

    def _frame_stack(self, stop: dict, full: bool = False) -> tuple[list[dict], int]:
        """The frames open at the stop (outermost first) and the index of the stop's frame, whose
        `seq` is the stop's parent_seq. A line step or a write runs in the innermost frame; an
        exit (TOD) closes the frame open just before it; an enter (TOD) runs in the caller of
        the frame it opens."""
        t = stop["ts"] - 1 if stop["type"] == "behavior_exit" else stop["ts"]
        st = self._stack(stop["producer"], t, full)
        k = len(st) - (2 if stop["type"] == "behavior_enter" else 1)
        if k >= 0:
            st[k]["seq"] = stop["parent_seq"]
        return st, k

    def _child_of(self, producer: int, c: dict, k: int) -> dict | None:
        """The frame at depth k+1 open at stop c (the call of frame k that c runs inside)."""
        t = c["ts"] - 1 if c.get("type") == "behavior_exit" else c["ts"]
        cs = self._stack(producer, t, False)
        return cs[k + 1] if len(cs) > k + 1 else None

    def _seek_in_frame(
        self, p: int, t: int, st: list[dict], k: int, forward: bool, inclusive: bool = False
    ) -> dict | None:
        """The first stop after (before) time t in frame st[k], skipping the calls it makes; a
        stop outside it once it has returned (forward) or before it began (backward: then the
        search goes on in its caller)."""
        c = self._stop(p, t, forward, inclusive)
        while c is not None and k >= 0:
            fr = st[k]
            if "seq" not in fr:  # a caller's seq, read once it is needed (the stack's cheap form has none)
                fr["seq"] = self._stack(p, fr["ts"], True)[k]["seq"]
            if c["parent_seq"] == fr["seq"]:
                return c
            if forward and fr["closed"] and c["ts"] > fr["end_ts"]:
                return c
            if not forward and c["ts"] < fr["ts"]:
                k -= 1  # before the frame began: its caller's stops
                continue
            child = self._child_of(p, c, k)
            if child is None:
                return c
            c = self._stop(p, child["end_ts"], True) if forward else self._stop(p, child["ts"], False, inclusive=True)
            if forward and not child["closed"]:
                return None
        return c

    def _move(self, stop: dict | None, what: str, forward: bool = True) -> dict:
        if stop is None:
            return self.view(
                note=f"{what}: no stop there (the thread's recording {'ends' if forward else 'starts'} here)"
            )
        self.pos, self.focus = stop, None
        return self.view()

    def step(self, how: str = "into", forward: bool = True) -> dict:
        """Moves one step: `how` is into, over or out; backward when not forward."""
        cur = self.pos
        p = cur["producer"]
        if how == "into":
            return self._move(self._stop(p, cur["ts"], forward), "step", forward)
        st, k = self._frame_stack(cur)
        if k < 0:
            return self._move(self._stop(p, cur["ts"], forward), how, forward)
        if how == "over":
            return self._move(self._seek_in_frame(p, cur["ts"], st, k, forward), "next", forward)
        if how == "out":
            fr = st[k]
            if forward:
                if not fr["closed"]:
                    return self._move(None, "out")
                return self._move(self._stop(p, fr["end_ts"], True, inclusive=not self.python), "out")
            if k == 0 and self.python:
                return self.view(note="back out: this frame's caller was not recorded")
            return self._move(self._seek_in_frame(p, fr["ts"], st, k - 1, False, inclusive=True), "back out", False)
        raise BadInput(f"step {how!r}", expected="into, over or out")

    # -- code, symbols, values --------------------------------------------------------------

    @property
    def codes(self) -> dict[int, dict]:
        if self._codes is None:
            self._codes = (
                {}
                if not self.python
                else {
                    r["code_id"]: r
                    for r in self.store.sql(
                        f"SELECT code_id, file, qualname, first_line FROM {self.q}.code"
                    ).to_pylist()
                }
            )
        return self._codes

    def symbols(self, ids) -> dict[int, str]:
        """Texts of symbol ids (looked up in the symbol index, kept)."""
        want = [int(i) for i in ids if i and int(i) not in self._symbols]
        if want and self.python:
            idx = timeline.keyed(self.store, self.trace, "symbol", ["symbol_id"])
            for i in set(want):
                r = timeline.first_after(idx, ["symbol_id"], [i], LOW, inclusive=True)
                self._symbols[i] = r["text"] if r else f"<symbol {i}>"
        return {int(i): self._symbols.get(int(i), "") for i in ids if i}

    def symbol_id(self, text: str) -> int | None:
        if text not in self._sym_ids:
            rows = self.store.sql(f"SELECT min(symbol_id) AS i FROM {self.q}.symbol WHERE text = ?", [text]).to_pylist()
            self._sym_ids[text] = rows[0]["i"] if rows else None
        return self._sym_ids[text]

    def value(self, row: dict | None, prefix: str = "") -> dict:
        """A written value as {text, kind, value, type, id}: `prefix` names its columns (`end_` for
        a span's return value)."""
        if row is None:
            return {"text": "<not written yet>", "kind": None}
        v = row.get(prefix + "value")
        if not self.python:
            return {"text": f"#{v}", "kind": "object", "id": v}
        k = row.get(prefix + "value_kind")
        s = self.symbols([row.get(prefix + "value_type"), row.get(prefix + "value_repr"), v if k == pyfmt.STR else 0])
        tname, rtext = s.get(row.get(prefix + "value_type") or 0), s.get(row.get(prefix + "value_repr") or 0)
        stext = s.get(v) if k == pyfmt.STR else None
        out = {"text": pyfmt.show(k, v, tname, rtext, stext), "kind": pyfmt.KIND_NAMES[k]}
        if k in (pyfmt.OBJECT, pyfmt.CELL):
            out["id"] = v
            out["type"] = tname
        else:
            out["value"] = pyfmt.python_value(k, v, tname, rtext, stext)
        return out

    def source_lines(self, file: str) -> list[str] | None:
        if file not in self._sources:
            rows = (
                self.store.sql(
                    f"SELECT text FROM {self.q}.source WHERE file = ? ORDER BY ts DESC LIMIT 1", [file]
                ).to_pylist()
                if self.python
                else []
            )
            self._sources[file] = rows[0]["text"].splitlines() if rows else None
        return self._sources[file]

    # -- frames and variables ---------------------------------------------------------------

    def _frame_vars(self, producer: int, frame: dict, t: int) -> list[tuple[str, dict, dict]]:
        """(name, write row, value) of the frame's variables at t (cells resolved, a module
        body's globals for a module frame, with the fast locals 3.12 gives a comprehension
        inlined into it)."""
        out = []
        ns = frame.get("namespace") or 0
        if ns:
            rows = timeline.latest(self._fields(), ["target", "field_id"], [ns], "field_id", t, limit=500)
            names = self.symbols([r["field_id"] for r in rows])
            for r in rows:
                n = names[r["field_id"]]
                if r["value_kind"] != pyfmt.UNBOUND and not (n.startswith("__") and n.endswith("__")):
                    out.append((n, r, self.value(r)))
        rows = timeline.latest(
            self._vars(), ["producer", "parent_seq", "var_id"], [producer, frame["seq"]], "var_id", t
        )
        names = (
            self.symbols([r["var_id"] for r in rows]) if self.python else {r["var_id"]: f"v{r['var_id']}" for r in rows}
        )
        for r in rows:
            if self.python and r["value_kind"] == pyfmt.CELL:
                r = timeline.last_before(
                    self._fields(), ["target", "field_id"], [r["value"], r["var_id"]], t, inclusive=True
                ) or {**r, "value_kind": pyfmt.UNBOUND}
            if self.python and r["value_kind"] == pyfmt.UNBOUND:
                continue
            out.append((names[r["var_id"]], r, self.value(r)))
        return out

    def frames(self, with_locals: bool = True) -> list[dict]:
        """The stack at the position, innermost first: function, file, line, arguments and locals."""
        cur = self.pos
        st = self._stack(cur["producer"], cur["ts"] - 1 if cur["type"] == "behavior_exit" else cur["ts"])
        out = []
        for i, fr in enumerate(st):
            d = {"depth": fr["depth"], "seq": fr["seq"], "ts": fr["ts"], "behavior_id": fr["behavior_id"]}
            if self.python:
                code = self.codes.get(fr["behavior_id"], {})
                d["function"] = code.get("qualname", "?")
                d["file"] = code.get("file", "?")
                d["line"] = st[i + 1]["call_line"] if i + 1 < len(st) else cur.get("line")
            else:
                d["function"] = f"behavior {fr['behavior_id']}"
                d["target"] = fr.get("target")
                d["args"] = [fr.get(f"arg{j}") for j in range(int(fr.get("arg_count") or 0))]
            if with_locals:
                d["locals"] = {n: v for n, _, v in self._frame_vars(cur["producer"], fr, cur["ts"])}
            out.append(d)
        return out[::-1]

    def _globals_ns(self, file: str) -> int | None:
        """The globals dict of the module recorded from `file` (its body's namespace)."""
        if file not in self._globals_of:
            ids = [c for c, r in self.codes.items() if r["file"] == file and r["qualname"] == "<module>"]
            ns = None
            if ids:
                rows = self.store.sql(
                    f"SELECT namespace FROM {self.q}.behavior_enter WHERE behavior_id IN "
                    f"({', '.join(map(str, ids))}) AND namespace <> 0 ORDER BY ts LIMIT 1"
                ).to_pylist()
                ns = rows[0]["namespace"] if rows else None
            self._globals_of[file] = ns
        return self._globals_of[file]

    def resolve(self, name: str, t: int | None = None) -> Target:
        """What `name` denotes at the position (see the module doc)."""
        t = self.pos["ts"] if t is None else t
        if not self.python:
            return self._resolve_tod(name, t)
        parts = re.findall(r"\.?([A-Za-z_]\w*)|(\[[^\]]*\])", name.strip())
        if not parts or not parts[0][0]:
            raise BadInput(f"name {name!r}", expected="a variable, a.b attributes or a[k] items")
        cur = self.pos
        st, k = self._frame_stack(cur, full=True)
        first = parts[0][0]
        target: Target | None = None
        if k >= 0:
            fr = st[k]
            sid = self.symbol_id(first)
            if sid is not None:
                if fr.get("namespace"):
                    target = self._field_target(fr["namespace"], sid, first, t)
                else:
                    keys = [cur["producer"], fr["seq"], sid]
                    vidx = self._vars()
                    row = timeline.last_before(vidx, ["producer", "parent_seq", "var_id"], keys, t, inclusive=True)
                    if row is not None and row["value_kind"] == pyfmt.CELL:
                        target = self._field_target(row["value"], sid, first, t)
                    elif row is not None or timeline.first_after(vidx, ["producer", "parent_seq", "var_id"], keys, t):
                        target = Target("var", keys, first, row)  # a local (written here, now or later)
                if target is None:
                    ns = self._globals_ns(self.codes.get(fr["behavior_id"], {}).get("file", ""))
                    if ns:
                        target = self._field_target(ns, sid, first, t)
        if target is None:
            raise BadInput(
                f"no variable {first!r} here", expected="a local of the current frame or a global of its module"
            )
        for attr, item in parts[1:]:
            holder = target.value
            if holder is None or holder["value_kind"] != pyfmt.OBJECT:
                raise BadInput(f"{target.name} is not an object here ({self.value(holder)['text']})")
            fname = attr or item
            sid = self.symbol_id(fname)
            target = self._field_target(
                holder["value"], sid if sid is not None else -1, f"{target.name}{'.' if attr else ''}{fname}", t
            )
        return target

    def _field_target(self, obj: int, field_id: int, name: str, t: int) -> Target:
        row = timeline.last_before(self._fields(), ["target", "field_id"], [obj, field_id], t, inclusive=True)
        return Target("field", [obj, field_id], name, row)

    def _resolve_tod(self, name: str, t: int) -> Target:
        m = re.fullmatch(r"v(\d+)", name.strip())
        if m:
            st, k = self._frame_stack(self.pos)
            if k < 0:
                raise BadInput("no frame here", expected="a position inside a call")
            keys = [self.pos["producer"], st[k]["seq"], int(m.group(1))]
            row = timeline.last_before(self._vars(), ["producer", "parent_seq", "var_id"], keys, t, inclusive=True)
            return Target("var", keys, name, row)
        m = re.fullmatch(r"#?(\d+)\.f(\d+)", name.strip())
        if m:
            return self._field_target(int(m.group(1)), int(m.group(2)), name, t)
        raise BadInput(f"name {name!r} on a TOD trace", expected="vN (a local variable) or #OBJ.fN (a field)")

    def _index_of(self, target: Target):
        if target.kind == "var":
            return self._vars(), ["producer", "parent_seq", "var_id"]
        return self._fields(), ["target", "field_id"]

    # -- origins and history ------------------------------------------------------------------

    def _at_write(self, w: dict, target: Target, what: str) -> dict:
        """Stands at the stop of a write (its line, for a Python recording) and shows it."""
        w = dict(w)
        w["type"] = "var_write" if target.kind == "var" else "field_write"
        self.pos, self.focus = self.stop_of(w), {**w, "name": target.name}
        return self.view(note=what)

    def stop_of(self, w: dict) -> dict:
        """The stop a write happens at: its line (the last line step before it in its thread),
        or for a value bound as a frame is entered (an argument), the frame's first line."""
        if not self.python:
            return w
        p = w["producer"]
        if not w.get("snapshot"):
            st = self._stack(p, w["ts"])
            k = next((i for i in range(len(st) - 1, -1, -1) if st[i]["seq"] == w["parent_seq"]), -1)
            if k >= 0:
                stop = self._seek_in_frame(p, w["ts"], st, k, False)
                if stop is not None and stop["parent_seq"] == w["parent_seq"]:
                    return stop
        return self._stop(p, w["ts"], True) or self._stop(p, w["ts"], False)

    def origin(self, name: str) -> dict:
        """Back to the write that gave `name` its value now ("where did this value come from")."""
        ref = self._ref_time(name)
        target = self.resolve(name, ref)
        if target.value is None:
            return self.view(note=f"{name} was not written before this point")
        idx, keys = self._index_of(target)
        w = timeline.last_before(idx, keys, target.keys, ref, inclusive=True)
        if w is not None and self.focus and self.focus.get("name") == name and w["ts"] >= self.focus["ts"]:
            w = timeline.last_before(idx, keys, target.keys, self.focus["ts"])
        if self.python:
            while w is not None and w.get("snapshot"):  # a value bound at entry: its origin is earlier
                w = timeline.last_before(idx, keys, target.keys, w["ts"])
        if w is None:
            return self.view(note=f"{name}: no earlier assignment (its value was bound when the frame was entered)")
        return self._at_write(w, target, f"origin of {name}")

    def _ref_time(self, name: str) -> int:
        f = self.focus
        return f["ts"] if f and f.get("name") == name else self.pos["ts"]

    def next_write(self, name: str) -> dict:
        """On to the next write of `name` after the position (or after the write shown)."""
        ref = self._ref_time(name)
        target = self.resolve(name, ref)
        idx, keys = self._index_of(target)
        w = timeline.first_after(idx, keys, target.keys, ref)
        if w is None:
            return self.view(note=f"{name} is not written again")
        return self._at_write(w, target, f"next write of {name}")

    def history(self, name: str, limit: int = 1000) -> dict:
        """Every write of `name` (its variable in this frame, or its field of this object)."""
        target = self.resolve(name)
        idx, keys = self._index_of(target)
        rows = timeline.rows(idx, keys, target.keys, limit=limit).to_pylist()
        total = timeline.count(idx, keys, target.keys)
        hist = []
        for r in rows:
            d = {"ts": r["ts"], "producer": r["producer"], "seq": r["seq"], "value": self.value(r)}
            if self.python:
                d["snapshot"] = bool(r.get("snapshot"))
                stop = self._stop(r["producer"], r["ts"], False)
                d["line"] = stop["line"] if stop else None
            hist.append(d)
        return {"name": name, "kind": target.kind, "writes": hist, "total": total, "position": self.position()}

    def print(self, name: str) -> dict:
        target = self.resolve(name)
        out = {"name": name, "value": self.value(target.value), "position": self.position()}
        if target.value is not None and (not self.python or target.value.get("value_kind") == pyfmt.OBJECT):
            out["fields"] = self.object_state(target.value["value"])
        return out

    def object_state(self, obj: int, t: int | None = None, limit: int = 200) -> dict:
        t = self.pos["ts"] if t is None else t
        rows = timeline.latest(self._fields(), ["target", "field_id"], [int(obj)], "field_id", t, limit=limit)
        names = (
            self.symbols([r["field_id"] for r in rows])
            if self.python
            else {r["field_id"]: f"f{r['field_id']}" for r in rows}
        )
        return {
            names[r["field_id"]]: self.value(r) for r in rows if not self.python or r["value_kind"] != pyfmt.UNBOUND
        }

    # -- breakpoints --------------------------------------------------------------------------

    def add_break(self, spec: str) -> dict:
        spec = spec.strip()
        bid = max((b.id for b in self.breakpoints), default=0) + 1
        m = re.fullmatch(r"(.+):(\d+)", spec)
        if m and self.python:
            codes = [
                c for c, r in self.codes.items() if r["file"] == m.group(1) or r["file"].endswith("/" + m.group(1))
            ]
            if not codes:
                raise BadInput(
                    f"no recorded file {m.group(1)!r}", expected="a file of the recording (list shows its name)"
                )
            b = Breakpoint(bid, "line", spec, codes, int(m.group(2)))
        elif _COND.match(spec):
            lhs, op, rhs = _COND.match(spec).groups()
            b = Breakpoint(bid, "cond", spec, cond=(lhs, op, _literal(rhs)))
        else:
            if self.python:
                codes = [
                    c for c, r in self.codes.items() if r["qualname"] == spec or r["qualname"].endswith("." + spec)
                ]
            else:
                codes = [int(spec)] if spec.isdigit() else []
            if not codes:
                raise BadInput(f"breakpoint {spec!r}", expected="FILE:LINE, a function name, or NAME OP VALUE")
            b = Breakpoint(bid, "call", spec, codes)
        self.breakpoints.append(b)
        return {"breakpoint": b.to_json(), "breakpoints": [x.to_json() for x in self.breakpoints]}

    def watch(self, name: str) -> dict:
        bid = max((b.id for b in self.breakpoints), default=0) + 1
        self.resolve(name)  # it must name something here
        b = Breakpoint(bid, "watch", name, cond=(name, None, None))
        self.breakpoints.append(b)
        return {"breakpoint": b.to_json(), "breakpoints": [x.to_json() for x in self.breakpoints]}

    def delete_break(self, bid: int) -> dict:
        self.breakpoints = [b for b in self.breakpoints if b.id != int(bid)]
        return {"breakpoints": [x.to_json() for x in self.breakpoints]}

    def _hit(self, b: Breakpoint, t: int, forward: bool) -> tuple[dict, dict | None] | None:
        """(stop, write) of breakpoint b's next (previous) hit after (before) t, any thread."""
        pick = timeline.first_after if forward else timeline.last_before
        best = None

        def better(r):
            return best is None or (r["ts"] < best["ts"]) == forward

        if b.kind == "line":
            idx = timeline.keyed(self.store, self.trace, "line_step", ["behavior_id", "line"])
            for c in b.codes:
                r = pick(idx, ["behavior_id", "line"], [c, b.line], t)
                if r is not None and better(r):
                    best = {**r, "type": "line_step"}
            return (best, None) if best else None
        if b.kind == "call":
            idx = timeline.keyed(self.store, self.trace, "behavior_enter", ["behavior_id"])
            for c in b.codes:
                r = pick(idx, ["behavior_id"], [c], t)
                if r is not None and better(r):
                    best = r
            if best is None:
                return None
            stop = self._stop(best["producer"], best["ts"], True) if self.python else {**best, "type": "behavior_enter"}
            if stop is not None and not self._beyond(stop, forward):
                return self._hit(b, best["ts"], forward)  # its first line is where we stand: the one before
            return (stop, None) if stop else None
        return self._cond_hit(b, t, forward)

    def _cond_hit(self, b: Breakpoint, t: int, forward: bool):
        """The next (previous) write of the condition's name (in any frame or object) after which
        the condition holds: a condition can only become true where its variable is written."""
        lhs, op, lit = b.cond
        last = re.split(r"[.\[]", lhs.strip())[-1].strip("]")
        if self.python:
            sid = self.symbol_id(last)
            if sid is None:
                return None
            # A name is a local (var_write) or, at a module's top level and as an attribute, a
            # field (field_write): both are searched.
            searches = [("field_write", "field_id", sid)] + (
                [] if ("." in lhs or "[" in lhs) else [("var_write", "var_id", sid)]
            )
        else:
            m = re.fullmatch(r"v(\d+)", lhs) or re.fullmatch(r"#?\d+\.f(\d+)", lhs)
            if m is None:
                return None
            searches = [
                ("var_write", "var_id", int(m.group(1)))
                if lhs.startswith("v")
                else ("field_write", "field_id", int(m.group(1)))
            ]
        hits = [h for h in (self._cond_scan(table, col, key, t, op, lit, forward) for table, col, key in searches) if h]
        if not hits:
            return None
        return min(hits, key=lambda h: h[1]["ts"]) if forward else max(hits, key=lambda h: h[1]["ts"])

    def _cond_scan(self, table: str, col: str, key: int, t: int, op, lit, forward: bool):
        cmp, order = (">", "ASC") if forward else ("<", "DESC")
        where = f"{col} = ? AND ts {cmp} ?"
        args: list[Any] = [key, t]
        if op is not None and not self.python and isinstance(lit, int):
            where += f" AND value {'=' if op == '==' else op} ?"
            args.append(lit)
        page = 0
        while True:
            rows = self.store.sql(
                f"SELECT * FROM {self.q}.{table} WHERE {where} ORDER BY ts {order} LIMIT 2048 OFFSET {page * 2048}",
                args,
            ).to_pylist()
            for r in rows:
                if op is None or self._holds(r, op, lit):
                    r["type"] = table
                    stop = self.stop_of(r)
                    if stop is not None and self._beyond(stop, forward):
                        return stop, r
            if len(rows) < 2048:
                return None
            page += 1

    def _beyond(self, stop: dict, forward: bool) -> bool:
        """Whether a hit's stop lies past the position in the direction of travel."""
        return stop["ts"] > self.pos["ts"] if forward else stop["ts"] < self.pos["ts"]

    def _holds(self, row: dict, op: str, lit) -> bool:
        v = self.value(row)
        x = v.get("value", v.get("text"))
        try:
            return bool(OPS[op](x, lit))
        except TypeError:
            return False

    def cont(self, forward: bool = True) -> dict:
        """To the nearest breakpoint hit after (before) the position, in any thread."""
        if not self.breakpoints:
            return self.view(note="no breakpoints (break FILE:LINE | FUNCTION | NAME OP VALUE, watch NAME)")
        t = self.focus["ts"] if self.focus else self.pos["ts"]
        best = None
        for b in self.breakpoints:
            h = self._hit(b, t, forward)
            if h is not None and (best is None or (h[0]["ts"] < best[1][0]["ts"]) == forward):
                best = (b, h)
        if best is None:
            return self.view(note="no breakpoint is hit " + ("after" if forward else "before") + " this point")
        b, (stop, w) = best
        self.pos = stop
        self.focus = {**w, "name": b.cond[0] if b.cond else b.spec} if w else None
        return self.view(note=f"breakpoint {b.id}: {b.spec}")

    # -- position and views ------------------------------------------------------------------

    def goto(self, where: str) -> dict:
        """`goto SEQ` (of this thread), `goto @NS` (the first stop at or after a time), `goto start|end`."""
        p = self.pos["producer"]
        if where in ("start", "end"):
            s = (self._main_stop(p) if where == "start" else None) or self._stop(
                p, LOW if where == "start" else HIGH, where == "start", inclusive=True
            )
            return self._move(s, "goto")
        if where.startswith("@"):
            return self._move(self._stop(p, int(where[1:]), True, inclusive=True), "goto")
        seq = int(where)
        for typ in self.stop_types:
            rows = self.store.sql(
                f"SELECT ts FROM {self.q}.{typ} WHERE producer = ? AND seq >= ? ORDER BY seq LIMIT 1", [p, seq]
            ).to_pylist()
            if rows:
                return self._move(self._stop(p, rows[0]["ts"], True, inclusive=True), "goto")
        return self._move(None, "goto")

    def thread(self, producer: int) -> dict:
        """To thread `producer`, at its first stop at or after the current time (else its last)."""
        producer = int(producer)
        if producer not in self.threads:
            raise BadInput(f"no thread {producer}", expected=", ".join(f"{k} ({v})" for k, v in self.threads.items()))
        s = self._stop(producer, self.pos["ts"], True, inclusive=True) or self._stop(producer, HIGH, False)
        return self._move(s, "thread")

    def position(self) -> dict:
        cur = self.pos
        d = {
            "producer": cur["producer"],
            "thread": self.threads.get(cur["producer"], str(cur["producer"])),
            "seq": cur["seq"],
            "ts": cur["ts"],
            "type": cur["type"],
            "frame": cur["parent_seq"],
        }
        if self.python:
            code = self.codes.get(cur["behavior_id"], {})
            d.update(file=code.get("file"), line=cur["line"], function=code.get("qualname"))
        else:
            d["event"] = {k: v for k, v in cur.items() if k not in ("ts", "producer", "seq", "type")}
        return d

    def source(self, context: int = 5) -> dict:
        pos = self.position()
        lines = self.source_lines(pos.get("file") or "") if self.python else None
        if not lines:
            return {"file": pos.get("file"), "line": pos.get("line"), "lines": []}
        n = pos["line"]
        lo, hi = max(1, n - context), min(len(lines), n + context)
        return {
            "file": pos["file"],
            "line": n,
            "lines": [{"line": i, "text": lines[i - 1], "current": i == n} for i in range(lo, hi + 1)],
        }

    def view(self, note: str | None = None) -> dict:
        out = {"position": self.position(), "note": note}
        if self.focus:
            out["write"] = {
                "name": self.focus.get("name"),
                "ts": self.focus["ts"],
                "seq": self.focus["seq"],
                "value": self.value(self.focus),
            }
        st, k = self._frame_stack(self.pos)
        if k >= 0:
            fr = st[k]
            out["locals"] = {n: v for n, _, v in self._frame_vars(self.pos["producer"], fr, self.pos["ts"])}
        if self.python:
            src = self.source(0)
            out["source_line"] = src["lines"][0]["text"] if src["lines"] else None
        return out


def _literal(text: str):
    t = text.strip()
    if t in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[t]
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        pass
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    return t


# -- the command language ---------------------------------------------------------------------

HELP = """commands (a ; separates several):
  s | step          next line (into calls)          bs | back        previous line
  n | next          next line in this frame          bn | back next   previous line in this frame
  o | out           after this frame returns         bo | back out    where this frame was called
  c | continue      to the next breakpoint hit       bc | back continue   to the previous one
  b FILE:LINE | b FUNCTION | b NAME OP VALUE   a breakpoint (both directions); watch NAME: any write
  bl                the breakpoints                  bd N             delete breakpoint N
  origin NAME       back to the write that gave NAME its value; again: the write before
  nw NAME           on to the next write of NAME     history NAME     every write of NAME
  p NAME            its value now (a.b.c, a[k])      locals | stack | where   the frame's or every frame's variables
  l | list [N]      the source around the line       goto SEQ | goto @NS | goto start | goto end
  thread N          to thread N                      info             the position
"""

_ALIASES = {
    "s": ("step", "into", True),
    "step": ("step", "into", True),
    "bs": ("step", "into", False),
    "back": ("step", "into", False),
    "n": ("step", "over", True),
    "next": ("step", "over", True),
    "bn": ("step", "over", False),
    "o": ("step", "out", True),
    "out": ("step", "out", True),
    "finish": ("step", "out", True),
    "bo": ("step", "out", False),
}


def run(session: Session, command: str) -> dict:
    """Runs one command of the language (HELP) and returns its answer as a dict."""
    words = shlex.split(command, posix=True) if command.strip() else []
    if not words:
        return session.view()
    w, rest = words[0], " ".join(words[1:])
    if w in _ALIASES:
        _, how, fwd = _ALIASES[w]
        return session.step(how, fwd)
    if w in ("c", "continue"):
        return session.cont(True)
    if w in ("bc", "rc"):
        return session.cont(False)
    if w in ("back", "reverse") and words[1:2]:
        sub = words[1]
        if sub in ("next", "n"):
            return session.step("over", False)
        if sub in ("out", "o"):
            return session.step("out", False)
        if sub in ("continue", "c"):
            return session.cont(False)
    if w in ("b", "break"):
        return session.add_break(rest) if rest else {"breakpoints": [b.to_json() for b in session.breakpoints]}
    if w == "watch":
        return session.watch(rest)
    if w == "bl":
        return {"breakpoints": [b.to_json() for b in session.breakpoints]}
    if w == "bd":
        return session.delete_break(int(rest))
    if w in ("origin", "from", "o?"):
        return session.origin(rest)
    if w in ("nw", "next-write"):
        return session.next_write(rest)
    if w in ("h", "history"):
        return session.history(rest)
    if w in ("p", "print"):
        return session.print(rest)
    if w == "locals":
        return session.view()
    if w in ("stack", "where", "bt"):
        return {"position": session.position(), "frames": session.frames()}
    if w in ("l", "list"):
        return session.source(int(rest) if rest else 5)
    if w == "goto":
        return session.goto(rest)
    if w == "thread":
        return session.thread(int(rest))
    if w == "info":
        return {
            "position": session.position(),
            "threads": session.threads,
            "breakpoints": [b.to_json() for b in session.breakpoints],
        }
    if w == "state":
        return {"object": int(rest, 0), "fields": session.object_state(int(rest, 0))}
    if w in ("help", "?"):
        return {"help": HELP}
    raise BadInput(f"unknown debug command {w!r}", expected="help lists them")


def split_commands(text: str) -> list[str]:
    return [c.strip() for c in text.replace("\n", ";").split(";") if c.strip()]
