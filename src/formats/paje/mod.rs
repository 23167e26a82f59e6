//! Paje trace files (the text format of Paje, ViTE, FrameSoC and SimGrid).
//!
//! Owns the streaming parse of a Paje file: the `%EventDef` header declares each
//! event's id and fields; the events that follow are replayed into tracehouse's model:
//!
//! - containers (PajeCreateContainer/DestroyContainer) are producers, nested by their
//!   parent container, kind = container type name;
//! - states (PajeSetState/PushState/PopState/ResetState) are `state` spans, one per
//!   value held, with its nesting `depth`; a state still held when its container is
//!   destroyed or the trace ends closes then (counted);
//! - PajeNewEvent is an `event` instant;
//! - PajeSetVariable/AddVariable/SubVariable are `variable` counter rows holding the
//!   variable's value from then on (plus the operation and operand);
//! - PajeStartLink/EndLink, matched by type and key, are `link` rows from the start
//!   container to the end container (a start never ended has no destination; an end
//!   never started is a `link_end`).
//!
//! Fields beyond the standard ones of an event definition are kept as a JSON object in
//! `extra`. Types and entity values are referred to by alias or by name. A container is
//! identified as PajeNG does, by its alias (its name when it has none): names need only
//! be unique within their parent (`t1` under `p1` and under `p2`), and a name may equal
//! another container's alias; an event may also name a container whose name is unique.
//!
//! `PajeTraceFile` (Container, Type, Filename) events are followed: the named file (relative
//! to the file that names it) is read at that point with the definitions known so far, as
//! an include; a file already being read (a cycle) is reported, not followed again.
//! A header with no event is a valid, empty trace. Lines longer than the limit
//! ([`super::MAX_LINE`]) are rejected with their line number; binary input is refused.
//!
//! Over 600 lines: the Paje format is header definitions plus a container/state machine the
//! events replay against; tests are in tests.rs.

use std::io::Read;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;

use super::decl::EventTypeDecl;
use super::json::write_str;
use super::parser::{Attr, ProducerRow};
use super::table::{FastMap, PType, Table, DUR};

/// The event types (declared in `decl.rs`), in the order of the `T_*` indices below.
pub const TABLES: &[EventTypeDecl] = decl::PAJE.event_types;
const T_STATE: usize = 0;
const T_EVENT: usize = 1;
const T_VAR: usize = 2;
const T_LINK: usize = 3;
const T_LINK_END: usize = 4;

/// A line that could not be imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line.
    pub line: u64,
    /// Why.
    pub reason: String,
}

/// A container: a producer.
#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    /// Producer id.
    pub id: i32,
    /// Parent container's producer id (None under the root).
    pub parent: Option<i32>,
    /// Its container type's name.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its alias, when it has one.
    pub alias: Option<String>,
    /// Creation time, ns.
    pub created: Option<i64>,
    /// Destruction time, ns.
    pub destroyed: Option<i64>,
}

/// Counts of what was replayed and what was left over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Event lines read.
    pub events: u64,
    /// Definitions (types, values) read.
    pub definitions: u64,
    /// States still held at the end of the trace (closed at its last time).
    pub states_closed_at_end: u64,
    /// States closed by their container's destruction.
    pub states_closed_by_destroy: u64,
    /// Link starts never ended.
    pub unmatched_link_start: u64,
    /// Link ends never started.
    pub unmatched_link_end: u64,
    /// `%EventDef` headers read (a Paje header: the input is a Paje trace, even without events).
    pub event_defs: u64,
    /// Containers created.
    pub containers: u64,
    /// Files read through `PajeTraceFile`.
    pub includes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    DefContainerType,
    DefStateType,
    DefEventType,
    DefVariableType,
    DefLinkType,
    DefEntityValue,
    CreateContainer,
    DestroyContainer,
    SetState,
    PushState,
    PopState,
    ResetState,
    NewEvent,
    SetVariable,
    AddVariable,
    SubVariable,
    StartLink,
    EndLink,
    TraceFile,
    Other,
}

impl Ev {
    fn of(name: &str) -> Ev {
        match name {
            "PajeDefineContainerType" => Ev::DefContainerType,
            "PajeDefineStateType" => Ev::DefStateType,
            "PajeDefineEventType" => Ev::DefEventType,
            "PajeDefineVariableType" => Ev::DefVariableType,
            "PajeDefineLinkType" => Ev::DefLinkType,
            "PajeDefineEntityValue" => Ev::DefEntityValue,
            "PajeCreateContainer" => Ev::CreateContainer,
            "PajeDestroyContainer" => Ev::DestroyContainer,
            "PajeSetState" => Ev::SetState,
            "PajePushState" => Ev::PushState,
            "PajePopState" => Ev::PopState,
            "PajeResetState" => Ev::ResetState,
            "PajeNewEvent" => Ev::NewEvent,
            "PajeSetVariable" => Ev::SetVariable,
            "PajeAddVariable" => Ev::AddVariable,
            "PajeSubVariable" => Ev::SubVariable,
            "PajeStartLink" => Ev::StartLink,
            "PajeEndLink" => Ev::EndLink,
            "PajeTraceFile" => Ev::TraceFile,
            _ => Ev::Other,
        }
    }
}

/// Standard field roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Time,
    Alias,
    Type,
    Container,
    Name,
    Value,
    StartContainer,
    EndContainer,
    StartContainerType,
    EndContainerType,
    Key,
    Color,
    Filename,
    Extra,
}

fn role(field: &str) -> Role {
    match field {
        "Time" => Role::Time,
        "Alias" => Role::Alias,
        "Type" | "ContainerType" | "EntityType" => Role::Type,
        "Container" => Role::Container,
        "Name" => Role::Name,
        "Value" => Role::Value,
        "StartContainer" | "SourceContainer" => Role::StartContainer,
        "EndContainer" | "DestContainer" => Role::EndContainer,
        "StartContainerType" | "SourceContainerType" => Role::StartContainerType,
        "EndContainerType" | "DestContainerType" => Role::EndContainerType,
        "Key" => Role::Key,
        "Color" => Role::Color,
        "Filename" | "FileName" => Role::Filename,
        _ => Role::Extra,
    }
}

struct Def {
    ev: Ev,
    name: String,
    fields: Vec<(String, String, Role)>,
}

struct Open {
    ts: i64,
    seq: i64,
    value: String,
    extra: Option<String>,
}

struct LinkHalf {
    ts: i64,
    producer: i32,
    seq: i64,
    value: String,
    extra: Option<String>,
}

/// A file being read through `PajeTraceFile`.
struct Include {
    /// As canonicalized (cycle detection).
    path: PathBuf,
    /// As named (messages).
    shown: String,
    /// The line of the including file that named it.
    at_line: u64,
}

/// What a Paje input must be (for the message refusing binary data).
const PAJE_TEXT: &str = "a text Paje trace (%EventDef header, then event lines)";

/// Most nested `PajeTraceFile` includes.
const MAX_INCLUDE_DEPTH: usize = 32;

/// The streaming Paje parser.
pub struct PajeParser {
    strict: bool,
    batch_rows: usize,
    /// Nanoseconds per unit of the file's times.
    scale: i64,
    tables: Vec<Table>,
    input: super::TextInput,
    /// Longest line accepted (also in included files).
    max_line: usize,
    line: u64,
    /// The file fed (includes are relative to it); None when the input has no path.
    source: Option<PathBuf>,
    /// Files being read through `PajeTraceFile`, outermost first.
    includes: Vec<Include>,
    defs: FastMap<String, Def>,
    in_def: Option<(String, Def)>,
    /// Type alias or name -> type name.
    types: FastMap<String, String>,
    /// Entity value alias or name -> value name.
    values: FastMap<String, String>,
    /// Container identifier (alias, else name) -> producer id.
    by_ident: FastMap<String, i32>,
    /// Container name -> producer id; None when several containers have that name.
    by_name: FastMap<String, Option<i32>>,
    containers: Vec<Container>,
    seqs: Vec<i64>,
    /// (producer, state type) -> the states held.
    states: FastMap<(i32, String), Vec<Open>>,
    vars: FastMap<(i32, String), f64>,
    starts: FastMap<(String, String), Vec<LinkHalf>>,
    ends: FastMap<(String, String), Vec<LinkHalf>>,
    last_ts: i64,
    /// Counts.
    pub stats: Stats,
    /// Lines rejected.
    pub rejected: u64,
    /// The first rejected lines.
    pub problems: Vec<Problem>,
    /// In strict mode, the line that stopped the parse.
    pub fatal: Option<Problem>,
}

/// Splits a Paje event line into fields: blanks separate, double quotes group.
fn split_fields(line: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        if b[i] == b'"' {
            let start = i + 1;
            let end = line[start..].find('"').ok_or("unterminated quoted field")? + start;
            out.push(&line[start..end]);
            i = end + 1;
            if i < b.len() && !b[i].is_ascii_whitespace() {
                return Err("a quoted field must be followed by a blank".into());
            }
        } else {
            let start = i;
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            out.push(&line[start..i]);
        }
    }
    Ok(out)
}

impl PajeParser {
    /// A parser; `scale` is nanoseconds per unit of the file's times (1e9 for seconds).
    pub fn new(strict: bool, batch_rows: usize, scale: i64) -> Self {
        let cap = batch_rows.min(1 << 16);
        PajeParser {
            strict,
            batch_rows,
            scale,
            tables: TABLES.iter().map(|et| Table::new(et.name, et.is_span(), &et.columns(), cap)).collect(),
            input: super::TextInput::new(super::MAX_LINE),
            max_line: super::MAX_LINE,
            line: 0,
            source: None,
            includes: Vec::new(),
            defs: FastMap::default(),
            in_def: None,
            types: FastMap::default(),
            values: FastMap::default(),
            by_ident: FastMap::default(),
            by_name: FastMap::default(),
            containers: Vec::new(),
            seqs: Vec::new(),
            states: FastMap::default(),
            vars: FastMap::default(),
            starts: FastMap::default(),
            ends: FastMap::default(),
            last_ts: i64::MIN,
            stats: Stats::default(),
            rejected: 0,
            problems: Vec::new(),
            fatal: None,
        }
    }

    /// (name, kind, columns) of every event type.
    pub fn table_columns(&self) -> Vec<(String, Vec<(String, PType)>)> {
        self.tables.iter().map(|t| (t.name.clone(), t.columns())).collect()
    }

    /// The containers met, by producer id.
    pub fn containers(&self) -> &[Container] {
        &self.containers
    }

    /// Names the file being fed: `PajeTraceFile` names are relative to its directory.
    pub fn set_source(&mut self, path: &Path) {
        self.source = Some(path.to_path_buf());
    }

    /// Sets the longest line accepted (default [`super::MAX_LINE`]).
    pub fn set_max_line(&mut self, max: usize) {
        self.input = super::TextInput::new(max);
        self.max_line = max;
    }

    /// Parses a chunk (cut anywhere).
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.fatal.is_some() {
            return;
        }
        let mut input = std::mem::replace(&mut self.input, super::TextInput::new(0));
        input.feed(chunk, |it| {
            self.item(it, PAJE_TEXT);
            self.fatal.is_none()
        });
        self.input = input;
    }

    /// Ends the input: the last line, then every state and link still open.
    pub fn finish(&mut self) {
        if self.fatal.is_none() {
            let mut input = std::mem::replace(&mut self.input, super::TextInput::new(0));
            input.finish(|it| {
                self.item(it, PAJE_TEXT);
                self.fatal.is_none()
            });
            self.input = input;
        }
        if self.in_def.is_some() {
            self.reject("the input ends inside an %EventDef".into());
        }
        let end = self.last_ts.max(0);
        let mut keys: Vec<(i32, String)> = self.states.keys().cloned().collect();
        keys.sort();
        for k in keys {
            let n = self.close_states(k.0, &k.1, end, usize::MAX);
            self.stats.states_closed_at_end += n;
        }
        let mut keys: Vec<_> = self.starts.keys().cloned().collect();
        keys.sort();
        for k in keys {
            for s in self.starts.remove(&k).unwrap_or_default() {
                self.stats.unmatched_link_start += 1;
                self.link_row(&k, &s, None);
            }
        }
        let mut keys: Vec<_> = self.ends.keys().cloned().collect();
        keys.sort();
        for k in keys {
            for e in self.ends.remove(&k).unwrap_or_default() {
                self.stats.unmatched_link_end += 1;
                let t = &mut self.tables[T_LINK_END];
                t.start(e.ts, e.producer, e.seq);
                t.set_str(3, &k.0);
                t.set_str(4, &e.value);
                t.set_str(5, &k.1);
                if let Some(x) = &e.extra {
                    t.set_str(6, x);
                }
                t.end();
            }
        }
    }

    /// Batches of types that reached the batch size (all when `all`).
    pub fn take_batches(&mut self, all: bool) -> Vec<(String, RecordBatch)> {
        let mut out = Vec::new();
        for t in &mut self.tables {
            if all || t.rows() >= self.batch_rows || t.str_bytes >= 64 << 20 {
                if let Some(b) = t.take() {
                    out.push((t.name.clone(), b));
                }
            }
        }
        out
    }

    fn reject(&mut self, reason: String) {
        self.rejected += 1;
        // In an included file: the line of the outermost include, the file and line inside.
        let p = match self.includes.first() {
            Some(inc) => {
                let inner = self.includes.last().map_or("?", |i| i.shown.as_str());
                Problem { line: inc.at_line, reason: format!("{inner}:{}: {reason}", self.line) }
            }
            None => Problem { line: self.line, reason },
        };
        if self.strict {
            if self.fatal.is_none() {
                self.fatal = Some(p);
            }
        } else if self.problems.len() < 10 {
            self.problems.push(p);
        }
    }

    /// One item of the input: a line, a line too long, or the news that it is binary (`what`
    /// names what it should have been).
    fn item(&mut self, it: super::Item<'_>, what: &str) {
        match it {
            super::Item::Line(l) => self.line_in(l),
            super::Item::TooLong(max) => {
                self.line += 1;
                self.reject(format!("line longer than {max} bytes (skipped)"));
            }
            super::Item::Binary => {
                self.rejected += 1;
                let line = self.includes.first().map_or(1, |i| i.at_line);
                self.fatal = Some(Problem { line, reason: format!("binary data, not {what}") });
            }
        }
    }

    fn line_in(&mut self, raw: &[u8]) {
        self.line += 1;
        if self.fatal.is_some() {
            return;
        }
        let text = String::from_utf8_lossy(raw);
        let line = text.trim();
        if line.is_empty() || line.starts_with('#') {
            return;
        }
        if let Some(rest) = line.strip_prefix('%') {
            return self.header(rest.trim());
        }
        if self.in_def.is_some() {
            self.reject("event line inside an %EventDef (missing %EndEventDef)".into());
            return;
        }
        if let Err(e) = self.event(line) {
            self.reject(e);
        }
    }

    fn header(&mut self, rest: &str) {
        let mut words = rest.split_whitespace();
        match words.next() {
            Some("EventDef") => {
                let (Some(name), Some(id)) = (words.next(), words.next()) else {
                    return self.reject("%EventDef needs a name and an id".into());
                };
                if self.in_def.is_some() {
                    return self.reject("%EventDef inside another (missing %EndEventDef)".into());
                }
                self.stats.event_defs += 1;
                self.in_def =
                    Some((id.to_string(), Def { ev: Ev::of(name), name: name.to_string(), fields: Vec::new() }));
            }
            Some("EndEventDef") => match self.in_def.take() {
                Some((id, def)) => {
                    self.defs.insert(id, def);
                }
                None => self.reject("%EndEventDef without %EventDef".into()),
            },
            Some(field) => match (&mut self.in_def, words.next()) {
                (Some((_, def)), Some(ty)) => {
                    let r = role(field);
                    def.fields.push((field.to_string(), ty.to_string(), r));
                }
                (Some(_), None) => self.reject(format!("field {field:?} has no type")),
                (None, _) => self.reject(format!("unexpected header line %{rest}")),
            },
            None => {}
        }
    }

    fn time(&self, s: &str) -> Result<i64, String> {
        super::json::decimal_to_ns(s.as_bytes(), self.scale)
            .or_else(|| {
                let v: f64 = s.parse().ok()?;
                let ns = (v * self.scale as f64).round();
                (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
            })
            .ok_or_else(|| format!("time {s:?} is not a number that fits int64 nanoseconds"))
    }

    fn container(&mut self, r: &str) -> Result<i32, String> {
        if let Some(&id) = self.by_ident.get(r) {
            return Ok(id);
        }
        match self.by_name.get(r) {
            Some(Some(id)) => return Ok(*id),
            Some(None) => {
                return Err(format!("container name {r:?} is not unique (several parents have one): use its alias"))
            }
            None => {}
        }
        if r == "0" {
            // The implicit root container, used only when events are placed on it.
            let id = self.new_container(None, "root".into(), "0".into(), None, None);
            return Ok(id);
        }
        Err(format!("unknown container {r:?}"))
    }

    fn new_container(
        &mut self,
        parent: Option<i32>,
        kind: String,
        name: String,
        alias: Option<String>,
        created: Option<i64>,
    ) -> i32 {
        let id = self.containers.len() as i32;
        // PajeNG's identifier: the alias, else the name.
        self.by_ident.insert(alias.clone().unwrap_or_else(|| name.clone()), id);
        self.by_name.entry(name.clone()).and_modify(|v| *v = None).or_insert(Some(id));
        self.stats.containers += 1;
        self.containers.push(Container { id, parent, kind, name, alias, created, destroyed: None });
        self.seqs.push(0);
        id
    }

    fn next_seq(&mut self, p: i32) -> i64 {
        let s = &mut self.seqs[p as usize];
        *s += 1;
        *s - 1
    }

    fn type_name(&self, r: &str) -> String {
        self.types.get(r).cloned().unwrap_or_else(|| r.to_string())
    }

    fn value_name(&self, r: &str) -> String {
        self.values.get(r).cloned().unwrap_or_else(|| r.to_string())
    }

    fn event(&mut self, line: &str) -> Result<(), String> {
        let fields = split_fields(line)?;
        let id = fields[0];
        let def = self.defs.get(id).ok_or_else(|| format!("event id {id:?} has no %EventDef"))?;
        let vals = &fields[1..];
        if vals.len() != def.fields.len() {
            return Err(format!("{} needs {} fields, the line has {}", def.name, def.fields.len(), vals.len()));
        }
        let ev = def.ev;
        let mut get = [None::<&str>; Role::Extra as usize + 1];
        let mut extra: Vec<(&str, &str, &str)> = Vec::new();
        for ((name, ty, r), v) in def.fields.iter().zip(vals) {
            if *r == Role::Extra {
                extra.push((name, ty, v));
            } else {
                get[*r as usize] = Some(v);
            }
        }
        let extra = extra_json(&extra);
        let dname = def.name.clone();
        let need = |r: Role| get[r as usize].ok_or_else(|| format!("{dname} has no {r:?} field"));
        self.stats.events += 1;
        let ts = match get[Role::Time as usize] {
            Some(t) => {
                let ts = self.time(t)?;
                self.last_ts = self.last_ts.max(ts);
                Some(ts)
            }
            None => None,
        };
        let ts_or = |what: &str| ts.ok_or_else(|| format!("{what} has no Time field"));
        match ev {
            Ev::DefContainerType | Ev::DefStateType | Ev::DefEventType | Ev::DefVariableType | Ev::DefLinkType => {
                let name = need(Role::Name)?.to_string();
                if let Some(a) = get[Role::Alias as usize] {
                    self.types.insert(a.to_string(), name.clone());
                }
                self.types.insert(name.clone(), name);
                self.stats.definitions += 1;
            }
            Ev::DefEntityValue => {
                let name = need(Role::Name)?.to_string();
                if let Some(a) = get[Role::Alias as usize] {
                    self.values.insert(a.to_string(), name.clone());
                }
                self.stats.definitions += 1;
            }
            Ev::CreateContainer => {
                let name = need(Role::Name)?.to_string();
                let kind = self.type_name(need(Role::Type)?);
                let parent = match get[Role::Container as usize] {
                    None | Some("0") => None,
                    Some(p) => Some(self.container(p)?),
                };
                let alias = get[Role::Alias as usize].filter(|a| !a.is_empty()).map(str::to_string);
                let ident = alias.as_deref().unwrap_or(&name);
                if self.by_ident.contains_key(ident) {
                    return Err(format!("container {ident:?} created twice"));
                }
                self.new_container(parent, kind, name, alias, ts);
            }
            Ev::DestroyContainer => {
                let t = ts_or("PajeDestroyContainer")?;
                let c = self.container(need(Role::Name)?)?;
                self.containers[c as usize].destroyed = Some(t);
                let mut keys: Vec<(i32, String)> = self.states.keys().filter(|k| k.0 == c).cloned().collect();
                keys.sort();
                for k in keys {
                    let n = self.close_states(c, &k.1, t, usize::MAX);
                    self.stats.states_closed_by_destroy += n;
                }
            }
            Ev::SetState | Ev::PushState | Ev::PopState | Ev::ResetState => {
                let t = ts_or(&format!("{ev:?}"))?;
                let c = self.container(need(Role::Container)?)?;
                let st = self.type_name(need(Role::Type)?);
                match ev {
                    Ev::SetState | Ev::ResetState => {
                        self.close_states(c, &st, t, usize::MAX);
                    }
                    Ev::PopState if self.close_states(c, &st, t, 1) == 0 => {
                        return Err(format!("PajePopState of {st:?} on a container with no state pushed"));
                    }
                    _ => {}
                }
                if matches!(ev, Ev::SetState | Ev::PushState) {
                    let value = self.value_name(need(Role::Value)?);
                    let seq = self.next_seq(c);
                    self.states.entry((c, st)).or_default().push(Open { ts: t, seq, value, extra });
                }
            }
            Ev::NewEvent => {
                let t = ts_or("PajeNewEvent")?;
                let c = self.container(need(Role::Container)?)?;
                let et = self.type_name(need(Role::Type)?);
                let value = self.value_name(get[Role::Value as usize].unwrap_or(""));
                let seq = self.next_seq(c);
                let tb = &mut self.tables[T_EVENT];
                tb.start(t, c, seq);
                tb.set_str(3, &et);
                tb.set_str(4, &value);
                if let Some(x) = &extra {
                    tb.set_str(5, x);
                }
                tb.end();
            }
            Ev::SetVariable | Ev::AddVariable | Ev::SubVariable => {
                let t = ts_or("variable event")?;
                let c = self.container(need(Role::Container)?)?;
                let vt = self.type_name(need(Role::Type)?);
                let raw = need(Role::Value)?;
                let x: f64 = raw.parse().map_err(|_| format!("variable value {raw:?} is not a number"))?;
                let cur = self.vars.entry((c, vt.clone())).or_insert(0.0);
                let op = match ev {
                    Ev::SetVariable => {
                        *cur = x;
                        "set"
                    }
                    Ev::AddVariable => {
                        *cur += x;
                        "add"
                    }
                    _ => {
                        *cur -= x;
                        "sub"
                    }
                };
                let v = *cur;
                let seq = self.next_seq(c);
                let tb = &mut self.tables[T_VAR];
                tb.start(t, c, seq);
                tb.set_str(3, &vt);
                tb.set_f64(4, v);
                tb.set_str(5, op);
                tb.set_f64(6, x);
                if let Some(xx) = &extra {
                    tb.set_str(7, xx);
                }
                tb.end();
            }
            Ev::StartLink | Ev::EndLink => {
                let t = ts_or("link event")?;
                let lt = self.type_name(need(Role::Type)?);
                let key = get[Role::Key as usize].unwrap_or("").to_string();
                let value = self.value_name(get[Role::Value as usize].unwrap_or(""));
                let is_start = ev == Ev::StartLink;
                let end_role = if is_start { Role::StartContainer } else { Role::EndContainer };
                let here = self.container(need(end_role)?)?;
                if let Some(c) = get[Role::Container as usize] {
                    self.container(c)?; // the link's common container must exist
                }
                let seq = self.next_seq(here);
                let half = LinkHalf { ts: t, producer: here, seq, value, extra };
                let k = (lt, key);
                let (mine, theirs) =
                    if is_start { (&mut self.starts, &mut self.ends) } else { (&mut self.ends, &mut self.starts) };
                let other = theirs.get_mut(&k).and_then(|v| v.pop());
                if theirs.get(&k).is_some_and(|v| v.is_empty()) {
                    theirs.remove(&k);
                }
                match other {
                    Some(o) => {
                        let (s, e) = if is_start { (half, o) } else { (o, half) };
                        self.link_row(&k, &s, Some(&e));
                    }
                    None => mine.entry(k).or_default().push(half),
                }
            }
            Ev::TraceFile => {
                let file = need(Role::Filename)?.to_string();
                if let Some(c) = get[Role::Container as usize].filter(|c| *c != "0") {
                    self.container(c)?; // the container whose events the file holds must exist
                }
                self.include(&file)?;
            }
            Ev::Other => {}
        }
        Ok(())
    }

    /// Reads the file a `PajeTraceFile` names, here, as part of this trace.
    fn include(&mut self, file: &str) -> Result<(), String> {
        let base = match (self.includes.last(), &self.source) {
            (Some(inc), _) => inc.path.parent().map(Path::to_path_buf),
            (None, Some(src)) => src.parent().map(Path::to_path_buf),
            (None, None) => return Err(format!("PajeTraceFile {file:?}: the trace has no path to find it from")),
        };
        let path = base.unwrap_or_default().join(file);
        let real = std::fs::canonicalize(&path).map_err(|e| format!("PajeTraceFile {file:?}: {e}"))?;
        let root = self.source.as_ref().and_then(|s| std::fs::canonicalize(s).ok());
        if root.as_ref() == Some(&real) || self.includes.iter().any(|i| i.path == real) {
            return Err(format!("PajeTraceFile {file:?} is a file already being read (a cycle): not followed"));
        }
        if self.includes.len() >= MAX_INCLUDE_DEPTH {
            return Err(format!("PajeTraceFile {file:?}: more than {MAX_INCLUDE_DEPTH} nested includes"));
        }
        let mut f = std::fs::File::open(&real).map_err(|e| format!("PajeTraceFile {file:?}: {e}"))?;
        let at_line = self.includes.first().map_or(self.line, |i| i.at_line);
        self.includes.push(Include { path: real, shown: file.to_string(), at_line });
        self.stats.includes += 1;
        let outer_line = std::mem::replace(&mut self.line, 0);
        let mut input = super::TextInput::new(self.max_line);
        let what = format!("a Paje text trace: PajeTraceFile {file:?} (a compressed file?)");
        let mut buf = vec![0u8; 1 << 20];
        let result = loop {
            let n = match f.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) => break Err(format!("PajeTraceFile {file:?}: {e}")),
            };
            input.feed(&buf[..n], |it| {
                self.item(it, &what);
                self.fatal.is_none()
            });
            if self.fatal.is_some() {
                break Ok(());
            }
        };
        if result.is_ok() && self.fatal.is_none() {
            input.finish(|it| {
                self.item(it, &what);
                self.fatal.is_none()
            });
        }
        self.line = outer_line;
        self.includes.pop();
        result
    }

    /// Closes up to `n` states of (container, type), innermost first; returns how many.
    fn close_states(&mut self, c: i32, st: &str, t: i64, n: usize) -> u64 {
        let key = (c, st.to_string());
        let Some(stack) = self.states.get_mut(&key) else { return 0 };
        let mut closed = Vec::new();
        while closed.len() < n {
            match stack.pop() {
                Some(o) => {
                    let depth = stack.len() as i64;
                    closed.push((o, depth));
                }
                None => break,
            }
        }
        if stack.is_empty() {
            self.states.remove(&key);
        }
        let count = closed.len() as u64;
        let tb = &mut self.tables[T_STATE];
        for (o, depth) in closed {
            tb.start(o.ts, c, o.seq);
            tb.set_i64(DUR, (t - o.ts).max(0));
            tb.set_str(4, st);
            tb.set_str(5, &o.value);
            tb.set_i64(6, depth);
            if let Some(x) = &o.extra {
                tb.set_str(7, x);
            }
            tb.end();
        }
        count
    }

    fn link_row(&mut self, k: &(String, String), s: &LinkHalf, e: Option<&LinkHalf>) {
        let tb = &mut self.tables[T_LINK];
        tb.start(s.ts, s.producer, s.seq);
        tb.set_str(3, &k.0);
        tb.set_str(4, &s.value);
        tb.set_str(5, &k.1);
        if let Some(e) = e {
            tb.set_i64(6, e.producer as i64);
            tb.set_i64(7, e.ts);
        }
        if let Some(x) = s.extra.as_ref().or(e.and_then(|e| e.extra.as_ref())) {
            tb.set_str(8, x);
        }
        tb.end();
    }
}

fn extra_json(extra: &[(&str, &str, &str)]) -> Option<String> {
    if extra.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    out.push(b'{');
    for (i, (name, ty, v)) in extra.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(&mut out, name.as_bytes());
        out.push(b':');
        let _ = ty; // kept as written: Paje numbers are not always valid JSON numbers ("007", "1.")
        write_str(&mut out, v.as_bytes());
    }
    out.push(b'}');
    Some(String::from_utf8_lossy(&out).into_owned())
}

pub mod decl;
#[cfg(test)]
mod tests;

super::chunk_parser!(PajeParser {
    /// One per container (kind = container type, nested by parent; attrs alias, created_ns,
    /// destroyed_ns).
    fn producers(&self) -> Vec<ProducerRow> {
        self.containers
            .iter()
            .map(|c| {
                let mut attrs = Vec::new();
                if let Some(a) = &c.alias {
                    attrs.push(("alias".to_string(), Attr::Str(a.clone())));
                }
                if let Some(t) = c.created {
                    attrs.push(("created_ns".to_string(), Attr::Int(t)));
                }
                if let Some(t) = c.destroyed {
                    attrs.push(("destroyed_ns".to_string(), Attr::Int(t)));
                }
                ProducerRow { id: c.id, parent: c.parent, kind: c.kind.clone(), name: c.name.clone(), attrs }
            })
            .collect()
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let s = &self.stats;
        [
            ("events", s.events),
            ("definitions", s.definitions),
            ("states_closed_at_end", s.states_closed_at_end),
            ("states_closed_by_destroy", s.states_closed_by_destroy),
            ("unmatched_link_start", s.unmatched_link_start),
            ("unmatched_link_end", s.unmatched_link_end),
            ("event_defs", s.event_defs),
            ("containers", s.containers),
            ("includes", s.includes),
            ("rejected", self.rejected),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn problems(&self) -> Vec<super::parser::Problem> {
        self.problems.iter().map(|p| super::parser::Problem::at_line(p.line, p.reason.clone())).collect()
    }

    fn fatal(&self) -> Option<super::parser::Problem> {
        self.fatal.as_ref().map(|p| super::parser::Problem::at_line(p.line, p.reason.clone()))
    }
});
