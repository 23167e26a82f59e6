"""Replays a stored recording into what `reference.LineRecorder` keeps: per thread, the locals
(and the attributes of the objects they hold) at every line step, and the calls and returns.

The test's own reading of the trace (plain SQL, every event in time order), so the equivalence
tests check the recording itself, not the debugger built on it.
"""

from __future__ import annotations

from tracehouse.formats import python as pyfmt


def _rows(store, trace, sql):
    return store.sql(sql.replace("T.", f'"{trace}".')).to_pylist()


def replay(store, trace) -> list[dict]:
    sym = {r["symbol_id"]: r["text"] for r in _rows(store, trace, "SELECT symbol_id, text FROM T.symbol")}
    code = {r["code_id"]: r for r in _rows(store, trace, "SELECT code_id, file, qualname FROM T.code")}
    events = []
    for t in pyfmt.RECORDED:
        for r in _rows(store, trace, f"SELECT * FROM T.{t}"):
            r["type"] = t
            events.append(r)
    events.sort(key=lambda r: r["ts"])
    assert len({r["ts"] for r in events}) == len(events), "timestamps are a total order"

    def val(r):
        k, v = r["value_kind"], r["value"]
        if k == pyfmt.OBJECT:
            tname = sym.get(r["value_type"])
            if tname == "int" and r["value_repr"]:  # beyond int64: the repr holds the digits
                return int(sym[r["value_repr"]]), v
            return ["object", tname], v
        return pyfmt.python_value(k, v, str_text=sym.get(v) if k == pyfmt.STR else None), None

    fields: dict[int, dict] = {}
    threads: dict[int, dict] = {}
    frames: dict[tuple[int, int], dict] = {}
    for r in events:
        p = r["producer"]
        th = threads.setdefault(p, {"order": p, "lines": [], "calls": []})
        t = r["type"]
        if t == "behavior_enter":
            frames[(p, r["seq"])] = {"vars": {}, "ns": None, "code": code[r["behavior_id"]]}
            th["calls"].append(["call", code[r["behavior_id"]]["qualname"]])
        elif t == "behavior_exit":
            th["calls"].append([pyfmt.HOW[r["how"]], code[r["behavior_id"]]["qualname"]])
            frames.pop((p, r["parent_seq"]), None)
        elif t == "var_write":
            f = frames[(p, r["parent_seq"])]
            name = sym[r["var_id"]]
            if r["value_kind"] == pyfmt.UNBOUND:
                f["vars"].pop(name, None)
            else:
                f["vars"][name] = (r["value_kind"], val(r))
        elif t == "field_write":
            f = frames.get((p, r["parent_seq"]))
            if f is not None and r["snapshot"] and sym.get(r["target_type"]) == "module" and f["ns"] is None:
                f["ns"] = r["target"]
            obj = fields.setdefault(r["target"], {})
            name = sym[r["field_id"]]
            if r["value_kind"] == pyfmt.UNBOUND:
                obj.pop(name, None)
            else:
                obj[name] = (r["value_kind"], val(r))
        elif t == "line_step":
            f = frames[(p, r["parent_seq"])]
            ns = fields.get(f["ns"], {}) if f["ns"] is not None else None
            # A module frame: its globals, and the fast locals of a comprehension 3.12 inlines.
            raw = {**ns, **f["vars"]} if ns is not None else f["vars"]
            state = {}
            for name, (k, (v, oid)) in raw.items():
                if name == "__builtins__":
                    continue
                if k == pyfmt.CELL:
                    cell = fields.get(v["cell"], {})
                    if name not in cell:
                        continue  # an empty cell: not a local yet
                    k, (v, oid) = cell[name]
                obj_fields = None
                if oid is not None:  # an object no write reached has no recorded attribute
                    obj_fields = {a: x[1][0] for a, x in fields.get(oid, {}).items()}
                state[name] = [v, obj_fields, oid]
            th["lines"].append([f["code"]["file"], r["line"], f["code"]["qualname"], state])
    return [threads[p] for p in sorted(threads)]
