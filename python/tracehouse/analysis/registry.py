"""The analysis registry: one descriptor per analysis, ours and installed plugins' alike.

Owns what an analysis is to the surfaces. An `Analysis` names itself, says what it answers,
declares its parameters (`Param`: type, unit, default, the command-line flag), the columns
of its answer with their units, whether it is fast on big traces (answers from the
derived indexes in milliseconds to a second, whatever the trace's size) and which traces
it applies to; its `run(store, trace, window, **params)` returns an Arrow table or a
small typed answer (`Answer`: rows, JSON, text, how it is saved). The command line
(`tracehouse analyze NAME`, cli/analyze.py) and the web UI (`/api/ui/analyses`,
`/api/ui/analysis`) are loops over `analyses()`: a new analysis appears in both by being
registered, nothing else.

Registration is one entry point in the group `tracehouse.analyses`, naming the descriptor:

    [project.entry-points."tracehouse.analyses"]
    longest = "mypkg.longest:LONGEST"        # an Analysis

tracehouse declares its own the same way in its pyproject.toml (`stats =
"tracehouse.analysis.statistics:STATS"`, ...): there is no second list. A plugin cannot
take the name of one of ours, and one that fails to load is left out (`failures()`;
`tracehouse tools` lists why). The older plugin form, a module with `NAME`,
`DESCRIPTION`, `add_arguments(parser)` and `run(store, args)`, still runs on the command
line (`Analysis.cli_only`); it declares no parameters, so the web UI lists it without a form.

The window (`Window`) is the linked selection of the surfaces: a time range [start, end)
in ns and a set of producers. An analysis says which parts it honours by giving a
parameter the role (`Param.window`), which also names its flag (`--start`, `--end-time`,
`--thread`, ...).

`markdown()` is the reference of every analysis (docs/analyses.md, generated: a test
checks the committed page against it). Over 600 lines: the descriptor, its parameters,
the answers' parts and discovery are one contract that every analysis module imports.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import BadInput
from ..schema import Column

if TYPE_CHECKING:
    import pyarrow as pa

    from ..store import Store

GROUP = "tracehouse.analyses"
OURS = "tracehouse"  # the distribution whose analyses are the built-ins

# A parameter's type: how its text (a flag, a query-string value) becomes a value.
TYPES = {
    "int": "an integer",
    "float": "a number",
    "str": "text",
    "bool": "a flag (true when given)",
    "time": "a time in ns, or a number with a unit: 1500, 1.5us, 2ms, 0.25s",
    "duration": "a duration in ns, or a number with a unit: 1500, 1.5us, 2ms, 0.25s",
}
WINDOW_PARTS = ("start", "end", "producers")
TRACES = {
    "one": "one trace",
    "many": "traces given by name and/or selected by --search",
    "pair": "two traces: before and after",
}
APPLIES = {
    "any": "any trace",
    "spans": "traces whose events pair into spans (the format's profile or --begin/--end)",
    "objects": "traces with object field writes (the format's profile or --type and columns)",
    "locals": "traces with local variable writes (the format's profile)",
    "samples": "traces of stack samples (the format's profile: perf)",
}


def parse_ns(text: str | int | None) -> int | None:
    """An int in ns, or a number with a unit: 1500, 1.5us, 2ms, 0.25s."""
    if text is None or isinstance(text, int):
        return text
    t = str(text).strip().replace("_", "")
    for suffix, mult in (("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)):
        if t.endswith(suffix) and t[: -len(suffix)].replace(".", "", 1).lstrip("-").isdigit():
            return int(round(float(t[: -len(suffix)]) * mult))
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return int(float(t))  # 1e+18, 1.5: how a browser may print a number
    except ValueError:
        raise BadInput(f"time {text!r}", expected="ns as an integer, or a number with ns/us/ms/s") from None


@dataclass(frozen=True)
class Param:
    """One parameter of an analysis: `run`'s keyword `name`, the flag `--name` (`flag` when
    another), a type of TYPES, the unit of its value and a sentence saying what it does.

    window: the part of the window it gives ("start", "end", "producers"): the surfaces pass
    it inside `Window`, not as a keyword. answer=False: it changes only what is shown (rows
    printed, an output file), so a saved result does not record it and `run` never sees it.
    many: given several times (a list). positional: an argument without a flag.
    """

    name: str
    type: str
    unit: str
    doc: str
    default: Any = None
    choices: tuple = ()
    required: bool = False
    many: bool = False
    positional: bool = False
    flag: str | None = None
    window: str | None = None
    answer: bool = True
    group: str | None = None  # the command's help lists it under this heading
    metavar: str | None = None

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"parameter {self.name}: type {self.type!r} is none of {', '.join(TYPES)}")
        if self.window is not None and self.window not in WINDOW_PARTS:
            raise ValueError(f"parameter {self.name}: window part {self.window!r} is none of {WINDOW_PARTS}")

    @property
    def cli(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def convert(self, text: Any) -> Any:
        """A value of this parameter from its text (or a value already of its type)."""
        if text is None:
            return None
        if self.many and isinstance(text, (list, tuple)):
            return [self._one(t) for t in text]
        return self._one(text)

    def _one(self, text: Any) -> Any:
        if self.type in ("time", "duration"):
            v = parse_ns(text)
        elif self.type == "int":
            try:
                v = int(text)
            except (TypeError, ValueError):
                raise BadInput(f"{self.name}={text!r}", expected="an integer") from None
        elif self.type == "float":
            try:
                v = float(text)
            except (TypeError, ValueError):
                raise BadInput(f"{self.name}={text!r}", expected="a number") from None
            if v != v or v in (float("inf"), float("-inf")):  # "nan", "inf" parse, and mean nothing here
                raise BadInput(f"{self.name}={text!r}", expected="a finite number")
        elif self.type == "bool":
            v = text if isinstance(text, bool) else str(text).strip().lower() in ("1", "true", "yes", "on")
        else:
            v = str(text)
        if self.choices and v not in self.choices:
            raise BadInput(f"{self.name}={text!r}", expected=" | ".join(map(str, self.choices)))
        return v

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "type": self.type,
            "unit": self.unit,
            "doc": self.doc,
            "default": self.default,
            "choices": list(self.choices),
            "required": self.required,
            "many": self.many,
            "positional": self.positional,
            "flag": None if self.positional else self.cli,
            "window": self.window,
            "answer": self.answer,
        }


@dataclass(frozen=True)
class Window:
    """The linked selection: [start, end) in ns (None: open) and producers (None: all)."""

    start: int | None = None
    end: int | None = None
    producers: tuple[int, ...] | None = None

    def bounds(self, lo: int | None, hi: int | None) -> tuple[int, int]:
        """Closed to a trace's first and last event time: [start, end) with end exclusive."""
        start = self.start if self.start is not None else (lo if lo is not None else 0)
        end = self.end if self.end is not None else ((hi + 1) if hi is not None else start + 1)
        if end <= start:
            raise BadInput(f"time range [{start}, {end}) is empty", expected="start < end")
        return int(start), int(end)

    @property
    def whole(self) -> bool:
        return self.start is None and self.end is None and self.producers is None


@dataclass(frozen=True)
class Title:
    """Part of what a person sees: a bold line."""

    text: str


@dataclass(frozen=True)
class Text:
    """Part of what a person sees: text as it is (the answer itself: folded stacks, a histogram)."""

    text: str


@dataclass(frozen=True)
class Note:
    """Part of what a person sees, beside the answer (stderr on the command line)."""

    text: str


@dataclass(frozen=True)
class Table:
    """Part of what a person sees: the first `limit` rows of a table (None: all), and how
    to see the rest when some are left out."""

    table: pa.Table
    limit: int | None = None
    more: str = "--limit N shows more, --json all"


class Answer:
    """A typed answer: what an analysis returns when an Arrow table alone would lose
    something (a histogram's buckets and summary, a page and its position, folded text).
    Subclasses say how it is shown, saved and given as JSON; every one has its rows."""

    title: str = ""

    def table(self) -> pa.Table:
        """The rows: what the web UI shows and a saved result keeps."""
        raise NotImplementedError

    def shown_table(self) -> pa.Table:
        """The rows as a person sees them first (an order, the columns that matter)."""
        return self.table()

    def to_json(self, shown: dict) -> Any:
        """`--json` (and the web UI): every row unless the analysis pages them."""
        return {"rows": self.shown_table().to_pylist()} | ({"title": self.title} if self.title else {})

    def show(self, shown: dict) -> list:
        """What a person sees: Title, Text, Table and Note parts. `shown`: the parameters that
        only change what is shown (limit, ...), and `result`: the id of the saved result."""
        return ([Title(self.title)] if self.title else []) + [Table(self.shown_table(), shown.get("limit"))]

    def save(self, store: Store, name: str, traces: list[str], params: dict, shown: dict) -> Any:
        """Saves the answer as a result of its own kind and returns its id; NotImplemented:
        `results.save_answer` saves `table()` (with `save_params()`) as a table result."""
        return NotImplemented

    def save_params(self) -> dict:
        """What a saved result records beside the arguments (the pairing a span analysis used, ...)."""
        return {}


@dataclass
class Rows(Answer):
    """An Arrow table with a title, the columns a person sees first (`view`) and what a saved
    result records beside the arguments (`params`)."""

    rows: pa.Table
    title: str = ""
    view: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)
    save_as: str | None = None  # the result's name and tool when not the analysis' (stats-by-type)

    def table(self) -> pa.Table:
        return self.rows

    def shown_table(self) -> pa.Table:
        if not self.view:
            return self.rows
        return self.rows.select([c for c in self.view if c in self.rows.column_names])

    def to_json(self, shown: dict) -> Any:
        return {"rows": self.rows.to_pylist()} | ({"title": self.title} if self.title else {})

    def save_params(self) -> dict:
        return self.params


def as_answer(result: Any, title: str = "") -> Answer:
    """An analysis' return value as an Answer (a plugin may return a bare table)."""
    if isinstance(result, Answer):
        return result
    import pyarrow as pa

    if isinstance(result, pa.Table):
        return Rows(result, title=title)
    return Value(result)


@dataclass
class Value(Answer):
    """A plugin's answer that is neither a table nor an Answer: text, or a JSON-able value."""

    value: Any

    def table(self) -> pa.Table:
        import pyarrow as pa

        if isinstance(self.value, str):
            return pa.table({"line": pa.array(self.value.splitlines(), pa.string())})
        return pa.table({"value": pa.array([str(self.value)], pa.string())})

    def to_json(self, shown: dict) -> Any:
        return self.value if not isinstance(self.value, str) else {"text": self.value}

    def show(self, shown: dict) -> list:
        if isinstance(self.value, str):
            return [Text(self.value if self.value.endswith("\n") else self.value + "\n")]
        import json

        return [Text(json.dumps(self.value, indent=2, default=str) + "\n")]

    @property
    def text_file(self) -> str | None:
        """Text saved as a file result (`results.save_answer`)."""
        return self.value if isinstance(self.value, str) else None


@dataclass(frozen=True)
class Analysis:
    """One analysis as the surfaces see it (see the module doc).

    run(store, trace, window, **params): `trace` is a name (traces="one"), a list of names
    ("many": given and/or selected by --search; "pair": [before, after]); `params` holds
    every Param with answer=True and no window role, by name, converted, defaults applied.
    columns: the answer's columns with their units (`columns_note`: the ones that depend on
    the trace, e.g. a span's arguments). fast: answers from the derived indexes on big traces
    (built on first use); False: scans or pairs the trace each time. applies_to: APPLIES keys.
    uses: the derived data it reads ("density", "spans", "calls", "objects", "locals"): the
    web UI builds them in the background before a big trace's first request.
    """

    name: str
    summary: str
    run: Callable[..., Any]
    params: tuple[Param, ...] = ()
    columns: tuple[Column, ...] = ()
    columns_note: str = ""
    fast: bool = True
    applies_to: tuple[str, ...] = ("any",)
    uses: tuple[str, ...] = ()
    traces: str = "one"
    limit: int = 50  # rows shown by default (`--limit`), when no parameter is called limit
    doc: str = ""
    source: str = OURS
    version: str | None = None
    cli_only: Any = None  # an older plugin: its module (`add_arguments`, `run(store, args)`)

    def __post_init__(self) -> None:
        if self.traces not in TRACES:
            raise ValueError(f"analysis {self.name}: traces={self.traces!r} is none of {', '.join(TRACES)}")
        bad = [a for a in self.applies_to if a not in APPLIES]
        if bad:
            raise ValueError(f"analysis {self.name}: applies_to {bad} not in {', '.join(APPLIES)}")
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"analysis {self.name}: a parameter is declared twice")

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise BadInput(
            f"analysis {self.name} has no parameter {name!r}", expected=", ".join(p.name for p in self.params) or "none"
        )

    @property
    def window_parts(self) -> dict[str, Param]:
        return {p.window: p for p in self.params if p.window}

    def call(self, store: Store, trace: Any, window: Window | None = None, **given) -> Answer:
        """`run` with `given` converted and checked and the defaults filled in (the surfaces'
        entry); keywords of window parameters and unknown ones are refused."""
        kw = {}
        for p in self.params:
            if p.window or not p.answer:
                if p.name in given:
                    raise BadInput(
                        f"{p.name} is the window's {p.window}" if p.window else f"{p.name} only changes what is shown"
                    )
                continue
            v = p.convert(given.pop(p.name)) if p.name in given else p.default
            if v is None and p.required:
                raise BadInput(f"analysis {self.name} needs {p.name}", expected=p.doc)
            kw[p.name] = v
        if given:
            raise BadInput(
                f"analysis {self.name} has no parameter {sorted(given)[0]!r}",
                expected=", ".join(p.name for p in self.params if p.answer and not p.window) or "none",
            )
        return as_answer(self.run(store, trace, window or Window(), **kw), title=self.name)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "summary": self.summary,
            "doc": self.doc,
            "fast": self.fast,
            "applies_to": list(self.applies_to),
            "uses": list(self.uses),
            "traces": self.traces,
            "params": [p.to_json() for p in self.params],
            "columns": [c.to_json() for c in self.columns],
            "columns_note": self.columns_note,
            "source": self.source,
            "version": self.version,
            "form": self.cli_only is None,
        }


def select_traces(store: Store, traces: Iterable[str] | None = None, search: dict | None = None) -> list[str]:
    """Trace names given explicitly and/or selected by a `store.search(**search)` (an
    analysis of traces="many")."""
    names = list(traces or [])
    if search:
        names += [t.name for t in store.search(**search)]
    names = list(dict.fromkeys(names))
    if not names:
        raise BadInput("no trace selected", expected="trace names or a search matching some")
    return names


TRACE_PARAMS = {
    "one": (Param("trace", "str", "", "the trace", required=True, positional=True),),
    "many": (
        Param("traces", "str", "", "traces (several: one table with a trace column)", many=True, positional=True),
        Param("search", "str", "", "also every trace whose name matches this glob"),
        Param("format", "str", "", "with --search: only traces of this format"),
    ),
    "pair": (
        Param("before", "str", "", "the trace before", required=True, positional=True),
        Param("after", "str", "", "the trace after", required=True, positional=True),
    ),
}


def arguments(a: Analysis) -> tuple[Param, ...]:
    """Every argument of `a` on the command line, in order: the traces it takes, then its
    parameters (`tracehouse analyze NAME` adds --json, --save and, when no parameter is
    called so, --limit)."""
    return TRACE_PARAMS[a.traces] + a.params


# -- discovery ----------------------------------------------------------------------------------

_CACHE: dict[tuple, tuple[dict[str, Analysis], dict[str, str]]] = {}


def _legacy(name: str, obj: Any) -> Analysis | None:
    """An Analysis standing for an older plugin (`run(store, args)`), or None if `obj` is none."""
    if not callable(getattr(obj, "run", None)):
        return None

    def run(store, trace, window, **_):  # the CLI calls the plugin itself (cli_only)
        raise BadInput(f"analysis {name} is a command-line plugin", expected="tracehouse analyze " + name)

    doc = getattr(obj, "DESCRIPTION", "") or (getattr(obj, "__doc__", "") or "").strip().split("\n")[0]
    return Analysis(name, doc or f"plugin analysis {name}", run, applies_to=("any",), cli_only=obj)


def _load() -> tuple[dict[str, Analysis], dict[str, str]]:
    from importlib import metadata

    ours: dict[str, Analysis] = {}
    theirs: dict[str, Analysis] = {}
    failed: dict[str, str] = {}
    names: dict[int, tuple[str, str | None]] = {}  # a distribution's name and version, read once
    for ep in metadata.entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        if dist is not None and id(dist) not in names:
            md = dist.metadata  # parsed on each access (ours holds the README): once per distribution
            names[id(dist)] = (md["Name"], md["Version"])
        source, version = names[id(dist)] if dist is not None else ("?", None)
        try:
            obj = ep.load()
        except Exception as e:  # a broken plugin is reported by `tracehouse tools`, not fatal
            failed[ep.name] = f"failed to load: {e!r}"
            continue
        a = obj if isinstance(obj, Analysis) else _legacy(ep.name, obj)
        if a is None:
            failed[ep.name] = f"{ep.value} is not an Analysis (tracehouse.analysis.registry)"
            continue
        if source == OURS:
            ours[a.name] = a
        else:
            if a.source == OURS:  # a plugin's descriptor says where it comes from
                a = replace(a, source=source, version=version)
            theirs.setdefault(ep.name if a.cli_only is not None else a.name, a)
    if not ours:
        raise BadInput(
            "the installed tracehouse declares no analyses (its entry points are out of date)",
            expected="`make setup` (or pip install -e .) to install the package again",
        )
    out = dict(ours)
    for name in sorted(theirs):
        if name in out:
            failed.setdefault(name, f"{theirs[name].source}: the name of a built-in analysis")
            continue
        out[name] = theirs[name]
    return out, failed


def _loaded() -> tuple[dict[str, Analysis], dict[str, str]]:
    key = tuple(sys.path)  # a plugin put on the path later (a test, a notebook) is found
    got = _CACHE.get(key)
    if got is None:
        got = _CACHE[key] = _load()
    return got


def analyses() -> dict[str, Analysis]:
    """Every analysis by name: ours in their declared order, then the plugins' by name."""
    return dict(_loaded()[0])


def failures() -> dict[str, str]:
    """Plugins declared in the group that could not be used, with why."""
    return dict(_loaded()[1])


def get(name: str) -> Analysis:
    reg = analyses()
    if name not in reg:
        raise BadInput(f"no analysis named {name!r}", expected=" | ".join(reg))
    return reg[name]


def applies(a: Analysis, store: Store, trace: str) -> tuple[bool, str]:
    """(whether `a` answers about `trace` with its defaults, why not)."""
    if "any" in a.applies_to or not a.applies_to:
        return True, ""
    from .profiles import PROFILES, infer_span_config

    fmt = store.trace(trace).format
    for kind in a.applies_to:
        if kind == "samples":
            from .samples import sample_config

            if sample_config(store, trace) is not None:
                return True, ""
            continue
        if kind == "spans":
            cfg, why = infer_span_config(store, trace)
            if cfg is not None:
                return True, ""
            if "samples" in a.applies_to:
                continue
            return False, why
        prof = PROFILES.get(fmt)
        if prof is not None and getattr(prof, kind, None) is not None:
            return True, ""
    return False, f"no {' or '.join(a.applies_to)} profile for format {fmt!r}"


# -- the reference ------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(reg: Iterable[Analysis] | None = None) -> str:
    """The reference of every analysis as Markdown: name, what it answers, traces, parameters
    with types, units and defaults, output columns with units (docs/analyses.md's
    generated part)."""
    items = list(reg if reg is not None else (a for a in analyses().values() if a.source == OURS))
    out = ["<!-- generated by tracehouse.analysis.registry.markdown(): do not edit by hand -->", ""]
    for a in items:
        out.append(f"### `analyze {a.name}`")
        out.append("")
        out.append(a.summary[0].upper() + a.summary[1:] + ("." if not a.summary.endswith(".") else ""))
        if a.doc:
            out += ["", a.doc.strip()]
        out.append("")
        speed = (
            "fast on big traces (answers from the derived indexes)"
            if a.fast
            else "scans or pairs the trace on each call"
        )
        out.append(f"Traces: {TRACES[a.traces]}; applies to {', '.join(APPLIES[k] for k in a.applies_to)}; {speed}.")
        out.append("")
        shown = [p for p in a.params]
        if shown:
            out += ["| parameter | type | unit | default | meaning |", "|---|---|---|---|---|"]
            for p in shown:
                flag = p.name if p.positional else p.cli
                kind = p.type + (" (repeat)" if p.many else "") + (" (required)" if p.required else "")
                if p.choices:
                    kind += ": " + " \\| ".join(map(str, p.choices))
                role = f" (the window's {p.window})" if p.window else ""
                out.append(
                    f"| `{flag}` | {_cell(kind)} | {p.unit or ''} | "
                    f"{'' if p.default is None or p.default is False else _cell(p.default)} | "
                    f"{_cell(p.doc)}{role} |"
                )
            out.append("")
        if a.columns:
            out += ["| column | type | unit | meaning |", "|---|---|---|---|"]
            for c in a.columns:
                out.append(f"| `{c.name}` | {c.type} | {c.unit} | {_cell(c.doc)} |")
            out.append("")
        if a.columns_note:
            out += [a.columns_note, ""]
    return "\n".join(out).rstrip() + "\n"


BEGIN, END = "<!-- BEGIN analyses reference -->", "<!-- END analyses reference -->"


def with_reference(page: str) -> str:
    """`page` (Markdown) with `markdown()` between its markers (appended with them when it has none)."""
    body = f"{BEGIN}\n{markdown()}{END}\n"
    if BEGIN in page and END in page:
        return page.split(BEGIN, 1)[0] + body + page.split(END, 1)[1].lstrip("\n")
    return page.rstrip() + ("\n\n" if page.strip() else "") + body


def write_reference(path: str) -> bool:
    """Puts `markdown()` between the markers of the Markdown page at `path`; True when it changed."""
    from pathlib import Path

    p = Path(path)
    page = p.read_text() if p.exists() else ""
    new = with_reference(page)
    if new == page:
        return False
    p.write_text(new)
    return True


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="print (or write into a page) the reference of every analysis")
    ap.add_argument("--write", metavar="PAGE", help="replace the generated part of this Markdown page")
    ns = ap.parse_args(argv)
    if ns.write:
        print(("updated " if write_reference(ns.write) else "unchanged ") + ns.write)
    else:
        sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    # Run as a script this file is `__main__`, a second copy of the module whose Analysis class
    # the descriptors are not instances of: the package's own copy does the work.
    from tracehouse.analysis import registry as _registry

    sys.exit(_registry.main())
