"""A second process on a store another process writes: prints one JSON line per attempted action.

    lock_child.py STORE

Tries, in order: a read-write open; reading through it; creating a trace; appending
to trace "t"; a read-only open and a query through it; closing. Each action prints
{"action", "ok", "error" (class name), "message", "value"}.
"""

from __future__ import annotations

import json
import sys

import pyarrow as pa

import tracehouse


def attempt(action, f) -> None:
    out = {"action": action, "ok": True, "error": None, "message": None, "value": None}
    try:
        out["value"] = f()
    except Exception as e:
        out.update(ok=False, error=type(e).__name__, message=str(e))
    print(json.dumps(out), flush=True)


def main() -> None:
    path = sys.argv[1]
    holder = {}

    def open_rw():
        holder["rw"] = tracehouse.open(path)
        return None

    attempt("open", open_rw)
    count = 'SELECT count(*) AS n FROM "t".ev'
    attempt("read", lambda: holder["rw"].sql(count).column("n")[0].as_py())
    attempt("create_trace", lambda: holder["rw"].create_trace("other", "fmt") and None)
    batch = pa.table({"ts": [1], "producer": pa.array([0], pa.int32()), "id": [1]})
    attempt("append", lambda: holder["rw"].append("t", "ev", batch))
    attempt("readonly_read", lambda: tracehouse.open(path, readonly=True).sql(count).column("n")[0].as_py())
    attempt("close", lambda: holder["rw"].close())


if __name__ == "__main__":
    main()
