//! `args` made columns: each key typed by the first value met (int64, float64, bool, string)
//! into an `arg_<key>` column of the event's type (`end_arg_<key>` for an `E`/`e`), values that
//! do not fit, nested ones, keys beyond the cap and keys whose column name another key took (in
//! any case: `url` and `URL`) kept as JSON text.

use super::*;

/// Where an args key goes in one table.
#[derive(Clone, Copy)]
pub(super) enum Slot {
    Col(usize),
    Text,
}

pub(super) struct ArgReg {
    pub(super) prefix: &'static str,
    pub(super) map: FastMap<Vec<u8>, Slot>,
}

/// The members of a JSON object text (already validated when it was first read).
pub(super) fn arg_list(obj: &[u8], out: &mut Vec<(Str, Value)>) {
    out.clear();
    let mut cur = Cursor::new(obj, 0, true);
    if cur.expect(b'{', "{").is_err() {
        return;
    }
    if cur.peek_ws("}") == Ok(b'}') {
        return;
    }
    loop {
        let Ok(k) = cur.string() else { return };
        if cur.expect(b':', ":").is_err() {
            return;
        }
        let Ok(v) = cur.value() else { return };
        out.push((k, v));
        if cur.next_member(b'}', "}") != Ok(true) {
            return;
        }
    }
}

/// Column name for an args key: `prefix` + the key with every byte outside
/// `[A-Za-z0-9_]` replaced by `_`, at most 63 bytes.
pub fn arg_column(prefix: &str, key: &[u8]) -> String {
    let mut s = String::with_capacity(prefix.len() + key.len());
    s.push_str(prefix);
    for &c in key {
        if s.len() >= 63 {
            break;
        }
        s.push(if c.is_ascii_alphanumeric() || c == b'_' { c as char } else { '_' });
    }
    s
}

/// Where `ArgSink::put` writes besides the row: the columns it adds (reported to Python),
/// its scratch for the JSON text of the args left over, and the cap on added columns.
pub(super) struct ArgSink {
    pub(super) new_cols: Vec<NewColumn>,
    pub(super) text: Vec<u8>,
    pub(super) max_cols: usize,
}

impl ArgSink {
    /// Stores the args of the current row of `t`: typed columns where the key has one and
    /// the value fits it, the rest as a JSON object in column `rem`.
    pub(super) fn put(&mut self, t: &mut Tbl, end: bool, buf: &[u8], list: &[(Str, Value)], rem: usize) {
        let (new_cols, text, max_cols) = (&mut self.new_cols, &mut self.text, self.max_cols);
        if list.is_empty() {
            return;
        }
        text.clear();
        let mut key_buf = Vec::new();
        for &(k, v) in list {
            let key: &[u8] = if k.escaped {
                key_buf.clear();
                json::unescape_into(k.raw(buf), &mut key_buf);
                &key_buf
            } else {
                k.raw(buf)
            };
            let reg = if end { &mut t.end_args } else { &mut t.args };
            let slot = match reg.map.get(key) {
                Some(&s) => Some(s),
                None => {
                    let ptype = match v {
                        Value::Num(n) if n.int => n.as_i64(buf).map(|_| PType::Int),
                        Value::Num(_) => Some(PType::Float),
                        Value::Bool(_) => Some(PType::Bool),
                        Value::Str(_) => Some(PType::Str),
                        _ => None,
                    };
                    ptype.map(|pt| {
                        let name = arg_column(reg.prefix, key);
                        // (taken in any case: `URL` beside `url` would be one column to SQL, which
                        // read `arg_url`'s values under both names)
                        let s = if t.t.has_col_in_any_case(&name) || t.dyn_cols >= max_cols {
                            Slot::Text
                        } else {
                            let i = t.t.add_col(&name, pt);
                            t.dyn_cols += 1;
                            new_cols.push((t.t.name.clone(), name, pt, String::from_utf8_lossy(key).into_owned()));
                            Slot::Col(i)
                        };
                        let reg = if end { &mut t.end_args } else { &mut t.args };
                        reg.map.insert(key.to_vec(), s);
                        s
                    })
                }
            };
            let stored = match slot {
                Some(Slot::Col(c)) if !t.t.is_set(c) => match (t.t.col_type(c), v) {
                    (PType::Int, Value::Num(n)) => match n.as_i64(buf) {
                        Some(x) => {
                            t.t.set_i64(c, x);
                            true
                        }
                        None => false,
                    },
                    (PType::Float, Value::Num(n)) => {
                        t.t.set_f64(c, n.as_f64(buf));
                        true
                    }
                    (PType::Bool, Value::Bool(b)) => {
                        t.t.set_bool(c, b);
                        true
                    }
                    (PType::Str, Value::Str(s)) => {
                        t.t.set_str(c, &s.text(buf));
                        true
                    }
                    _ => false,
                },
                _ => false,
            };
            if !stored {
                text.push(if text.is_empty() { b'{' } else { b',' });
                text.extend_from_slice(k.quoted(buf));
                text.push(b':');
                text.extend_from_slice(v.raw(buf));
            }
        }
        if !text.is_empty() {
            text.push(b'}');
            t.t.set_str(rem, &String::from_utf8_lossy(text));
        }
    }
}
