//! The document around the events: the top-level state machine over the array and object
//! forms (other members skipped, small ones kept as metadata; a bad record resynchronised at
//! the next line; a record longer than `max_record` skipped as it streams by), the line and
//! offset of a problem, and one event object read into `Ev`.

use super::*;

/// Resumable skipping of one top-level JSON value of unknown size.
#[derive(Default)]
pub(super) struct Skipper {
    started: bool,
    depth: u32,
    in_str: bool,
    esc: bool,
    scalar: bool,
}

impl Skipper {
    /// Consumes bytes of the value; returns (bytes consumed, value complete).
    pub(super) fn feed(&mut self, b: &[u8]) -> (usize, bool) {
        for (i, &c) in b.iter().enumerate() {
            if !self.started {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' => continue,
                    b'{' | b'[' => self.depth = 1,
                    b'"' => self.in_str = true,
                    _ => self.scalar = true,
                }
                self.started = true;
                continue;
            }
            if self.in_str {
                if self.esc {
                    self.esc = false;
                } else if c == b'\\' {
                    self.esc = true;
                } else if c == b'"' {
                    self.in_str = false;
                    if self.depth == 0 {
                        return (i + 1, true);
                    }
                }
            } else if self.scalar {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                    return (i, true);
                }
            } else {
                match c {
                    b'"' => self.in_str = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth -= 1;
                        if self.depth == 0 {
                            return (i + 1, true);
                        }
                    }
                    _ => {}
                }
            }
        }
        (b.len(), false)
    }
}

pub(super) enum Top {
    Start,
    Member {
        first: bool,
    },
    Next,
    Skip {
        sk: Skipper,
        key: String,
        cap: Option<Vec<u8>>,
    },
    Events {
        top_array: bool,
    },
    Resync {
        top_array: bool,
        line_start: bool,
    },
    /// Skipping an event record longer than `max_record`.
    Oversized {
        sk: Skipper,
        top_array: bool,
    },
    Done,
    Stopped,
}

impl ChromeParser {
    // -- positions and problems -------------------------------------------------------

    pub(super) fn line_at(&mut self, buf: &[u8], pos: usize) -> u64 {
        if pos < self.lc_pos {
            self.lc_pos = 0;
            self.lc_line = self.base_line;
        }
        let end = pos.min(buf.len());
        self.lc_line += buf[self.lc_pos..end].iter().filter(|&&c| c == b'\n').count() as u64;
        self.lc_pos = end;
        self.lc_line
    }

    pub(super) fn problem_at(&mut self, line: u64, offset: u64, reason: String) {
        self.rejected += 1;
        let p = Problem { line, offset, reason };
        if self.opts.strict {
            self.fatal = Some(p);
        } else if self.problems.len() < KEEP_PROBLEMS {
            self.problems.push(p);
        }
    }

    pub(super) fn problem(&mut self, buf: &[u8], pos: usize, reason: String) {
        let line = self.line_at(buf, pos);
        self.problem_at(line, self.base_off + pos as u64, reason);
    }

    // -- the top-level state machine ------------------------------------------------

    pub(super) fn run(&mut self, eof: bool) {
        let buf = std::mem::take(&mut self.buf);
        let mut state = std::mem::replace(&mut self.state, Top::Stopped);
        let mut pos = 0;
        loop {
            if self.fatal.is_some() {
                state = Top::Stopped;
            }
            let mut cur = Cursor::new(&buf, pos, eof);
            match &mut state {
                Top::Stopped => break,
                Top::Start => {
                    if pos == 0 && buf.starts_with(b"\xEF\xBB\xBF") {
                        pos = 3;
                        continue;
                    }
                    match cur.peek_ws("'[' or '{'") {
                        Ok(b'[') => {
                            pos = cur.pos + 1;
                            state = Top::Events { top_array: true };
                        }
                        Ok(b'{') => {
                            pos = cur.pos + 1;
                            state = Top::Member { first: true };
                        }
                        Ok(_) => {
                            pos = cur.pos;
                            self.problem(&buf, pos, "not a Chrome trace: expected '[' or '{' at the start".into());
                            state = Top::Stopped;
                        }
                        Err(_) => break,
                    }
                }
                Top::Member { first } => {
                    let first = *first;
                    match cur.peek_ws("a key") {
                        Ok(b'}') if first => {
                            pos = cur.pos + 1;
                            state = Top::Done;
                            continue;
                        }
                        Err(JErr::Incomplete) => break,
                        _ => {}
                    }
                    let r = cur.string().and_then(|k| {
                        cur.expect(b':', "':'")?;
                        let c = cur.peek_ws("a value")?;
                        Ok((k, c))
                    });
                    match r {
                        Ok((k, c)) if k.eq(&buf, b"traceEvents") => {
                            pos = cur.pos;
                            if c == b'[' {
                                pos += 1;
                                state = Top::Events { top_array: false };
                            } else {
                                self.problem(&buf, pos, "\"traceEvents\" is not an array".into());
                                state = Top::Stopped;
                            }
                        }
                        Ok((k, _)) => {
                            pos = cur.pos;
                            let key = k.text(&buf).into_owned();
                            let keep = !matches!(key.as_str(), "systemTraceEvents" | "stackFrames" | "samples");
                            state = Top::Skip { sk: Skipper::default(), key, cap: keep.then(Vec::new) };
                        }
                        Err(JErr::Incomplete) => break,
                        Err(JErr::Syntax { pos: p, what }) => {
                            pos = p.min(buf.len());
                            self.problem(&buf, pos, format!("invalid top-level object: expected {what}"));
                            state = Top::Stopped;
                        }
                    }
                }
                Top::Next => match cur.next_member(b'}', "',' or '}'") {
                    Ok(true) => {
                        pos = cur.pos;
                        state = Top::Member { first: false };
                    }
                    Ok(false) => {
                        pos = cur.pos;
                        state = Top::Done;
                    }
                    Err(JErr::Incomplete) => break,
                    Err(JErr::Syntax { pos: p, what }) => {
                        pos = p.min(buf.len());
                        self.problem(&buf, pos, format!("invalid top-level object: expected {what}"));
                        state = Top::Stopped;
                    }
                },
                Top::Skip { sk, key, cap } => {
                    let (n, done) = sk.feed(&buf[pos..]);
                    if let Some(c) = cap {
                        if c.len() + n <= MAX_META {
                            c.extend_from_slice(&buf[pos..pos + n]);
                        } else {
                            *cap = None;
                        }
                    }
                    pos += n;
                    if !done {
                        break;
                    }
                    if let Some(c) = cap.take() {
                        let text = String::from_utf8_lossy(c.trim_ascii()).into_owned();
                        self.metadata.push((std::mem::take(key), text));
                    }
                    state = Top::Next;
                }
                Top::Events { top_array } => {
                    let top_array = *top_array;
                    let Ok(c) = cur.peek_ws("an event") else {
                        pos = cur.pos;
                        break;
                    };
                    pos = cur.pos;
                    match c {
                        b',' => pos += 1,
                        b']' => {
                            pos += 1;
                            state = if top_array { Top::Done } else { Top::Next };
                        }
                        b'{' => {
                            if !eof && buf.len() - pos < self.need {
                                break;
                            }
                            let mut ev = std::mem::take(&mut self.ev);
                            ev.clear();
                            ev.start = pos;
                            match parse_event(&mut cur, &mut ev) {
                                Ok(()) if cur.pos - pos > self.opts.max_record => {
                                    // Whole in this chunk, but over the limit all the same.
                                    self.need = 0;
                                    self.stats.records += 1;
                                    let max = self.opts.max_record;
                                    self.problem(&buf, pos, format!("event longer than {max} bytes (skipped)"));
                                    pos = cur.pos;
                                    self.ev = ev;
                                }
                                Ok(()) => {
                                    self.need = 0;
                                    self.stats.records += 1;
                                    pos = cur.pos;
                                    if let Err(reason) = self.apply(&buf, &ev) {
                                        self.problem(&buf, ev.start, reason);
                                    }
                                    self.ev = ev;
                                }
                                Err(JErr::Incomplete) if buf.len() - pos > self.opts.max_record => {
                                    self.ev = ev;
                                    self.need = 0;
                                    self.stats.records += 1;
                                    let max = self.opts.max_record;
                                    self.problem(&buf, pos, format!("event longer than {max} bytes (skipped)"));
                                    state = Top::Oversized { sk: Skipper::default(), top_array };
                                }
                                Err(JErr::Incomplete) => {
                                    // Wait for more input, but not for more than the longest
                                    // record accepted (plus one byte, to tell it is too long).
                                    let have = buf.len() - pos;
                                    self.need = (2 * have).min(self.opts.max_record + 1).max(have + 1);
                                    self.ev = ev;
                                    break;
                                }
                                Err(JErr::Syntax { pos: p, what }) => {
                                    self.ev = ev;
                                    self.stats.records += 1;
                                    let reason = if p >= buf.len() {
                                        "truncated event at the end of the input".to_string()
                                    } else {
                                        let col = match buf[..p].iter().rposition(|&c| c == b'\n') {
                                            Some(nl) => p - nl,
                                            None => self.base_col + p + 1,
                                        };
                                        format!("invalid JSON at column {col}: expected {what}")
                                    };
                                    self.problem(&buf, pos, reason);
                                    pos += 1;
                                    state = Top::Resync { top_array, line_start: false };
                                }
                            }
                        }
                        _ => {
                            self.stats.records += 1;
                            self.problem(&buf, pos, format!("expected an event object, found {:?}", c as char));
                            pos += 1;
                            state = Top::Resync { top_array, line_start: false };
                        }
                    }
                }
                Top::Oversized { sk, top_array } => {
                    let (n, done) = sk.feed(&buf[pos..]);
                    pos += n;
                    if !done {
                        break;
                    }
                    state = Top::Events { top_array: *top_array };
                }
                Top::Resync { top_array, line_start } => {
                    // Skip to the next line that starts with '{' (or ']').
                    let top_array = *top_array;
                    let mut found = None;
                    let mut ls = *line_start;
                    for (i, &c) in buf[pos..].iter().enumerate() {
                        if ls {
                            match c {
                                b' ' | b'\t' | b'\r' | b'\n' => {}
                                b'{' | b']' => {
                                    found = Some(pos + i);
                                    break;
                                }
                                _ => ls = false,
                            }
                        } else if c == b'\n' {
                            ls = true;
                        }
                    }
                    match found {
                        Some(p) => {
                            pos = p;
                            state = Top::Events { top_array };
                        }
                        None => {
                            pos = buf.len();
                            *line_start = ls;
                            break;
                        }
                    }
                }
                Top::Done => match cur.peek_ws("the end") {
                    Ok(_) => {
                        pos = cur.pos;
                        self.problem(&buf, pos, "data after the end of the trace".into());
                        state = Top::Stopped;
                    }
                    Err(_) => {
                        pos = buf.len();
                        break;
                    }
                },
            }
        }
        if self.fatal.is_some() {
            state = Top::Stopped;
        }
        self.state = state;
        self.buf = buf;
        self.drain(pos);
    }

    pub(super) fn drain(&mut self, pos: usize) {
        let buf = std::mem::take(&mut self.buf);
        let pos = pos.min(buf.len());
        let line = self.line_at(&buf, pos);
        self.base_col = match buf[..pos].iter().rposition(|&c| c == b'\n') {
            Some(nl) => pos - nl - 1,
            None => self.base_col + pos,
        };
        self.buf = buf;
        self.base_line = line;
        self.base_off += pos as u64;
        self.buf.drain(..pos);
        self.lc_pos = 0;
        self.lc_line = line;
    }
}

/// Reads one event object at the cursor (which is on its `{`) into `ev`.
pub(super) fn parse_event(cur: &mut Cursor<'_>, ev: &mut Ev) -> Result<(), JErr> {
    cur.pos += 1;
    if cur.peek_ws("a key or '}'")? == b'}' {
        cur.pos += 1;
        return Ok(());
    }
    loop {
        let k = cur.string()?;
        cur.expect(b':', "':'")?;
        let raw = k.raw(cur.buf);
        let key: &[u8] = if k.escaped { b"" } else { raw };
        if key == b"args" {
            let c = cur.peek_ws("a value")?;
            if c == b'{' {
                let start = cur.pos;
                cur.pos += 1;
                ev.arg_list.clear();
                if cur.peek_ws("a key or '}'")? == b'}' {
                    cur.pos += 1;
                } else {
                    loop {
                        let ak = cur.string()?;
                        cur.expect(b':', "':'")?;
                        let av = cur.value()?;
                        ev.arg_list.push((ak, av));
                        if !cur.next_member(b'}', "',' or '}'")? {
                            break;
                        }
                    }
                }
                ev.args = Some(Value::Nested { start, end: cur.pos, object: true });
            } else {
                ev.args = Some(cur.value()?);
                ev.arg_list.clear();
            }
        } else {
            let v = cur.value()?;
            let slot = match key {
                b"ph" => &mut ev.ph,
                b"ts" => &mut ev.ts,
                b"name" => &mut ev.name,
                b"cat" => &mut ev.cat,
                b"pid" => &mut ev.pid,
                b"tid" => &mut ev.tid,
                b"dur" => &mut ev.dur,
                b"tts" => &mut ev.tts,
                b"tdur" => &mut ev.tdur,
                b"id" => &mut ev.id,
                b"id2" => &mut ev.id2,
                b"s" => &mut ev.s,
                b"bp" => &mut ev.bp,
                b"sf" => &mut ev.sf,
                b"stack" => &mut ev.stack,
                _ => {
                    if !cur.next_member(b'}', "',' or '}'")? {
                        return Ok(());
                    }
                    continue;
                }
            };
            *slot = Some(v);
        }
        if !cur.next_member(b'}', "',' or '}'")? {
            return Ok(());
        }
    }
}
