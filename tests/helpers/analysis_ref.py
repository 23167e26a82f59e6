"""Brute-force references for the analyses, and builders of small traces to check them on.

Every reference is the plainest possible Python over a list of event dicts: slow,
obviously right, independent of the code under test (no Rust, no index, no SQL).
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

import tracehouse
from tracehouse import Column, EventType

BT = (
    EventType("B", "begin", (Column("key", "int64", "id", "matching key"), Column("name", "string", "", "span name"))),
    EventType("E", "end", (Column("key", "int64", "id", "matching key"), Column("ret", "int64", "", "returned"))),
    EventType(
        "W",
        "instant",
        (
            Column("obj", "int64", "id", "object"),
            Column("field", "int64", "id", "field"),
            Column("value", "int64", "", "value"),
        ),
    ),
)


def build_trace(store: tracehouse.Store, name: str, events: list[dict], *, flush: bool = True) -> None:
    """A trace of format `bt` from events {type, ts, producer, key|obj/field/value}; seq is
    assigned here in list order per producer (the producer's own order)."""
    store.create_trace(
        name,
        "bt",
        event_types=BT,
        producers=[
            {"id": p, "parent": None, "kind": "thread", "name": f"t{p}", "attrs": {}}
            for p in sorted({e["producer"] for e in events} | {1})
        ],
    )
    seqs: dict[int, int] = defaultdict(int)
    rows: dict[str, list[dict]] = defaultdict(list)
    for e in events:
        e["seq"] = seqs[e["producer"]]
        seqs[e["producer"]] += 1
        rows[e["type"]].append(e)
    for t in ("B", "E", "W"):
        rs = rows.get(t, [])
        if not rs:
            continue
        cols = {
            "ts": pa.array([r["ts"] for r in rs], pa.int64()),
            "producer": pa.array([r["producer"] for r in rs], pa.int32()),
            "seq": pa.array([r["seq"] for r in rs], pa.int64()),
        }
        if t == "B":
            cols["key"] = pa.array([r["key"] for r in rs], pa.int64())
            cols["name"] = pa.array([f"f{r['key']}" for r in rs], pa.string())
        elif t == "E":
            cols["key"] = pa.array([r["key"] for r in rs], pa.int64())
            cols["ret"] = pa.array([r["seq"] * 10 for r in rs], pa.int64())
        else:
            for c in ("obj", "field", "value"):
                cols[c] = pa.array([r[c] for r in rs], pa.int64())
        store.append(name, t, pa.table(cols))
    if flush:
        store.flush(name)


def ref_spans(events: list[dict], keyed: bool) -> tuple[list[dict], list[dict]]:
    """Spans (in span_id order: begins by (ts, producer, seq)) and unmatched halves."""
    begins = sorted((e for e in events if e["type"] == "B"), key=lambda e: (e["ts"], e["producer"], e["seq"]))
    sid = {id(b): i for i, b in enumerate(begins)}
    spans = [
        {
            "span_id": i,
            "ts": b["ts"],
            "producer": b["producer"],
            "seq": b["seq"],
            "key": b["key"],
            "end_ts": None,
            "end_seq": None,
            "depth": 0,
            "parent_id": -1,
            "closed": False,
            "child": 0,
        }
        for i, b in enumerate(begins)
    ]
    unmatched = []
    by_p: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        if e["type"] in ("B", "E"):
            by_p[e["producer"]].append(e)

    def close(stack, i, end_ts, end_seq):
        s = spans[i]
        s["end_ts"], s["end_seq"], s["closed"] = end_ts, end_seq, end_seq is not None
        s["dur"] = end_ts - s["ts"]
        s["self_time"] = s["dur"] - s["child"]
        if stack:
            spans[stack[-1]]["child"] += s["dur"]

    last_ts: dict[int, int] = {}  # spans left open are cut at their thread's last event, of any type
    for e in events:
        last_ts[e["producer"]] = max(last_ts.get(e["producer"], e["ts"]), e["ts"])
    for p, evs in by_p.items():
        evs.sort(key=lambda e: (e["seq"], e["type"] != "B"))
        stack: list[int] = []
        max_ts = last_ts[p]
        for e in evs:
            if e["type"] == "B":
                i = sid[id(e)]
                spans[i]["depth"] = len(stack)
                spans[i]["parent_id"] = stack[-1] if stack else -1
                stack.append(i)
                continue
            if keyed:
                at = next((j for j in range(len(stack) - 1, -1, -1) if spans[stack[j]]["key"] == e["key"]), None)
            else:
                at = len(stack) - 1 if stack else None
            if at is None:
                unmatched.append({"half": "end", "ts": e["ts"], "producer": p, "seq": e["seq"]})
                continue
            while len(stack) > at + 1:
                close(stack, stack.pop(), e["ts"], None)
            close(stack, stack.pop(), e["ts"], e["seq"])
        while stack:
            close(stack, stack.pop(), max_ts, None)
    for s in spans:
        s.pop("child")
        if not s["closed"]:
            unmatched.append({"half": "begin", "ts": s["ts"], "producer": s["producer"], "seq": s["seq"]})
    unmatched.sort(key=lambda u: (u["ts"], u["producer"], u["seq"]))
    return spans, unmatched


def ref_call_tree(spans: list[dict]) -> dict[tuple, tuple[int, int, int]]:
    """call path (names root..leaf) -> (calls, total_ns, self_ns)."""
    out: dict[tuple, list[int]] = {}
    for s in spans:
        path, cur = [], s
        while True:
            path.append(f"f{cur['key']}")
            if cur["parent_id"] < 0:
                break
            cur = spans[cur["parent_id"]]
        k = tuple(reversed(path))
        v = out.setdefault(k, [0, 0, 0])
        v[0] += 1
        v[1] += s["dur"]
        v[2] += s["self_time"]
    return {k: tuple(v) for k, v in out.items()}


def ref_stack(spans: list[dict], producer: int, t: int) -> list[int]:
    """span_ids open on `producer` at t (ts <= t < end_ts), outermost first (by depth,
    then span_id: siblings overlapping at one depth all appear)."""
    return [
        s["span_id"]
        for s in sorted(spans, key=lambda s: s["depth"])
        if s["producer"] == producer and s["ts"] <= t < s["end_ts"]
    ]


SLICE = EventType("S", "span", (Column("name", "string", "", "slice name"),))


def build_slices(store: tracehouse.Store, name: str, slices: list[dict]) -> None:
    """A trace of format `sl` with one span-kind type `S` from {ts, dur, producer, name}
    (seq assigned in list order per producer): spans that may overlap without nesting."""
    store.create_trace(
        name,
        "sl",
        event_types=(SLICE,),
        producers=[
            {"id": p, "parent": None, "kind": "thread", "name": f"t{p}", "attrs": {}}
            for p in sorted({x["producer"] for x in slices} | {1})
        ],
    )
    seqs: dict[int, int] = defaultdict(int)
    for x in slices:
        x["seq"] = seqs[x["producer"]]
        seqs[x["producer"]] += 1
    if slices:
        store.append(
            name,
            "S",
            pa.table(
                {
                    "ts": pa.array([x["ts"] for x in slices], pa.int64()),
                    "producer": pa.array([x["producer"] for x in slices], pa.int32()),
                    "seq": pa.array([x["seq"] for x in slices], pa.int64()),
                    "dur": pa.array([x["dur"] for x in slices], pa.int64()),
                    "name": pa.array([x["name"] for x in slices], pa.string()),
                }
            ),
        )
    store.flush(name)


def ref_open_slices(slices: list[dict], producer: int, t: int) -> list[tuple[int, int]]:
    """(ts, seq) of the slices of `producer` open at t (ts <= t < ts + dur), sorted."""
    return sorted(
        (x["ts"], x["seq"]) for x in slices if x["producer"] == producer and x["ts"] <= t < x["ts"] + x["dur"]
    )


def ref_state(events: list[dict], obj: int, t: int) -> dict[int, tuple[int, int]]:
    """field -> (value, ts) of the last write at or before t (ties: the later in (ts, producer, seq))."""
    out: dict[int, tuple] = {}
    for e in sorted((e for e in events if e["type"] == "W"), key=lambda e: (e["ts"], e["producer"], e["seq"])):
        if e["obj"] == obj and e["ts"] <= t:
            out[e["field"]] = (e["value"], e["ts"])
    return out


def ref_matches(events: list[dict], *, types=None, producers=None, pred=None, start=None, end=None) -> list[tuple]:
    """(ts, producer, seq) of matching events, in order."""
    out = []
    for e in events:
        if types is not None and e["type"] not in types:
            continue
        if producers is not None and e["producer"] not in producers:
            continue
        if start is not None and e["ts"] < start or end is not None and e["ts"] >= end:
            continue
        if pred is not None and not pred(e):
            continue
        out.append((e["ts"], e["producer"], e["seq"]))
    return sorted(out)
