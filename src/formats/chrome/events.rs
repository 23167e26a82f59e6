//! One event applied: its phase made rows (`X` and `B`/`E` slices, `b`/`e` async slices matched
//! by category, id and scope, flow steps, instants, counter series, samples, `M` metadata naming
//! producers), and the halves still open at the end of the input kept and counted.

use super::*;

impl ChromeParser {
    pub(super) fn producer(&mut self, buf: &[u8], pid: Option<Value>, tid: Option<Value>) -> Result<i32, String> {
        let pid_raw = id_bytes(buf, pid, "pid")?.unwrap_or(b"0");
        let p = match self.procs.get(pid_raw) {
            Some(&p) => p,
            None => {
                let p = self.new_producer(None, "process", pid_raw, None);
                self.procs.insert(pid_raw.to_vec(), p);
                p
            }
        };
        let Some(tid_raw) = id_bytes(buf, tid, "tid")? else { return Ok(p) };
        self.key.clear();
        self.key.extend_from_slice(&p.to_le_bytes());
        self.key.extend_from_slice(tid_raw);
        if let Some(&t) = self.threads.get(self.key.as_slice()) {
            return Ok(t);
        }
        let t = self.new_producer(Some(p), "thread", pid_raw, Some(tid_raw));
        self.threads.insert(self.key.clone(), t);
        Ok(t)
    }

    pub(super) fn new_producer(
        &mut self,
        parent: Option<i32>,
        kind: &'static str,
        pid: &[u8],
        tid: Option<&[u8]>,
    ) -> i32 {
        let id = self.producers.len() as i32;
        self.producers.push(Producer {
            id,
            parent,
            kind,
            name: None,
            pid: String::from_utf8_lossy(pid).into_owned(),
            tid: tid.map(|t| String::from_utf8_lossy(t).into_owned()),
            sort_index: None,
            labels: None,
        });
        self.seqs.push(0);
        self.open.push(Vec::new());
        id
    }

    /// A start half waiting for its end (a recycled record): where and when it began, its
    /// names and its args as raw JSON.
    pub(super) fn open_record(
        &mut self,
        at: (i64, i64, i32),
        tts: Option<i64>,
        name: &str,
        cat: &str,
        args: &[u8],
    ) -> Open {
        let mut o = self.spare.pop().unwrap_or_default();
        (o.ts, o.seq, o.producer, o.tts) = (at.0, at.1, at.2, tts);
        o.name.clear();
        o.name.push_str(name);
        o.cat.clear();
        o.cat.push_str(cat);
        o.args.clear();
        o.args.extend_from_slice(args);
        o
    }

    /// Ends the row being written in table `k` (a matched pair) with the args of its start
    /// half `o` and those of the closing event, then recycles `o`.
    pub(super) fn close_pair(&mut self, k: usize, o: Open, buf: &[u8], end_args: &[(Str, Value)]) {
        let mut list = std::mem::take(&mut self.tmp_args);
        arg_list(&o.args, &mut list);
        let t = &mut self.tables[k];
        let (rem, end_rem) = (t.col("args"), t.col("end_args"));
        self.sink.put(t, false, &o.args, &list, rem);
        self.sink.put(t, true, buf, end_args, end_rem);
        t.t.end();
        self.tmp_args = list;
        self.spare.push(o);
    }

    pub(super) fn next_seq(&mut self, p: i32) -> i64 {
        let s = &mut self.seqs[p as usize];
        *s += 1;
        *s - 1
    }

    pub(super) fn apply(&mut self, buf: &[u8], ev: &Ev) -> Result<(), String> {
        let ph = match ev.ph {
            Some(Value::Str(s)) if s.end > s.start => {
                let t = s.text(buf);
                if t.chars().count() != 1 {
                    return Err(format!("unknown phase {t:?}: expected one character such as X, B, E, i, C, M"));
                }
                t.as_bytes()[0]
            }
            Some(_) => return Err("\"ph\" is not a one-character string".into()),
            None => return Err("no \"ph\" (phase)".into()),
        };
        let name = opt_str(buf, ev.name, "name")?;
        let cat = opt_str(buf, ev.cat, "cat")?;
        if let Some(Value::Nested { object: false, start, end }) = ev.args {
            if !buf[start + 1..end - 1].iter().all(u8::is_ascii_whitespace) {
                return Err("\"args\" is not an object".into());
            }
        } else if !matches!(ev.args, None | Some(Value::Nested { object: true, .. })) {
            return Err("\"args\" is not an object".into());
        }
        if ph == b'M' {
            return self.metadata_event(buf, ev, &name);
        }
        let ts = match ev.ts {
            Some(v) => ns(buf, v, "ts")?,
            None => return Err("no \"ts\" (timestamp)".into()),
        };
        let producer = self.producer(buf, ev.pid, ev.tid)?;
        let tts = ev.tts.map(|v| ns(buf, v, "tts")).transpose()?;
        match ph {
            b'X' => {
                let dur = ev.dur.map(|v| ns(buf, v, "dur")).transpose()?;
                match dur {
                    Some(d) if d < 0 => return Err(format!("negative \"dur\" ({d} ns)")),
                    Some(d) => {
                        let tdur = ev.tdur.map(|v| ns(buf, v, "tdur")).transpose()?;
                        let seq = self.next_seq(producer);
                        let t = &mut self.tables[T_SLICE];
                        t.t.start(ts, producer, seq);
                        t.t.set_i64(DUR, d);
                        set_names(t, &name, &cat);
                        t.t.set_str(t.col("phase"), "X");
                        if let Some(v) = tts {
                            t.t.set_i64(t.col("thread_ts"), v);
                        }
                        if let Some(v) = tdur {
                            t.t.set_i64(t.col("thread_dur"), v);
                        }
                        let rem = t.col("args");
                        self.sink.put(t, false, buf, &ev.arg_list, rem);
                        t.t.end();
                    }
                    None => {
                        // A complete event without its duration: a slice that never ended.
                        self.stats.unmatched_begin += 1;
                        let seq = self.next_seq(producer);
                        let t = &mut self.tables[T_SLICE_BEGIN];
                        t.t.start(ts, producer, seq);
                        set_names(t, &name, &cat);
                        t.t.set_str(t.col("phase"), "X");
                        if let Some(v) = tts {
                            t.t.set_i64(t.col("thread_ts"), v);
                        }
                        let rem = t.col("args");
                        self.sink.put(t, false, buf, &ev.arg_list, rem);
                        t.t.end();
                    }
                }
            }
            b'B' => {
                let seq = self.next_seq(producer);
                let o = self.open_record((ts, seq, producer), tts, &name, &cat, ev.args.map_or(&[], |v| v.raw(buf)));
                self.open[producer as usize].push(o);
            }
            b'E' => {
                let seq = self.next_seq(producer);
                match self.open[producer as usize].pop() {
                    Some(o) if ts < o.ts => {
                        let msg = format!("\"E\" at {} us ends before its \"B\" at {} us", fmt_us(ts), fmt_us(o.ts));
                        self.open[producer as usize].push(o);
                        return Err(msg);
                    }
                    Some(o) => {
                        let t = &mut self.tables[T_SLICE];
                        t.t.start(o.ts, producer, o.seq);
                        t.t.set_i64(DUR, ts - o.ts);
                        set_names(
                            t,
                            if o.name.is_empty() { &name } else { &o.name },
                            if o.cat.is_empty() { &cat } else { &o.cat },
                        );
                        t.t.set_str(t.col("phase"), "B");
                        if let Some(v) = o.tts {
                            t.t.set_i64(t.col("thread_ts"), v);
                            if let Some(e) = tts {
                                t.t.set_i64(t.col("thread_dur"), e - v);
                            }
                        }
                        self.close_pair(T_SLICE, o, buf, &ev.arg_list);
                    }
                    None => {
                        self.stats.unmatched_end += 1;
                        let t = &mut self.tables[T_SLICE_END];
                        t.t.start(ts, producer, seq);
                        set_names(t, &name, &cat);
                        if let Some(v) = tts {
                            t.t.set_i64(t.col("thread_ts"), v);
                        }
                        let rem = t.col("args");
                        self.sink.put(t, false, buf, &ev.arg_list, rem);
                        t.t.end();
                    }
                }
            }
            b'I' | b'i' => {
                let scope = match ev.s {
                    Some(v) => opt_str(buf, Some(v), "s")?,
                    None => "t".into(),
                };
                let seq = self.next_seq(producer);
                let t = &mut self.tables[T_INSTANT];
                t.t.start(ts, producer, seq);
                set_names(t, &name, &cat);
                t.t.set_str(t.col("scope"), &scope);
                let rem = t.col("args");
                self.sink.put(t, false, buf, &ev.arg_list, rem);
                t.t.end();
            }
            b'C' => {
                let id = id_text(buf, ev.id, "id")?;
                for &(k, v) in &ev.arg_list {
                    let (x, exact) = match v {
                        Value::Num(n) => (n.as_f64(buf), n.as_i64(buf)),
                        _ => {
                            self.stats.skipped_counter_args += 1;
                            continue;
                        }
                    };
                    let seq = self.next_seq(producer);
                    let t = &mut self.tables[T_COUNTER];
                    t.t.start(ts, producer, seq);
                    set_names(t, &name, &cat);
                    if let Some(id) = &id {
                        t.t.set_str(t.col("id"), id);
                    }
                    t.t.set_str(t.col("series"), &k.text(buf));
                    t.t.set_f64(t.col("value"), x);
                    if let Some(i) = exact {
                        // An integer goes back out as the integer it was (a float may not hold it).
                        t.t.set_i64(t.col("int_value"), i);
                    }
                    t.t.end();
                }
            }
            b'b' | b'S' | b'e' | b'F' | b'n' | b'T' | b'p' => {
                let (id, local) = self.async_id(buf, ev)?;
                let Some(id) = id else {
                    return Err(format!("async event \"{}\" has no \"id\" or \"id2\"", ph as char));
                };
                self.key.clear();
                self.key.extend_from_slice(cat.as_bytes());
                self.key.push(0);
                self.key.extend_from_slice(id.as_bytes());
                if local == Some(true) {
                    self.key.push(0);
                    self.key
                        .extend_from_slice(&self.producers[producer as usize].parent.unwrap_or(producer).to_le_bytes());
                }
                let seq = self.next_seq(producer);
                match ph {
                    b'b' | b'S' => {
                        let args = ev.args.map_or(&[][..], |v| v.raw(buf));
                        let mut o = self.open_record((ts, seq, producer), None, &name, &cat, args);
                        o.id = id;
                        o.id_local = local;
                        let key = self.key.clone();
                        self.open_async.entry(key).or_default().push(o);
                    }
                    b'e' | b'F' => {
                        let open = self.open_async.get_mut(self.key.as_slice()).and_then(|v| v.pop());
                        if self.open_async.get(self.key.as_slice()).is_some_and(|v| v.is_empty()) {
                            self.open_async.remove(self.key.as_slice());
                        }
                        match open {
                            Some(o) if ts < o.ts => {
                                let msg =
                                    format!("\"e\" at {} us ends before its \"b\" at {} us", fmt_us(ts), fmt_us(o.ts));
                                let key = self.key.clone();
                                self.open_async.entry(key).or_default().push(o);
                                return Err(msg);
                            }
                            Some(o) => {
                                let t = &mut self.tables[T_ASYNC];
                                t.t.start(o.ts, o.producer, o.seq);
                                t.t.set_i64(DUR, ts - o.ts);
                                set_names(t, if o.name.is_empty() { &name } else { &o.name }, &o.cat);
                                t.t.set_str(t.col("id"), &o.id);
                                if let Some(l) = o.id_local {
                                    t.t.set_bool(t.col("id_local"), l);
                                }
                                self.close_pair(T_ASYNC, o, buf, &ev.arg_list);
                            }
                            None => {
                                self.stats.unmatched_async_end += 1;
                                self.async_row(T_ASYNC_END, buf, ev, ts, producer, seq, &name, &cat, &id, local);
                            }
                        }
                    }
                    _ => self.async_row(T_ASYNC_INSTANT, buf, ev, ts, producer, seq, &name, &cat, &id, local),
                }
            }
            b's' | b't' | b'f' => {
                let Some(id) = id_text(buf, ev.id, "id")? else { return Err("flow event has no \"id\"".into()) };
                let bp = opt_str(buf, ev.bp, "bp")?;
                self.key.clear();
                for part in [cat.as_bytes(), name.as_bytes(), id.as_bytes()] {
                    self.key.extend_from_slice(part);
                    self.key.push(0);
                }
                let seq = self.next_seq(producer);
                let prev = if ph == b's' { None } else { self.flows.remove(self.key.as_slice()) };
                if ph == b's' {
                    if let Some(old) = self.flows.remove(self.key.as_slice()) {
                        self.flow_row(&old, None, "");
                    }
                }
                let step =
                    FlowStep { ts, producer, seq, phase: ph, name: name.into_owned(), cat: cat.into_owned(), id };
                match prev {
                    Some(p) => self.flow_row(&p, Some(&step), &bp),
                    None if ph == b'f' => {
                        self.flow_row(&step, None, &bp);
                        return Ok(());
                    }
                    None => {}
                }
                if ph != b'f' {
                    self.flows.insert(self.key.clone(), step);
                }
            }
            b'P' => {
                let sf = id_text(buf, ev.sf, "sf")?;
                let seq = self.next_seq(producer);
                let t = &mut self.tables[T_SAMPLE];
                t.t.start(ts, producer, seq);
                set_names(t, &name, &cat);
                if let Some(sf) = sf {
                    t.t.set_str(t.col("sf"), &sf);
                }
                if let Some(st) = ev.stack {
                    t.t.set_str(t.col("stack"), &String::from_utf8_lossy(st.raw(buf)));
                }
                let rem = t.col("args");
                self.sink.put(t, false, buf, &ev.arg_list, rem);
                t.t.end();
            }
            _ => {
                let id = id_text(buf, ev.id, "id")?;
                let seq = self.next_seq(producer);
                self.other_row(buf, ev, ts, producer, seq, ph, &name, &cat, id.as_deref());
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn other_row(
        &mut self,
        buf: &[u8],
        ev: &Ev,
        ts: i64,
        producer: i32,
        seq: i64,
        ph: u8,
        name: &str,
        cat: &str,
        id: Option<&str>,
    ) {
        let t = &mut self.tables[T_OTHER];
        t.t.start(ts, producer, seq);
        set_names(t, name, cat);
        t.t.set_str(t.col("phase"), &(ph as char).to_string());
        if let Some(id) = id {
            t.t.set_str(t.col("id"), id);
        }
        if let Some(a) = ev.args {
            t.t.set_str(t.col("args"), &String::from_utf8_lossy(a.raw(buf)));
        }
        t.t.end();
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn async_row(
        &mut self,
        ti: usize,
        buf: &[u8],
        ev: &Ev,
        ts: i64,
        producer: i32,
        seq: i64,
        name: &str,
        cat: &str,
        id: &str,
        local: Option<bool>,
    ) {
        let t = &mut self.tables[ti];
        t.t.start(ts, producer, seq);
        set_names(t, name, cat);
        t.t.set_str(t.col("id"), id);
        if let Some(l) = local {
            t.t.set_bool(t.col("id_local"), l);
        }
        let rem = t.col("args");
        self.sink.put(t, false, buf, &ev.arg_list, rem);
        t.t.end();
    }

    pub(super) fn async_id(&self, buf: &[u8], ev: &Ev) -> Result<(Option<String>, Option<bool>), String> {
        if let Some(Value::Nested { start, end, object: true }) = ev.id2 {
            let mut list = Vec::new();
            arg_list(&buf[start..end], &mut list);
            let sub = &buf[start..end];
            for (k, v) in list {
                let local = if k.eq(sub, b"local") {
                    true
                } else if k.eq(sub, b"global") {
                    false
                } else {
                    continue;
                };
                return Ok((id_text(sub, Some(v), "id2")?, Some(local)));
            }
            return Err("\"id2\" has neither \"local\" nor \"global\"".into());
        }
        if ev.id2.is_some() {
            return Err("\"id2\" is not an object".into());
        }
        Ok((id_text(buf, ev.id, "id")?, None))
    }

    pub(super) fn flow_row(&mut self, src: &FlowStep, dst: Option<&FlowStep>, bp: &str) {
        let t = &mut self.tables[T_FLOW];
        t.t.start(src.ts, src.producer, src.seq);
        set_names(t, &src.name, &src.cat);
        t.t.set_str(t.col("id"), &src.id);
        t.t.set_str(t.col("src_phase"), &(src.phase as char).to_string());
        match dst {
            Some(d) => {
                t.t.set_i64(t.col("dst_producer"), d.producer as i64);
                t.t.set_i64(t.col("dst_ts"), d.ts);
                t.t.set_str(t.col("dst_phase"), &(d.phase as char).to_string());
            }
            None => self.stats.unterminated_flows += 1,
        }
        if !bp.is_empty() {
            t.t.set_str(t.col("bp"), bp);
        }
        t.t.end();
    }

    pub(super) fn metadata_event(&mut self, buf: &[u8], ev: &Ev, name: &str) -> Result<(), String> {
        let which = match name {
            "process_name" | "process_labels" | "process_sort_index" => 0,
            "thread_name" | "thread_sort_index" => 1,
            _ => {
                // Other metadata (num_cpus, trace config, ...) is kept as it came.
                let producer = self.producer(buf, ev.pid, ev.tid)?;
                let ts = ev.ts.map(|v| ns(buf, v, "ts")).transpose()?.unwrap_or(0);
                let id = id_text(buf, ev.id, "id")?;
                let cat = opt_str(buf, ev.cat, "cat")?;
                let seq = self.next_seq(producer);
                self.other_row(buf, ev, ts, producer, seq, b'M', name, &cat, id.as_deref());
                return Ok(());
            }
        };
        let p = if which == 0 { self.producer(buf, ev.pid, None)? } else { self.producer(buf, ev.pid, ev.tid)? };
        let want: &[u8] = match name {
            "process_name" | "thread_name" => b"name",
            "process_labels" => b"labels",
            _ => b"sort_index",
        };
        let Some(&(_, v)) = ev.arg_list.iter().find(|(k, _)| k.eq(buf, want)) else {
            return Err(format!("metadata event {name:?} has no args.{}", String::from_utf8_lossy(want)));
        };
        let prod = &mut self.producers[p as usize];
        match (want, v) {
            (b"name", Value::Str(s)) => prod.name = Some(s.text(buf).into_owned()),
            (b"labels", Value::Str(s)) => prod.labels = Some(s.text(buf).into_owned()),
            (b"sort_index", Value::Num(n)) => match n.as_i64(buf) {
                Some(i) => prod.sort_index = Some(i),
                None => return Err(format!("{name}: args.sort_index is not an integer")),
            },
            _ => return Err(format!("{name}: args.{} has the wrong type", String::from_utf8_lossy(want))),
        }
        self.stats.metadata += 1;
        Ok(())
    }

    /// Moves everything still open at the end of the input to the unmatched tables.
    pub(super) fn close_open(&mut self) {
        let mut list = std::mem::take(&mut self.tmp_args);
        for p in 0..self.open.len() {
            for o in std::mem::take(&mut self.open[p]) {
                self.stats.unmatched_begin += 1;
                arg_list(&o.args, &mut list);
                let t = &mut self.tables[T_SLICE_BEGIN];
                t.t.start(o.ts, o.producer, o.seq);
                set_names(t, &o.name, &o.cat);
                t.t.set_str(t.col("phase"), "B");
                if let Some(v) = o.tts {
                    t.t.set_i64(t.col("thread_ts"), v);
                }
                let rem = t.col("args");
                self.sink.put(t, false, &o.args, &list, rem);
                t.t.end();
            }
        }
        let mut keys: Vec<Vec<u8>> = self.open_async.keys().cloned().collect();
        keys.sort();
        for k in keys {
            for o in self.open_async.remove(&k).unwrap_or_default() {
                self.stats.unmatched_async_begin += 1;
                arg_list(&o.args, &mut list);
                let t = &mut self.tables[T_ASYNC_BEGIN];
                t.t.start(o.ts, o.producer, o.seq);
                set_names(t, &o.name, &o.cat);
                t.t.set_str(t.col("id"), &o.id);
                if let Some(l) = o.id_local {
                    t.t.set_bool(t.col("id_local"), l);
                }
                let rem = t.col("args");
                self.sink.put(t, false, &o.args, &list, rem);
                t.t.end();
            }
        }
        let mut flows: Vec<FlowStep> = self.flows.drain().map(|(_, v)| v).collect();
        flows.sort_by_key(|f| (f.ts, f.producer, f.seq));
        for f in flows {
            self.flow_row(&f, None, "");
        }
        self.tmp_args = list;
    }
}

pub(super) fn set_names(t: &mut Tbl, name: &str, cat: &str) {
    t.t.set_str(t.col("name"), name);
    t.t.set_str(t.col("cat"), cat);
}

pub(super) fn fmt_us(ns: i64) -> String {
    let mut s = Vec::new();
    write_us(&mut s, ns);
    String::from_utf8(s).unwrap_or_default()
}

pub(super) fn ns(buf: &[u8], v: Value, what: &str) -> Result<i64, String> {
    match v {
        Value::Num(n) => json::decimal_to_ns(n.raw(buf), 1000).ok_or_else(|| {
            format!("\"{what}\" {} us does not fit in int64 nanoseconds", String::from_utf8_lossy(n.raw(buf)))
        }),
        _ => Err(format!("\"{what}\" is not a number (microseconds)")),
    }
}

pub(super) fn opt_str<'a>(buf: &'a [u8], v: Option<Value>, what: &str) -> Result<std::borrow::Cow<'a, str>, String> {
    match v {
        None | Some(Value::Null) => Ok("".into()),
        Some(Value::Str(s)) => Ok(s.text(buf)),
        Some(_) => Err(format!("\"{what}\" is not a string")),
    }
}

/// The bytes naming a pid/tid (number text or string contents).
pub(super) fn id_bytes<'a>(buf: &'a [u8], v: Option<Value>, what: &str) -> Result<Option<&'a [u8]>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Num(n)) if n.int => Ok(Some(n.raw(buf))),
        Some(Value::Str(s)) => Ok(Some(s.raw(buf))),
        Some(_) => Err(format!("\"{what}\" is not an integer or a string")),
    }
}

pub(super) fn id_text(buf: &[u8], v: Option<Value>, what: &str) -> Result<Option<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Num(n)) => Ok(Some(String::from_utf8_lossy(n.raw(buf)).into_owned())),
        Some(Value::Str(s)) => Ok(Some(s.text(buf).into_owned())),
        Some(_) => Err(format!("\"{what}\" is not a number or a string")),
    }
}
