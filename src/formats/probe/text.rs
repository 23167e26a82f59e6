//! Text output of both tools: printf lines matched against the patterns (then kept as `printf`
//! text), bpftrace's `@map` lines and histograms, SystemTap's `@hist_log`/`@hist_linear` tables
//! with their `~` elision rows.

use super::*;

impl ProbeParser {
    pub(super) fn text_line(&mut self, line: &[u8], from_json: bool) {
        let trimmed = line.trim_ascii();
        match &mut self.state {
            TextState::StapHist { rows, .. } => {
                if trimmed == b"~" {
                    rows.push(StapRow { value: 0, prefix: b'~', count: 0, elided: true, line: self.line });
                    return;
                }
                if let Some((prefix, value, count)) = stap_row(trimmed) {
                    rows.push(StapRow { value, prefix, count, elided: false, line: self.line });
                    return;
                }
                if row_like(trimmed, b"0123456789<>-") {
                    self.reject("histogram row: expected 'VALUE |@@@ COUNT'".into());
                    return;
                }
                self.end_table();
            }
            TextState::BtHist { map, key } => {
                if let Some((lo, hi, count)) = bt_hist_row(trimmed) {
                    let (m, k) = (map.clone(), key.clone());
                    let line = self.line as i64;
                    self.hist.push(&[
                        AV::S(Some(&m)),
                        AV::S(k.as_deref()),
                        AV::I(lo),
                        AV::I(hi),
                        AV::I(Some(count)),
                        AV::B(false),
                        AV::I(Some(line)),
                    ]);
                    return;
                }
                if row_like(trimmed, b"[(") {
                    self.reject("histogram row: expected '[LO, HI)  COUNT |@@@|'".into());
                    return;
                }
                self.state = TextState::Normal;
                if trimmed.is_empty() {
                    return;
                }
            }
            TextState::Normal => {}
        }
        if trimmed.is_empty() {
            return;
        }
        if self.try_patterns(line) {
            return;
        }
        if !from_json {
            if self.tool == Tool::Stap && is_stap_header(trimmed) {
                self.untitled += 1;
                let title = if self.last_title.is_empty() {
                    format!("hist{}", self.untitled)
                } else {
                    std::mem::take(&mut self.last_title)
                };
                self.state = TextState::StapHist { title, rows: Vec::new() };
                return;
            }
            if self.tool == Tool::Bpftrace {
                if trimmed.starts_with(b"Attaching ") && trimmed.ends_with(b"...") {
                    self.count("attached_probes_lines", 1);
                    return;
                }
                if trimmed.starts_with(b"@") && self.bt_map_line(trimmed) {
                    return;
                }
            }
        }
        if !from_json && line.len() >= 8 && crate::formats::looks_binary(line) {
            // Binary bytes further into a text file: not a printed line. (Looked at only here,
            // for lines nothing else understood: a line a pattern matched is text.)
            self.reject("binary data, not a printed line".into());
            return;
        }
        self.last_title = String::from_utf8_lossy(trimmed).trim_end_matches(':').trim().to_string();
        self.printf_row(trimmed);
    }

    pub(super) fn try_patterns(&mut self, line: &[u8]) -> bool {
        let mut texts = Vec::new();
        let Some(pi) = self.patterns.iter().position(|p| p.matches(line, &mut texts)) else {
            if let Some(p) = self.patterns.iter().find(|p| p.starts(line)) {
                let msg = format!(
                    "starts like --pattern {} but does not match it ({} field{})",
                    p.name,
                    p.fields.len(),
                    if p.fields.len() == 1 { "" } else { "s" }
                );
                self.reject(msg);
                return true;
            }
            return false;
        };
        let mut vals = Vec::with_capacity(texts.len());
        for (f, t) in self.patterns[pi].fields.iter().zip(&texts) {
            match parse_field(t, f.ftype) {
                Ok(v) => vals.push(Some(v)),
                Err(e) => {
                    let msg = format!("pattern {}: field {}: {e}", self.patterns[pi].name, f.name);
                    self.reject(msg);
                    return true;
                }
            }
        }
        let sp = self.special[pi];
        let int = |i: Option<usize>| match i.map(|i| &vals[i]) {
            Some(Some(FVal::Int(v))) => Some(*v),
            _ => None,
        };
        let ts = int(sp[0]).unwrap_or(self.last_ts);
        if sp[0].is_some() {
            self.last_ts = ts;
        }
        let dur = int(sp[1]);
        if dur.is_some_and(|d| d < 0) {
            self.reject(format!("pattern {}: negative dur", self.patterns[pi].name));
            return true;
        }
        let producer = self.producer(int(sp[2]), int(sp[3]));
        let seq = self.next_seq(producer);
        match self.role[pi] {
            None => self.emit(pi, ts, producer, seq, dur, &vals),
            Some((si, is_begin)) => {
                let key_idx = if is_begin { &self.spans[si].begin_key } else { &self.spans[si].end_key };
                let mut key = Vec::new();
                for &k in key_idx {
                    match &vals[k] {
                        Some(FVal::Int(v)) => key.extend_from_slice(&v.to_le_bytes()),
                        Some(FVal::Float(v)) => key.extend_from_slice(&v.to_bits().to_le_bytes()),
                        Some(FVal::Str(s)) => key.extend_from_slice(s.as_bytes()),
                        None => {}
                    }
                    key.push(0);
                }
                if is_begin {
                    self.spans[si].open.entry(key).or_default().push(Pending { ts, producer, seq, vals });
                    return true;
                }
                let sp_ = &mut self.spans[si];
                let open = sp_.open.get_mut(&key).and_then(|v| v.pop());
                if sp_.open.get(&key).is_some_and(|v| v.is_empty()) {
                    sp_.open.remove(&key);
                }
                match open {
                    Some(b) if ts >= b.ts => {
                        sp_.stats.matched += 1;
                        let (bi, ti) = (sp_.begin, sp_.table);
                        let end_cols = sp_.end_cols.clone();
                        let t = &mut self.tables[ti];
                        t.start(b.ts, b.producer, b.seq);
                        t.set_i64(DUR, ts - b.ts);
                        // Begin fields are the first columns of the span, in order.
                        let mut c = 4;
                        for (f, v) in self.patterns[bi].fields.iter().zip(&b.vals) {
                            if matches!(f.name.as_str(), "ts" | "dur" | "pid" | "tid") {
                                continue;
                            }
                            if let Some(v) = v {
                                set(t, c, v);
                            }
                            c += 1;
                        }
                        for (col, v) in end_cols.iter().zip(&vals) {
                            if let (Some(col), Some(v)) = (col, v) {
                                set(t, *col, v);
                            }
                        }
                        t.end();
                    }
                    Some(b) => {
                        let msg = format!("span {}: end at {} ns before its start at {} ns", sp_.def.name, ts, b.ts);
                        sp_.open.entry(key).or_default().push(b);
                        self.reject(msg);
                    }
                    None => {
                        sp_.stats.unmatched_end += 1;
                        let e = sp_.end;
                        self.emit(e, ts, producer, seq, None, &vals);
                    }
                }
            }
        }
        true
    }

    /// `@name: v`, `@name[k]: v`, `@name: count N, average N, total N`, `@name:` (a histogram follows).
    pub(super) fn bt_map_line(&mut self, t: &[u8]) -> bool {
        let Ok(s) = std::str::from_utf8(t) else { return false };
        let name_end = s[1..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(s.len(), |i| i + 1);
        let map = &s[..name_end];
        let mut rest = &s[name_end..];
        let mut key = None;
        if let Some(r) = rest.strip_prefix('[') {
            let Some(close) = r.rfind("]:") else { return false };
            key = Some(r[..close].to_string());
            rest = &r[close + 1..];
        }
        let Some(value) = rest.strip_prefix(':') else { return false };
        let value = value.trim();
        let line = self.line as i64;
        if value.is_empty() {
            self.state = TextState::BtHist { map: map.to_string(), key };
            return true;
        }
        if let Some(st) = parse_stats_text(value) {
            self.stats.push(&[
                AV::S(Some(map)),
                AV::S(key.as_deref()),
                AV::I(Some(st.0)),
                AV::I(Some(st.1)),
                AV::I(Some(st.2)),
                AV::I(Some(line)),
            ]);
            return true;
        }
        let v = value.parse::<i64>().ok();
        self.map.push(&[
            AV::S(Some(map)),
            AV::S(key.as_deref()),
            AV::I(v),
            AV::S(if v.is_some() { None } else { Some(value) }),
            AV::I(Some(line)),
        ]);
        true
    }

    /// Ends a SystemTap table: resolves bucket bounds and elided runs.
    pub(super) fn end_table(&mut self) {
        let state = std::mem::replace(&mut self.state, TextState::Normal);
        let TextState::StapHist { title, rows } = state else { return };
        let plain: Vec<&StapRow> = rows.iter().filter(|r| !r.elided && r.prefix == 0).collect();
        let next_log = |v: i64| match v {
            0 => 1,
            -1 => 0,
            v if v > 0 => v.saturating_mul(2),
            v => v / 2,
        };
        let pow2 = |v: i64| v == 0 || v.unsigned_abs().is_power_of_two();
        let mut log = plain.iter().all(|r| pow2(r.value));
        let mut width = i64::MAX;
        for w in rows.windows(2) {
            if w[0].elided || w[1].elided || w[0].prefix != 0 || w[1].prefix != 0 {
                continue;
            }
            if next_log(w[0].value) != w[1].value {
                log = false;
            }
            let d = w[1].value - w[0].value;
            if d > 0 {
                width = width.min(d);
            }
        }
        if width == i64::MAX {
            width = 1;
        }
        let bounds = |r: &StapRow| -> (Option<i64>, Option<i64>) {
            match r.prefix {
                b'<' => (None, Some(r.value)),
                b'>' => (Some(r.value), None),
                _ if log => match r.value {
                    v if v > 0 => (Some(v), Some(v.saturating_mul(2))),
                    0 => (Some(0), Some(1)),
                    v => (Some(v.saturating_mul(2) + 1), Some(v + 1)),
                },
                _ => (Some(r.value), Some(r.value.saturating_add(width))),
            }
        };
        for (i, r) in rows.iter().enumerate() {
            let (lo, hi) = if r.elided {
                let prev = rows[..i].iter().rev().find(|r| !r.elided).and_then(|r| bounds(r).1);
                let next = rows[i + 1..].iter().find(|r| !r.elided).and_then(|r| bounds(r).0);
                (prev, next)
            } else {
                bounds(r)
            };
            self.hist.push(&[
                AV::S(Some(&title)),
                AV::S(None),
                AV::I(lo),
                AV::I(hi),
                AV::I(Some(r.count)),
                AV::B(r.elided),
                AV::I(Some(r.line as i64)),
            ]);
        }
    }
}

pub(super) fn is_stap_header(t: &[u8]) -> bool {
    let Some(rest) = t.strip_prefix(b"value |") else { return false };
    let Some(dashes) = rest.strip_suffix(b" count") else { return false };
    !dashes.is_empty() && dashes.iter().all(|&c| c == b'-')
}

/// `[<|>]value |@@@ count`.
/// A line inside a histogram that looks like one of its rows (starts with one of
/// `first`, has a `|`) without being one.
pub(super) fn row_like(t: &[u8], first: &[u8]) -> bool {
    t.first().is_some_and(|c| first.contains(c)) && t.contains(&b'|')
}

pub(super) fn stap_row(t: &[u8]) -> Option<(u8, i64, i64)> {
    let (prefix, t) = match t.first()? {
        b'<' => (b'<', &t[1..]),
        b'>' => (b'>', &t[1..]),
        _ => (0, t),
    };
    let bar = t.iter().position(|&c| c == b'|')?;
    let value: i64 = std::str::from_utf8(&t[..bar]).ok()?.trim().parse().ok()?;
    let rest = &t[bar + 1..];
    let rest = &rest[rest.iter().take_while(|&&c| c == b'@').count()..];
    let count: i64 = std::str::from_utf8(rest).ok()?.trim().parse().ok()?;
    Some((prefix, value, count))
}

/// A bpftrace histogram value with its power-of-1024 suffix ("4K" = 4096).
pub(super) fn bt_value(s: &str) -> Option<i64> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1i64 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        b'T' => (&s[..s.len() - 1], 1 << 40),
        b'P' => (&s[..s.len() - 1], 1 << 50),
        _ => (s, 1),
    };
    num.parse::<i64>().ok()?.checked_mul(mult)
}

/// `[lo, hi)   count |@@@|`, `[v]`, `(..., hi)`, `[lo, ...)`: (lo, hi exclusive, count).
pub(super) fn bt_hist_row(t: &[u8]) -> Option<(Option<i64>, Option<i64>, i64)> {
    let s = std::str::from_utf8(t).ok()?;
    let open = s.chars().next()?;
    if open != '[' && open != '(' {
        return None;
    }
    let close = s.find([')', ']'])?;
    let label = &s[1..close];
    let closer = s.as_bytes()[close];
    let rest = s[close + 1..].trim_start();
    let bar = rest.find('|')?;
    let count: i64 = rest[..bar].trim().parse().ok()?;
    if !rest[bar + 1..].trim_end().ends_with('|') {
        return None;
    }
    let (lo, hi) = match label.split_once(',') {
        None if closer == b']' => {
            let v = bt_value(label)?;
            (Some(v), Some(v.saturating_add(1)))
        }
        None => return None,
        Some((a, b)) => {
            let lo = if a.trim() == "..." { None } else { Some(bt_value(a)?) };
            let hi = if b.trim() == "..." { None } else { Some(bt_value(b)?) };
            (lo, hi)
        }
    };
    Some((lo, hi, count))
}

/// `count N, average N, total N`.
pub(super) fn parse_stats_text(v: &str) -> Option<(i64, i64, i64)> {
    let mut out = [0i64; 3];
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        return None;
    }
    for (i, (p, want)) in parts.iter().zip(["count", "average", "total"]).enumerate() {
        out[i] = p.strip_prefix(want)?.trim().parse().ok()?;
    }
    Some((out[0], out[1], out[2]))
}
