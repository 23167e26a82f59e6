//! The `lineproto` format, declared once (see `formats/decl.rs`): no fixed event types (each
//! measurement is one, typed by its fields), its sniffer, its parser's factory and example
//! queries.

use crate::formats::decl::{FormatDecl, ParserDecl};
use crate::formats::parser::{ChunkParser, OptKind, OptionDecl, Options};
use crate::ingest::lineproto::{line_end, Precision};

/// The `lineproto` format.
pub const LINEPROTO: FormatDecl = FormatDecl {
    name: "lineproto",
    description: "InfluxDB line protocol (measurement,tag=v field=1i,other=2.5 ts): written to tracehouse serve, \
                  or imported from a file; each measurement an event type, each tag set a producer",
    priority: 20,
    sniff: Some(sniff),
    parser: Some(ParserDecl {
        options: &[
            OptionDecl {
                name: "precision",
                kind: OptKind::Str,
                doc: "unit of the timestamps: ns (the default), us, ms or s",
            },
            OptionDecl {
                name: "default_ts",
                kind: OptKind::Int,
                doc: "time (ns since the epoch) of lines without one; default: when the parser was made",
            },
        ],
        make,
    }),
    examples: &[
        ("measurements and fields", "SELECT name, params FROM th.event_types WHERE trace = {s}"),
        ("series (tag sets)", "SELECT id, name, attrs FROM th.producers WHERE trace = {s} LIMIT 50"),
    ],
    ..FormatDecl::BASE
};

fn make(o: &Options) -> Result<Box<dyn ChunkParser>, String> {
    let p = o.str("precision").unwrap_or("ns");
    let precision = Precision::parse(p).ok_or_else(|| format!("unknown precision {p:?} (ns, us, ms, s)"))?;
    let mut parser = super::LineProtoParser::new(precision, o.strict(), o.max_line());
    if let Some(ts) = o.int_given("default_ts") {
        parser.set_default_ts(ts.min(i64::MAX as u64) as i64);
    }
    Ok(Box::new(parser))
}

/// The first line that is not blank or a comment reads as line protocol: a measurement
/// (with tags), a space, one or more `key=value` fields whose values are numbers (`i`/`u`
/// suffix allowed), booleans or quoted strings, then an optional integer timestamp.
pub fn sniff(head: &[u8]) -> bool {
    // (lines as the decoder cuts them: a string field may hold newlines)
    let mut rest = head;
    let line = loop {
        if rest.is_empty() {
            return false;
        }
        let end = line_end(rest);
        let l = &rest[..end];
        rest = &rest[(end + 1).min(rest.len())..];
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if !l.iter().all(u8::is_ascii_whitespace) && l.first() != Some(&b'#') {
            break l;
        }
    };
    let mut i = 0;
    // measurement and tags: up to the first unescaped space
    let mut tags_ok = true;
    while i < line.len() && line[i] != b' ' {
        if line[i] == b'\\' {
            i += 1;
        } else if line[i] == b',' {
            // a tag must be k=v
            let rest = &line[i + 1..];
            let end = rest.iter().position(|&b| b == b',' || b == b' ').unwrap_or(rest.len());
            tags_ok &= rest[..end].contains(&b'=');
        }
        i += 1;
    }
    if i == 0 || i >= line.len() || !tags_ok || line[0] == b'#' {
        return false;
    }
    let mut fields = 0;
    let mut j = i + 1;
    loop {
        let key_end = match line[j..].iter().position(|&b| b == b'=' || b == b' ' || b == b',') {
            Some(k) if line[j + k] == b'=' && k > 0 => j + k,
            _ => return false,
        };
        j = key_end + 1;
        if line.get(j) == Some(&b'"') {
            j += 1;
            while j < line.len() && line[j] != b'"' {
                j += if line[j] == b'\\' { 2 } else { 1 };
            }
            if j >= line.len() {
                return false;
            }
            j += 1;
        } else {
            let end = line[j..].iter().position(|&b| b == b',' || b == b' ').map_or(line.len(), |e| j + e);
            if !value(&line[j..end]) {
                return false;
            }
            j = end;
        }
        fields += 1;
        match line.get(j) {
            Some(b',') => j += 1,
            Some(b' ') => {
                let ts = &line[j + 1..];
                let ts = ts.strip_prefix(b"-").unwrap_or(ts);
                return fields > 0 && !ts.is_empty() && ts.iter().all(u8::is_ascii_digit);
            }
            None => return fields > 0,
            Some(_) => return false,
        }
    }
}

/// A field value that is not a string: a number (with an `i`/`u` suffix) or a boolean.
fn value(v: &[u8]) -> bool {
    if matches!(v, b"t" | b"T" | b"true" | b"True" | b"TRUE" | b"f" | b"F" | b"false" | b"False" | b"FALSE") {
        return true;
    }
    let v = v.strip_suffix(b"i").or_else(|| v.strip_suffix(b"u")).unwrap_or(v);
    let v = v.strip_prefix(b"-").unwrap_or(v);
    !v.is_empty()
        && v.iter().any(u8::is_ascii_digit)
        && v.iter().all(|&b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
}
