"""A line-protocol round is one native call: decode, WAL records and the fsync step together,
Python entered only when the round adds producers, measurements or columns to the catalog.

In process (an `Ingestor` over a real store, as `tracehouse serve` holds it): which rounds take
the one-call path is observed through `Store.append`, the path a round that changes the catalog
takes; what was stored is read back through SQL and, after a crash (the writers abandoned:
nothing checkpointed), through the WAL's recovery.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracehouse
from tracehouse import _core
from tracehouse.server.config import ServerConfig
from tracehouse.server.ingest import Ingestor
from tracehouse.store import Store
from tracehouse.store import wal as walmod


def _body(first: int, n: int, *, host: str = "h", extra: str = "") -> bytes:
    return "".join(
        f"m,host={host}{i % 3} v={i / 7!r},k={i}i{extra} {1_000 + i}\n" for i in range(first, first + n)
    ).encode()


@pytest.mark.parametrize("fsync", ["batch", "always"])
def test_issue31_a_round_that_changes_no_catalog_row_is_logged_by_its_decoding_call(tmp_path, monkeypatch, fsync):
    path = tmp_path / "s"
    store = Store(path, fsync=fsync, flush_interval_s=3600.0, flush_rows=10**9)
    store.become_writer()
    ing = Ingestor(store, ServerConfig())
    appended: list[str] = []
    real_append = Store.append

    def counted(self, trace, event_type, batch, **kw):
        appended.append(event_type)
        return real_append(self, trace, event_type, batch, **kw)

    monkeypatch.setattr(Store, "append", counted)

    def records() -> int:
        w = store._live_writer("t")
        return len(walmod.read_wal(walmod.wal_path(w.wal_dir, w.wal.number)).records)

    first = ing.write_lp("t", _body(0, 30))  # new trace, measurement, producers: the catalog first
    assert first.rows == 30 and appended == ["m"]
    ing.wait_durable("t", first.lsn)
    before = records()

    appended.clear()
    steady = ing.write_lp_many("t", [(_body(30, 30), "ns", None, 1), (_body(60, 30), "ns", None, 1)])
    assert [r.rows for r in steady] == [30, 30] and appended == [], "a steady round went through Store.append"
    assert records() == before + 1, "one WAL record per measurement of the round"
    assert ing.wait_durable("t", max(r.lsn for r in steady), timeout=10)

    new_col = ing.write_lp("t", _body(90, 10, extra=",z=1i"))  # a new column: registered, then appended
    new_host = ing.write_lp("t", _body(100, 10, host="other"))  # new producers
    mixed = ing.write_lp_many(  # a known measurement beside a new one: the whole round registers first
        "t", [(_body(110, 10), "ns", None, 1), (b"other,host=h0 x=1i 5\n", "ns", None, 1)]
    )
    assert appended == ["m", "m", "m", "other"]
    assert [r.rows for r in (new_col, new_host, *mixed)] == [10, 10, 10, 1]
    assert "z" in {c.name for c in store.event_types("t")["m"].params}
    ing.wait_durable("t", max(r.lsn for r in mixed))
    q = 'SELECT count(*), count(DISTINCT k), count(z) FROM "t".m'
    assert store.sql(q).to_pylist()[0] == {"count_star()": 120, "count(DISTINCT k)": 120, "count(z)": 10}

    for w in store._writers.values():
        w.abandon()  # a crash: nothing checkpointed, every row lives in the WAL
    store.close()
    with tracehouse.open(path) as s2:
        assert [e for r in s2.recovery for e in r.torn] == []
        assert s2.sql(q).to_pylist()[0] == {"count_star()": 120, "count(DISTINCT k)": 120, "count(z)": 10}
        # every row's producer is a registered tag set
        orphans = s2.sql(
            "SELECT count(*) AS n FROM \"t\".m WHERE producer NOT IN (SELECT id FROM th.producers WHERE trace = 't')"
        ).to_pylist()
        assert orphans == [{"n": 0}]
        hosts = s2.sql('SELECT count(DISTINCT producer) AS n FROM "t".m').to_pylist()
        assert hosts == [{"n": 6}]


def test_issue31_wal_log_refuses_a_batch_out_of_its_stored_layout_without_writing(tmp_path):
    import pyarrow as pa

    w = walmod.WalWriter(tmp_path, 0)
    schema = pa.schema([pa.field("ts", pa.int64(), False), pa.field("v", pa.float64())])
    wt = _core.WalType("ev", schema)
    size = w.size
    assert w.log.append(wt, [pa.record_batch({"ts": [1], "v": ["x"]})]) is None
    assert w.size == size, "a refused batch left bytes"
    stored, nbytes = w.log.append(wt, [pa.record_batch([pa.array([1, 2]), pa.array([0.5, 1.5])], schema=schema)])
    assert nbytes == 32 and w.size > size and len(stored) == 1
    with pytest.raises(ValueError, match="fsync"):
        w.log.append(wt, stored, fsync="sometimes")
    w.close()
    assert [b.num_rows for _n, b in walmod.read_wal(walmod.wal_path(tmp_path, 0)).records] == [2]


_MEASUREMENTS = ("cpu", "mem", "disk")
_FIELDS = ("a", "b", "c", "d")


@st.composite
def _rounds(draw):
    """Rounds of line-protocol bodies over a few measurements, tag sets and fields (fields that
    appear later widen their measurement; some lines are malformed)."""
    rounds = []
    ts = 1_000
    for _ in range(draw(st.integers(1, 5))):
        bodies = []
        for _ in range(draw(st.integers(1, 3))):
            lines = []
            for _ in range(draw(st.integers(1, 12))):
                ts += 1
                m = draw(st.sampled_from(_MEASUREMENTS))
                host = draw(st.integers(0, 4))
                fields = draw(st.lists(st.sampled_from(_FIELDS), min_size=1, max_size=3, unique=True))
                if draw(st.integers(0, 20)) == 0:
                    lines.append(f"{m},host=h{host} broken")
                    continue
                kv = ",".join(f"{f}={ts % 97}i" for f in fields)
                lines.append(f"{m},host=h{host} {kv} {ts}")
            bodies.append(("\n".join(lines) + "\n").encode())
        rounds.append(bodies)
    return rounds


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(rounds=_rounds())
def test_issue31_the_one_call_path_stores_what_the_registering_path_stores(tmp_path_factory, rounds):
    # The same rounds written twice: as the server does, and with the one-call path turned off
    # (every round comes back decoded and is appended after registering): the same rows, the
    # same producers, the same answers.
    def write(path, one_call: bool):
        store = Store(path, fsync="batch", flush_interval_s=3600.0, flush_rows=10**9)
        store.become_writer()
        real = store.write_round
        if not one_call:
            store.write_round = lambda trace, decode: real(trace, lambda log: decode({}))
        ing = Ingestor(store, ServerConfig())
        answers = []
        for bodies in rounds:
            res = ing.write_lp_many("t", [(b, "ns", 0, 1) for b in bodies])
            answers.append([(r.rows, r.lines, r.error_count) for r in res])
        tables = {}
        for name in store.event_types("t"):
            tables[name] = store.sql(f'SELECT * FROM "t".{name} ORDER BY ts, producer').to_pylist()
        producers = sorted((p["id"], p["name"]) for p in store.producers("t"))
        store.close()
        return answers, tables, producers

    base = tmp_path_factory.mktemp("onecall")
    assert write(base / "a", True) == write(base / "b", False)
