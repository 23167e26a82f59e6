//! bpftrace's `-f json` records: printf, maps, histograms, stats, time series, values and the
//! tool's own messages, one JSON object a line.

use super::*;
use crate::formats::json::{Cursor, Value};

impl ProbeParser {
    pub(super) fn json_record(&mut self, line: &[u8]) {
        // bpftrace's time series emitter writes its points without commas between them
        // (`[{...}{...}]`, src/output/json.cpp): put them in before parsing.
        const GLUED: &[u8] = b"}{\"interval_start\"";
        let fixed: Vec<u8>;
        let line = if memchr::memmem::find(line, GLUED).is_some() {
            let mut v = Vec::with_capacity(line.len() + 64);
            let mut at = 0;
            for i in memchr::memmem::find_iter(line, GLUED) {
                v.extend_from_slice(&line[at..=i]);
                v.push(b',');
                at = i + 1;
            }
            v.extend_from_slice(&line[at..]);
            fixed = v;
            &fixed[..]
        } else {
            line
        };
        let mut cur = Cursor::new(line, 0, true);
        let mut rtype = None;
        let mut data = None;
        let mut count = None;
        let parsed = (|| {
            cur.expect(b'{', "'{'")?;
            if cur.peek_ws("a key")? == b'}' {
                cur.pos += 1;
                return Ok(());
            }
            loop {
                let k = cur.string()?;
                cur.expect(b':', "':'")?;
                let v = cur.value()?;
                if k.eq(line, b"type") {
                    rtype = Some(v);
                } else if k.eq(line, b"data") {
                    data = Some(v);
                } else if k.eq(line, b"count") {
                    count = Some(v);
                }
                if !cur.next_member(b'}', "',' or '}'")? {
                    return Ok(());
                }
            }
        })();
        if let Err(e) = parsed {
            // A record cut at the end of its line: the rest is on the next lines.
            let cut = match e {
                crate::formats::json::Error::Syntax { pos, .. } => pos >= line.trim_ascii_end().len(),
                crate::formats::json::Error::Incomplete => true,
            };
            let what = match e {
                crate::formats::json::Error::Syntax { what, .. } if !cut => what,
                _ => {
                    // Cut at the end of its line: the last line of an output cut short, or
                    // pretty-printed JSON when more lines follow (see `line_in`).
                    self.cut_record = Some(self.line);
                    return;
                }
            };
            self.reject(format!("invalid JSON record: expected {what}"));
            return;
        }
        if !line[cur.pos..].trim_ascii().is_empty() {
            self.reject("invalid JSON record: data after the object".into());
            return;
        }
        let Some(Value::Str(t)) = rtype else {
            self.reject("JSON record without a \"type\" string".into());
            return;
        };
        let t = t.text(line).into_owned();
        let num = |v: Option<Value>| match v {
            Some(Value::Num(n)) => n.as_i64(line),
            _ => None,
        };
        self.count(&format!("records_{t}"), 1);
        match t.as_str() {
            "printf" | "cat" | "join" | "syscall" | "time" => {
                let Some(Value::Str(s)) = data else {
                    self.reject(format!("\"{t}\" record without a \"data\" string"));
                    return;
                };
                let text = s.text(line).into_owned();
                self.pending_text.extend_from_slice(text.as_bytes());
                while let Some(nl) = self.pending_text.iter().position(|&c| c == b'\n') {
                    let l: Vec<u8> = self.pending_text.drain(..=nl).collect();
                    self.text_line(&l[..l.len() - 1], true);
                    if self.fatal.is_some() {
                        return;
                    }
                }
            }
            "lost_events" => {
                let n = num(count).or_else(|| data.and_then(|d| sub_num(line, d, b"events"))).unwrap_or(0);
                self.count("lost_events", n.max(0) as u64);
            }
            "attached_probes" => {
                let n = num(count).or_else(|| data.and_then(|d| sub_num(line, d, b"probes"))).unwrap_or(0);
                self.count("attached_probes", n.max(0) as u64);
            }
            "value" => {
                // print() of one value: a scalar, a tuple (array) or a struct (object), one row.
                let Some(d) = data else {
                    self.reject("\"value\" record without \"data\"".into());
                    return;
                };
                let (val, text) = scalar(line, d);
                let l = self.line as i64;
                self.map.push(&[AV::S(Some("value")), AV::S(None), AV::I(val), AV::S(text.as_deref()), AV::I(Some(l))]);
            }
            "map" | "hist" | "stats" | "tseries" => {
                let Some(Value::Nested { start, end, object: true }) = data else {
                    if let Some(d) = data {
                        let text = String::from_utf8_lossy(d.raw(line)).into_owned();
                        let l = self.line as i64;
                        self.map.push(&[AV::S(Some(&t)), AV::S(None), AV::I(None), AV::S(Some(&text)), AV::I(Some(l))]);
                        return;
                    }
                    self.reject(format!("\"{t}\" record without \"data\""));
                    return;
                };
                let obj = &line[start..end];
                for (k, v) in members(obj) {
                    let name = k.text(obj).into_owned();
                    self.json_aggregate(&t, &name, obj, v);
                }
            }
            _ => {}
        }
    }

    pub(super) fn json_aggregate(&mut self, rtype: &str, map: &str, buf: &[u8], v: Value) {
        let line = self.line as i64;
        match (rtype, v) {
            ("tseries", Value::Nested { start, end, object: false }) => self.json_tseries(map, None, &buf[start..end]),
            ("tseries", Value::Nested { start, end, object: true }) => {
                let obj = &buf[start..end];
                for (k, v) in members(obj) {
                    if let Value::Nested { start, end, object: false } = v {
                        let key = k.text(obj).into_owned();
                        self.json_tseries(map, Some(&key), &obj[start..end]);
                    }
                }
            }
            ("stats", Value::Num(_) | Value::Str(_)) => {
                // An avg() map without keys: `{"@a": 5}` is its average.
                self.stats.push(&[
                    AV::S(Some(map)),
                    AV::S(None),
                    AV::I(None),
                    AV::I(num(buf, v)),
                    AV::I(None),
                    AV::I(Some(line)),
                ]);
            }
            ("hist", Value::Nested { start, end, object: false }) => self.json_hist(map, None, &buf[start..end]),
            ("hist", Value::Nested { start, end, object: true }) => {
                let obj = &buf[start..end];
                for (k, v) in members(obj) {
                    if let Value::Nested { start, end, object: false } = v {
                        let key = k.text(obj).into_owned();
                        self.json_hist(map, Some(&key), &obj[start..end]);
                    }
                }
            }
            ("stats", Value::Nested { start, end, object: true }) => {
                let obj = &buf[start..end];
                let ms = members(obj);
                let is_stats = |k: &[u8]| ms.iter().any(|(n, v)| n.eq(obj, k) && matches!(v, Value::Num(_)));
                if is_stats(b"count") && is_stats(b"average") && is_stats(b"total") {
                    self.json_stats(map, None, obj);
                } else {
                    for (k, v) in ms {
                        let key = k.text(obj).into_owned();
                        match v {
                            Value::Nested { start, end, object: true } => {
                                self.json_stats(map, Some(&key), &obj[start..end])
                            }
                            // An avg() map: `{"@": {"c": 3, "d": 4}}`, each key's average.
                            Value::Num(_) | Value::Str(_) => self.stats.push(&[
                                AV::S(Some(map)),
                                AV::S(Some(&key)),
                                AV::I(None),
                                AV::I(num(obj, v)),
                                AV::I(None),
                                AV::I(Some(line)),
                            ]),
                            _ => {}
                        }
                    }
                }
            }
            (_, Value::Nested { start, end, object: true }) if rtype == "map" => {
                let obj = &buf[start..end];
                for (k, v) in members(obj) {
                    let key = k.text(obj).into_owned();
                    let (val, text) = scalar(obj, v);
                    self.map.push(&[
                        AV::S(Some(map)),
                        AV::S(Some(&key)),
                        AV::I(val),
                        AV::S(text.as_deref()),
                        AV::I(Some(line)),
                    ]);
                }
            }
            (_, v) => {
                let (val, text) = scalar(buf, v);
                self.map.push(&[AV::S(Some(map)), AV::S(None), AV::I(val), AV::S(text.as_deref()), AV::I(Some(line))]);
            }
        }
    }

    pub(super) fn json_hist(&mut self, map: &str, key: Option<&str>, arr: &[u8]) {
        let line = self.line as i64;
        let mut cur = Cursor::new(arr, 0, true);
        if cur.expect(b'[', "[").is_err() {
            return;
        }
        if cur.peek_ws("]") == Ok(b']') {
            // An empty histogram (`zero(@h)`, or no samples yet) is a result with no buckets.
            if key.is_none() && !self.empty.iter().any(|(k, m)| *k == "hist" && m == map) {
                self.empty.push(("hist", map.to_string()));
            }
            return;
        }
        loop {
            let Ok(v) = cur.value() else { return };
            if let Value::Nested { start, end, object: true } = v {
                let o = &arr[start..end];
                let lo = sub_num(o, Value::Nested { start: 0, end: o.len(), object: true }, b"min");
                let hi = sub_num(o, Value::Nested { start: 0, end: o.len(), object: true }, b"max")
                    .map(|m| m.saturating_add(1));
                let count = sub_num(o, Value::Nested { start: 0, end: o.len(), object: true }, b"count").unwrap_or(0);
                self.hist.push(&[
                    AV::S(Some(map)),
                    AV::S(key),
                    AV::I(lo),
                    AV::I(hi),
                    AV::I(Some(count)),
                    AV::B(false),
                    AV::I(Some(line)),
                ]);
            }
            if cur.next_member(b']', "]") != Ok(true) {
                return;
            }
        }
    }

    /// The points of one time series: `[{"interval_start": T, "value": V}, ...]`, each a
    /// `tseries` counter row at T (epoch ns as a number, or bpftrace's printed timestamp).
    pub(super) fn json_tseries(&mut self, map: &str, key: Option<&str>, arr: &[u8]) {
        let Some(t) = self.tseries else { return };
        let mut cur = Cursor::new(arr, 0, true);
        if cur.expect(b'[', "[").is_err() || cur.peek_ws("]") == Ok(b']') {
            return;
        }
        let p = self.producer(None, None);
        loop {
            let Ok(v) = cur.value() else { return };
            if let Value::Nested { start, end, object: true } = v {
                let o = &arr[start..end];
                let ms = members(o);
                let get = |k: &[u8]| ms.iter().find(|(n, _)| n.eq(o, k)).map(|(_, v)| *v);
                let ts = match get(b"interval_start") {
                    Some(Value::Num(n)) => n.as_i64(o),
                    Some(Value::Str(s)) => timestamp_ns(s.text(o).as_bytes()),
                    _ => None,
                };
                let Some(ts) = ts else {
                    self.reject(format!("tseries {map}: a point without a readable \"interval_start\""));
                    return;
                };
                let value = match get(b"value") {
                    Some(Value::Num(n)) => Some(n.as_f64(o)),
                    Some(Value::Str(s)) => s.text(o).parse::<f64>().ok(),
                    _ => None, // an interval with no value (null)
                };
                self.last_ts = self.last_ts.max(ts);
                let seq = self.next_seq(p);
                let tb = &mut self.tables[t];
                tb.start(ts, p, seq);
                tb.set_str(3, map);
                if let Some(k) = key {
                    tb.set_str(4, k);
                }
                if let Some(v) = value {
                    tb.set_f64(5, v);
                }
                tb.set_i64(6, self.line as i64);
                tb.end();
            }
            if cur.next_member(b']', "]") != Ok(true) {
                return;
            }
        }
    }

    pub(super) fn json_stats(&mut self, map: &str, key: Option<&str>, obj: &[u8]) {
        let whole = Value::Nested { start: 0, end: obj.len(), object: true };
        let g = |k: &[u8]| sub_num(obj, whole, k);
        let line = self.line as i64;
        self.stats.push(&[
            AV::S(Some(map)),
            AV::S(key),
            AV::I(g(b"count")),
            AV::I(g(b"average")),
            AV::I(g(b"total")),
            AV::I(Some(line)),
        ]);
    }
}

pub(super) fn members(obj: &[u8]) -> Vec<(crate::formats::json::Str, Value)> {
    let mut out = Vec::new();
    let mut cur = Cursor::new(obj, 0, true);
    if cur.expect(b'{', "{").is_err() || cur.peek_ws("}") == Ok(b'}') {
        return out;
    }
    loop {
        let Ok(k) = cur.string() else { return out };
        if cur.expect(b':', ":").is_err() {
            return out;
        }
        let Ok(v) = cur.value() else { return out };
        out.push((k, v));
        if cur.next_member(b'}', "}") != Ok(true) {
            return out;
        }
    }
}

/// Integer member `key` of the object `v` in `buf` (numbers, or strings holding one).
pub(super) fn sub_num(buf: &[u8], v: Value, key: &[u8]) -> Option<i64> {
    let Value::Nested { start, end, object: true } = v else { return None };
    let obj = &buf[start..end];
    members(obj).into_iter().find(|(k, _)| k.eq(obj, key)).and_then(|(_, v)| match v {
        Value::Num(n) => n.as_i64(obj).or_else(|| Some(n.as_f64(obj).round() as i64)),
        Value::Str(s) => s.text(obj).parse().ok(),
        _ => None,
    })
}

/// A number (or a string holding one, as bpftrace writes integers a double cannot hold).
pub(super) fn num(buf: &[u8], v: Value) -> Option<i64> {
    match v {
        Value::Num(n) => n.as_i64(buf).or_else(|| Some(n.as_f64(buf).round() as i64)),
        Value::Str(s) => s.text(buf).parse().ok(),
        _ => None,
    }
}

/// bpftrace's printed time point (`2025-03-01 12:34:56.123456789`, UTC, as C++ prints a
/// system_clock time) as epoch ns, or `HH:MM:SS[.frac]` as ns since midnight.
pub(super) fn timestamp_ns(t: &[u8]) -> Option<i64> {
    let t = std::str::from_utf8(t).ok()?.trim();
    let (date, time) = match t.split_once([' ', 'T']) {
        Some((d, tm)) => (Some(d), tm.trim_end_matches('Z')),
        None => (None, t),
    };
    let mut hms = time.splitn(3, ':');
    let (h, m, sec) = (hms.next()?.parse::<i64>().ok()?, hms.next()?.parse::<i64>().ok()?, hms.next()?);
    let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let mut ns: i64 = 0;
    for (i, c) in frac.bytes().take(9).enumerate() {
        if !c.is_ascii_digit() {
            return None;
        }
        ns += (c - b'0') as i64 * 10i64.pow(8 - i as u32);
    }
    let day_ns = ((h * 60 + m) * 60 + whole.parse::<i64>().ok()?) * 1_000_000_000 + ns;
    let Some(date) = date else { return Some(day_ns) };
    let mut ymd = date.splitn(3, '-');
    let (y, mo, d) =
        (ymd.next()?.parse::<i64>().ok()?, ymd.next()?.parse::<i64>().ok()?, ymd.next()?.parse::<i64>().ok()?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    // Days since 1970-01-01 (proleptic Gregorian, Howard Hinnant's days_from_civil).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days.checked_mul(86_400_000_000_000)?.checked_add(day_ns)
}

/// A map value: (integer, else its text).
pub(super) fn scalar(buf: &[u8], v: Value) -> (Option<i64>, Option<String>) {
    match v {
        Value::Num(n) if n.as_i64(buf).is_some() => (n.as_i64(buf), None),
        Value::Str(s) => {
            let t = s.text(buf).into_owned();
            match t.parse::<i64>() {
                Ok(i) => (Some(i), None),
                Err(_) => (None, Some(t)),
            }
        }
        v => (None, Some(String::from_utf8_lossy(v.raw(buf)).into_owned())),
    }
}
