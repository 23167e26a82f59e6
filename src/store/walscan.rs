//! Reading a WAL file back: the frames, their checksums and where the log ends.
//!
//! Owns the read half of the WAL format ([`super::wal`] owns the write half): the file's magic,
//! the `[u32 payload length][u32 crc32(payload)][payload]` frames, the zeros a writer leaves
//! ahead of its records (a header of eight zero bytes ends the log like the file's end), and
//! what a damaged frame means. `python/tracehouse/store/wal.py` reads every WAL file through
//! [`scan`]; it decodes the Arrow IPC payloads of the frames found intact (Arrow's format, not
//! the WAL's) and applies the same rule to a payload that does not decode.
//!
//! The rule for damage: a frame whose checksum fails and that is followed by an intact frame
//! is skipped (the frames after it are kept); one followed by the log's end is the log's last
//! record and ends it; one followed by anything else ends the log there (where its length
//! points is no record, so nothing after it can be trusted to start a frame). A length past
//! the file's end or a cut header ends the log too. A record is written whole before its
//! header (`Record::write_reserving`), so a crash in mid-write leaves zeros where the header
//! goes: the log then ends cleanly, without error.
//!
//! Why here: the format had two owners (this crate wrote it, Python read it), so every change
//! to it had two places to agree. Reading through one native call costs what the Python reader
//! did: a 24.8 MB WAL file of 10,000 records of 100 rows (dev/wal_read_cost.py, CPU time,
//! best of 5, the two readers alternating twice, load average 15-21): frames and CRCs only
//! 6.9 / 7.6 ms before, 6.4 / 5.8 ms now; decoded 56 / 62 ms before, 58 / 62 ms now (pyarrow's
//! decoding of the payloads is the cost either way).

/// The 8 bytes every WAL file starts with.
pub const MAGIC: &[u8; 8] = b"THWAL001";
/// Bytes of a frame's header (`u32` payload length, `u32` CRC-32 of the payload).
pub const HEADER: usize = 8;
/// Bytes of the payload's event type name length (`u16`).
pub const NAME_LEN: usize = 2;
/// A length beyond this is garbage, not a record.
pub const MAX_RECORD: u32 = 1 << 31;

/// What follows a frame, at the byte where it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// The log's end: the file's end, or a header of zeros.
    End,
    /// An intact frame (its length plausible and inside the file, its checksum right).
    Record,
    /// Anything else (a damaged frame, a cut header, garbage).
    Other,
}

/// One frame of the log, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Byte of its header in the file.
    pub offset: u64,
    /// Bytes of its payload (the frame is `HEADER + len` bytes).
    pub len: u32,
    /// Whether the payload's CRC-32 is the header's.
    pub crc_ok: bool,
    /// What follows it.
    pub then: Then,
}

/// What [`scan`] found in one file (or in the part of it after a known record boundary).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Every frame read, in order. The last one may be damaged (it ended the log); a damaged
    /// one before it was skipped (an intact frame follows it).
    pub frames: Vec<Frame>,
    /// Where the frames read end (a file byte): the log's valid end, unless `error` or the last
    /// frame is damaged (then that frame's offset).
    pub end: u64,
    /// Why the log ends before the file's end when no frame says so: a bad magic, a cut
    /// header, a length past the end.
    pub error: Option<String>,
}

fn header_at(data: &[u8], at: usize) -> Option<(u32, u32)> {
    let h = data.get(at..at + HEADER)?;
    Some((u32::from_le_bytes(h[..4].try_into().ok()?), u32::from_le_bytes(h[4..].try_into().ok()?)))
}

/// Whether the log ends at `at`: the data's end, or a header of zeros.
fn ends_at(data: &[u8], at: usize) -> bool {
    at >= data.len() || data.len() - at >= HEADER && data[at..at + HEADER].iter().all(|&b| b == 0)
}

/// A frame at `at` whose length is plausible and inside `data`: its payload's range.
fn frame_at(data: &[u8], at: usize) -> Option<(u32, u32, usize, usize)> {
    let (len, crc) = header_at(data, at)?;
    let rec = at + HEADER;
    let end = rec.checked_add(len as usize)?;
    ((NAME_LEN as u32..=MAX_RECORD).contains(&len) && end <= data.len()).then_some((len, crc, rec, end))
}

fn then_at(data: &[u8], at: usize) -> Then {
    if ends_at(data, at) {
        return Then::End;
    }
    match frame_at(data, at) {
        Some((_, crc, rec, end)) if crc32fast::hash(&data[rec..end]) == crc => Then::Record,
        _ => Then::Other,
    }
}

/// Walks the frames of `data`, the bytes of a WAL file from byte `start` on (`start` 0: the
/// whole file, magic included; else a record boundary a previous scan returned as `end`).
/// Positions in the result and its messages are the file's own.
pub fn scan(data: &[u8], start: u64) -> Scan {
    let mut out = Scan { end: start, ..Scan::default() };
    let mut pos = 0usize;
    if start == 0 {
        if data.is_empty() {
            return out; // created, then the writer died before the header: an empty log
        }
        if data.len() < MAGIC.len() || &data[..MAGIC.len()] != MAGIC {
            out.error = Some(if data.len() < MAGIC.len() { "missing WAL header" } else { "bad WAL magic" }.into());
            return out;
        }
        pos = MAGIC.len();
    }
    let at = |p: usize| start + p as u64;
    // The frame at `pos`, once its successor was checked (then known): reused, not checked twice.
    let mut known: Option<Then> = None;
    while pos < data.len() {
        if data.len() - pos < HEADER {
            if data[pos..].iter().any(|&b| b != 0) {
                out.error = Some(format!("truncated record header at byte {}", at(pos)));
            }
            break;
        }
        if ends_at(data, pos) {
            break;
        }
        let Some((len, crc, rec, end)) = frame_at(data, pos) else {
            let (len, _) = header_at(data, pos).unwrap_or_default();
            let remain = data.len() - pos - HEADER;
            out.error = Some(format!("record at byte {} claims {len} bytes, {remain} remain", at(pos)));
            break;
        };
        let crc_ok = match known.take() {
            Some(t) => t == Then::Record,
            None => crc32fast::hash(&data[rec..end]) == crc,
        };
        let then = then_at(data, end);
        out.frames.push(Frame { offset: at(pos), len, crc_ok, then });
        if !crc_ok && then != Then::Record {
            out.end = at(pos); // the damaged last record, or damage nothing intact follows: the log ends
            return out;
        }
        if then == Then::Record {
            known = Some(Then::Record);
        }
        pos = end;
    }
    out.end = at(pos);
    out
}

/// The event type name in the payload of frame `f` (of a [`scan`] of `data` from `start`) and
/// where, in `data`, the Arrow IPC stream after it begins; or why the payload holds no name.
pub fn event_type<'a>(data: &'a [u8], start: u64, f: &Frame) -> Result<(&'a str, usize), String> {
    let rec = (f.offset - start) as usize + HEADER;
    let payload = &data[rec..rec + f.len as usize];
    let nlen = u16::from_le_bytes([payload[0], payload[1]]) as usize;
    let name = payload
        .get(NAME_LEN..NAME_LEN + nlen)
        .ok_or_else(|| format!("an event type name of {nlen} bytes in a {}-byte record", f.len))?;
    let name = std::str::from_utf8(name).map_err(|e| format!("event type name not UTF-8 ({e})"))?;
    Ok((name, rec + NAME_LEN + nlen))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        v.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        v.extend_from_slice(payload);
        v
    }

    fn file(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        for f in frames {
            v.extend_from_slice(f);
        }
        v
    }

    #[test]
    fn intact_frames_then_zeros_end_the_log_without_error() {
        let (a, b) = (frame(b"\x01\x00aXYZ"), frame(b"\x01\x00bQ"));
        let mut data = file(&[a.clone(), b.clone()]);
        let end = data.len() as u64;
        data.extend_from_slice(&[0u8; 100]);
        let s = scan(&data, 0);
        assert_eq!(s.error, None);
        assert_eq!(s.end, end);
        assert_eq!(s.frames.len(), 2);
        assert_eq!(s.frames[0], Frame { offset: 8, len: 6, crc_ok: true, then: Then::Record });
        assert_eq!(s.frames[1].then, Then::End);
        // From a boundary: positions stay the file's own.
        let s2 = scan(&data[8 + a.len()..], 8 + a.len() as u64);
        assert_eq!(s2.frames, vec![Frame { offset: 8 + a.len() as u64, len: 4, crc_ok: true, then: Then::End }]);
        assert_eq!(s2.end, end);
    }

    #[test]
    fn a_damaged_frame_before_an_intact_one_is_skipped_a_last_one_ends_the_log() {
        let mut bad = frame(b"\x01\x00aXYZ");
        bad[12] ^= 0x40;
        let good = frame(b"\x01\x00bQ");
        let s = scan(&file(&[bad.clone(), good.clone()]), 0);
        assert_eq!(s.frames.iter().map(|f| f.crc_ok).collect::<Vec<_>>(), vec![false, true]);
        assert_eq!(s.end, (8 + bad.len() + good.len()) as u64);
        let s = scan(&file(&[good.clone(), bad.clone()]), 0);
        assert_eq!(s.frames.last().map(|f| (f.crc_ok, f.then)), Some((false, Then::End)));
        assert_eq!(s.end, (8 + good.len()) as u64, "the damaged last record is not valid");
        // Followed by garbage: the log ends at it, nothing after read.
        let mut data = file(&[bad, good.clone()]);
        data[8 + 14] = 0xff;
        let s = scan(&data, 0);
        assert_eq!(s.frames.len(), 1);
        assert_eq!(s.end, 8);
    }

    #[test]
    fn the_name_and_where_the_ipc_stream_begins() {
        let data = file(&[frame(b"\x03\x00cpuIPC"), frame(b"\x09\x00ab")]);
        let s = scan(&data, 0);
        assert_eq!(event_type(&data, 0, &s.frames[0]), Ok(("cpu", 8 + 8 + 2 + 3)));
        assert_eq!(
            event_type(&data, 0, &s.frames[1]),
            Err("an event type name of 9 bytes in a 4-byte record".to_string())
        );
    }

    #[test]
    fn framing_errors_name_the_byte() {
        assert_eq!(scan(b"THWAL0", 0).error.as_deref(), Some("missing WAL header"));
        assert_eq!(scan(b"NOTAWAL!", 0).error.as_deref(), Some("bad WAL magic"));
        assert_eq!(scan(b"", 0), Scan::default());
        let mut data = file(&[frame(b"\x01\x00aX")]);
        data.extend_from_slice(&[7, 0, 0]);
        assert_eq!(scan(&data, 0).error.as_deref(), Some("truncated record header at byte 20"));
        let mut data = file(&[]);
        data.extend_from_slice(&1000u32.to_le_bytes());
        data.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        let s = scan(&data, 0);
        assert_eq!(s.error.as_deref(), Some("record at byte 8 claims 1000 bytes, 2 remain"));
        assert_eq!(s.end, 8);
    }
}
