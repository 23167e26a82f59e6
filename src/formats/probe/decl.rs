//! The `bpftrace` and `stap` formats, declared once (see `formats/decl.rs`): their fixed event
//! types (`printf`, bpftrace's `tseries`) and the columns of the three result tables aggregates
//! become (`hist`, `map`, `stats`, saved with `Store.save_result`). Both tools print the same
//! kinds of things, so `stap` shares `printf` and the result tables (it has no `tseries`). The
//! types of the user's `--pattern`s and `--span`s are made per import from the patterns
//! (`ChunkParser::input_types`). The declarations name the one parser's factory, per tool.

use crate::formats::decl::types::{B, F, I, S};
use crate::formats::decl::{param, EventTypeDecl, FormatDecl, Param, ParserDecl, ResultDecl};
use crate::formats::parser::{ChunkParser, OptKind, OptionDecl, Options};

use super::{ProbeParser, Tool};

const MAP: Param = param("map", S, "text", "map name (@name)");
const KEY: Param = param("key", S, "text", "map key, null for a map without keys");
const LINE: Param = param("line", I, "line", "line of the input");

/// Lines no pattern matched, kept as text.
pub const PRINTF: EventTypeDecl = EventTypeDecl {
    name: "printf",
    kind: "instant",
    params: &[
        param("text", S, "text", "a printed line no --pattern matched (ts: the last time seen before it)"),
        param("line", I, "line", "line number in the input file"),
    ],
    doc: "printed output that matched no pattern",
};

/// bpftrace's `tseries()` maps: one counter row per interval.
pub const TSERIES: EventTypeDecl = EventTypeDecl {
    name: "tseries",
    kind: "counter",
    params: &[
        MAP,
        KEY,
        param("value", F, "as recorded", "the value over the interval that starts at ts (null: none)"),
        LINE,
    ],
    doc: "one interval of a tseries() map: ts is its interval_start (epoch ns; bpftrace's printed time is UTC)",
};

/// The `hist` result table: one row per bucket.
pub const HIST: ResultDecl = ResultDecl {
    name: "hist",
    params: &[
        param("map", S, "text", "map name (@name), or the table's title for SystemTap"),
        KEY,
        param("lo", I, "as recorded", "bucket lower bound, inclusive; null when open below"),
        param("hi", I, "as recorded", "bucket upper bound, exclusive; null when open above"),
        param("count", I, "count", "samples in the bucket"),
        param("elided", B, "flag", "a SystemTap '~' row: empty buckets from lo to hi"),
        param("line", I, "line", "line of the input the bucket was read from"),
    ],
};

/// The `map` result table: one row per map entry.
pub const MAP_RESULT: ResultDecl = ResultDecl {
    name: "map",
    params: &[
        MAP,
        param("key", S, "text", "map key, null for a scalar"),
        param("value", I, "as recorded", "integer value"),
        param("text", S, "text", "the value as printed, when it is not an integer"),
        LINE,
    ],
};

/// The `stats` result table: one row per stats() entry.
pub const STATS: ResultDecl = ResultDecl {
    name: "stats",
    params: &[
        MAP,
        KEY,
        param("count", I, "count", "number of values"),
        param("average", I, "as recorded", "their average (integer, as bpftrace prints it)"),
        param("total", I, "as recorded", "their sum"),
        LINE,
    ],
};

/// The `bpftrace` format.
pub const BPFTRACE: FormatDecl = FormatDecl {
    name: "bpftrace",
    description: "bpftrace output: -f json records or text (printf lines parsed by --pattern, @maps, hist/lhist \
                  histograms, stats)",
    event_types: &[PRINTF, TSERIES],
    results: &[HIST, MAP_RESULT, STATS],
    priority: 70,
    parser: Some(ParserDecl { options: OPTIONS, make: |o| make(Tool::Bpftrace, o) }),
    examples: &[(
        "saved aggregates (@maps, histograms)",
        "SELECT id, kind, name, tool, params FROM th.results\n\
         WHERE list_contains(traces, {s}) ORDER BY id",
    )],
    ..FormatDecl::BASE
};

/// The `stap` format.
pub const STAP: FormatDecl = FormatDecl {
    name: "stap",
    description: "SystemTap output: printf lines parsed by --pattern, @hist_log/@hist_linear tables",
    event_types: &[PRINTF], // no time series: that is bpftrace's tseries()
    results: &[HIST, MAP_RESULT, STATS],
    priority: 60,
    parser: Some(ParserDecl { options: OPTIONS, make: |o| make(Tool::Stap, o) }),
    examples: &[(
        "saved aggregates (@hist tables)",
        "SELECT id, kind, name, tool, params FROM th.results\n\
         WHERE list_contains(traces, {s}) ORDER BY id",
    )],
    ..FormatDecl::BASE
};

/// The options of both tools' parser.
const OPTIONS: &[OptionDecl] = &[
    OptionDecl {
        name: "patterns",
        kind: OptKind::List,
        doc: "printf lines as event types: NAME:TEMPLATE (fields {name:type[:unit]})",
    },
    OptionDecl {
        name: "spans",
        kind: OptKind::List,
        doc: "NAME=BEGIN,END,KEY: each END event closes the most recent unmatched BEGIN of the same KEY",
    },
];

fn make(tool: Tool, o: &Options) -> Result<Box<dyn ChunkParser>, String> {
    let mut p = ProbeParser::new(tool, o.list("patterns"), o.list("spans"), o.strict(), o.batch_rows())?;
    p.set_max_line(o.max_line());
    Ok(Box::new(p))
}
