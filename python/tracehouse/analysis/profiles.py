"""What the analyses need to know about a format: which types pair into spans, which
type writes object fields, which writes local variables.

Owns the configurations the analyses take and their defaults per format: `PROFILES` reads
each format's profile from its declaration (beside its parser, `src/formats/<format>/decl.rs`),
not from a list here. A format without one still works when the caller names the types and
columns (CLI flags `--begin`, `--end`, `--key`, `--type`, ...), or, for spans, when its formats
declare exactly one `begin` and one `end` event type. Stack samples (the profile's `samples`)
are `samples.py`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from ..errors import BadInput


@dataclass(frozen=True)
class SpanConfig:
    """How begins and ends pair into spans.

    begin/end: event types; key: a column both have, an end closes the innermost open
    span with the same key (None: the innermost open span); name: the begin column
    naming a span in call trees and flame graphs (default: key). end=None: `begin` is a
    span-kind type (events with their `dur`: Chrome slices, strace syscalls), nested by time.
    """

    begin: str
    end: str | None
    key: str | None = None
    name: str | None = None

    @property
    def name_column(self) -> str | None:
        return self.name or self.key

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ObjectConfig:
    """Writes of object fields: event type, and its object, field and value columns."""

    type: str
    object: str
    field: str
    value: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LocalsConfig:
    """Writes of local variables: event type, the column holding the seq of the frame's
    begin (same producer), the variable and the value columns."""

    type: str
    frame: str
    var: str
    value: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Profile:
    spans: SpanConfig | None = None
    objects: ObjectConfig | None = None
    locals: LocalsConfig | None = None


class _Profiles(Mapping):
    """{format: Profile} of every format that declares one: read from the format's declaration
    (`src/formats/<format>/decl.rs`, or a plugin importer's `PROFILE`) through the registry,
    so a new format's profile is written once, beside its parser."""

    def _profile(self, fmt: str) -> Profile | None:
        from ..formats.registry import format_of

        f = format_of(fmt)
        d = f.profile if f is not None else {}
        if not any(d.get(k) for k in ("spans", "objects", "locals")):
            return None
        s, o, loc = d.get("spans"), d.get("objects"), d.get("locals")
        return Profile(
            spans=SpanConfig(s["begin"], s.get("end"), s.get("key"), s.get("name")) if s else None,
            objects=ObjectConfig(o["type"], o["object"], o["field"], o["value"]) if o else None,
            locals=LocalsConfig(loc["type"], loc["frame"], loc["var"], loc["value"]) if loc else None,
        )

    def __getitem__(self, fmt: str) -> Profile:
        p = self._profile(fmt)
        if p is None:
            raise KeyError(fmt)
        return p

    def __iter__(self):
        from ..formats.registry import formats

        return (name for name in formats() if self._profile(name) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


PROFILES: Mapping[str, Profile] = _Profiles()


def span_config(
    store, trace: str, begin: str | None = None, end: str | None = None, key: str | None = None, name: str | None = None
) -> SpanConfig:
    """The pairing of `trace`: given types win, then the format's profile, then the
    pairing its last saved processed span trace was made with, then its only begin and
    end types."""
    fmt = store.trace(trace).format
    prof = PROFILES.get(fmt, Profile()).spans
    types = store.event_types(trace)
    if begin is None and end is None and prof is not None:
        return SpanConfig(prof.begin, prof.end, key if key is not None else prof.key, name or prof.name)
    if begin is None and end is None:
        saved = [
            r
            for r in store.results(trace=trace, tool="tracehouse.analysis.spans", kind="processed")
            if isinstance(r["params"].get("config"), dict)
        ]
        if saved:
            c = saved[-1]["params"]["config"]
            return SpanConfig(c["begin"], c["end"], key if key is not None else c.get("key"), name or c.get("name"))
    if begin is not None and end is None and begin in types and types[begin].kind == "span":
        return SpanConfig(begin, None, None, name)
    if begin is None or end is None:
        begins = [t.name for t in types.values() if t.kind == "begin"]
        ends = [t.name for t in types.values() if t.kind == "end"]
        spans = [t.name for t in types.values() if t.kind == "span"]
        if begin is None and end is None and not begins and not ends and len(spans) == 1:
            return SpanConfig(spans[0], None, None, name)
        begin = begin or (begins[0] if len(begins) == 1 else None)
        end = end or (ends[0] if len(ends) == 1 else None)
        if begin is None or end is None:
            raise BadInput(
                f"trace {trace!r} (format {fmt!r}): which event types are the begins and ends of spans?",
                expected="--begin TYPE --end TYPE, or --begin SPAN_TYPE alone (types: " + ", ".join(types) + ")",
            )
    for t in (begin, end):
        if t not in types:
            raise BadInput(f"trace {trace!r} has no event type {t!r}", expected=", ".join(types))
    return SpanConfig(begin, end, key, name)


def object_config(
    store,
    trace: str,
    type: str | None = None,
    object: str | None = None,  # noqa: A002
    field: str | None = None,
    value: str | None = None,
) -> ObjectConfig:
    prof = PROFILES.get(store.trace(trace).format, Profile()).objects
    vals = {"type": type, "object": object, "field": field, "value": value}
    if prof is not None:
        vals = {k: v if v is not None else getattr(prof, k) for k, v in vals.items()}
    missing = [k for k, v in vals.items() if v is None]
    if missing:
        raise BadInput(
            f"trace {trace!r}: object state needs " + ", ".join(missing),
            expected="--type TYPE --object COL --field COL --value COL",
        )
    return ObjectConfig(**vals)


def locals_config(store, trace: str) -> LocalsConfig | None:
    return PROFILES.get(store.trace(trace).format, Profile()).locals


NAME_COLUMNS = ("name", "syscall", "value", "state", "func", "probe", "event")  # a span's label, in this order


def infer_span_config(store, trace: str) -> tuple[SpanConfig | None, str]:
    """(how the trace's spans are made with no flag given, why there are none when None): the
    format's profile or `span_config`'s inference, except that a format without a profile
    that has a span-kind type shows those spans (nested by time), and labelled by the first
    string column among NAME_COLUMNS when the pairing names none. What the web UI shows and
    the span analyses use by default."""
    info = store.trace(trace)
    if info.metadata.get("tool"):  # a processed trace (`<trace>:spans`): its spans are its source's
        return None, f"a trace derived by {info.metadata['tool']}: open {info.metadata.get('source', 'its source')}"
    types = store.event_types(trace)
    spans = [t for t in types.values() if t.kind == "span"]
    try:
        if info.format not in PROFILES and spans:
            # Spans the importer already made (bpftrace/stap --span, Paje states, CSV --dur) rather
            # than pairing again the begin/end halves it left over.
            raise BadInput("spans of a span-kind type")
        cfg = span_config(store, trace)
    except BadInput as e:
        if not spans:
            return None, f"no spans: {e.reason}"
        cfg = SpanConfig(spans[0].name, None)
    if cfg.begin not in types or (cfg.end is not None and cfg.end not in types):
        return None, f"no event type {cfg.begin!r} in this trace"
    if cfg.name_column is None:
        strings = {c.name for c in types[cfg.begin].params if c.type == "string"}
        name = next((n for n in NAME_COLUMNS if n in strings), None)
        cfg = SpanConfig(cfg.begin, cfg.end, cfg.key, name)
    return cfg, ""


def choose_span_config(
    store, trace: str, begin: str | None = None, end: str | None = None, key: str | None = None, name: str | None = None
) -> SpanConfig:
    """The pairing the span analyses use: the flags given (`span_config`), else what
    `infer_span_config` finds (the web UI's), else `span_config`'s error naming the flags
    that are missing."""
    if any(v is not None for v in (begin, end, key, name)):
        return span_config(store, trace, begin, end, key, name)
    cfg, _why = infer_span_config(store, trace)
    return cfg if cfg is not None else span_config(store, trace)
