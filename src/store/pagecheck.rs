//! Parquet page checksums, checked: the pages of column chunks walked and each page's CRC-32
//! compared with the one its header carries.
//!
//! Owns reading Parquet page headers (the `PageHeader` struct of parquet.thrift, thrift compact
//! protocol, unknown fields skipped) and the page walk `tracehouse verify`, compaction and
//! export run over every segment. The footer (where the column chunks are) is read by pyarrow;
//! this walks the bytes between.
//!
//! Why not pyarrow's own `page_checksum_verification`: it checks a CRC where there is one and
//! says nothing of pages without one (segments written before page checksums, or by a writer
//! that does not write them), which a check must report as unprotected; and it decodes every
//! value, where a check needs only the CRC of the bytes as stored. DuckDB (2.0.1) does not
//! check page CRCs at all: a page with a flipped byte reads as different numbers.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// What walking the pages of some column chunks found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PageReport {
    /// Pages walked (dictionary and data pages).
    pub pages: u64,
    /// Pages whose header carries a CRC (each one matched, or `bad` says which did not).
    pub with_crc: u64,
    /// Bytes of the chunks walked.
    pub bytes: u64,
    /// The first damaged page: (its byte offset in the file, what is wrong).
    pub bad: Option<(u64, String)>,
}

// thrift compact protocol types
const CT_BOOL_TRUE: u8 = 1;
const CT_BOOL_FALSE: u8 = 2;
const CT_BYTE: u8 = 3;
const CT_I16: u8 = 4;
const CT_I32: u8 = 5;
const CT_I64: u8 = 6;
const CT_DOUBLE: u8 = 7;
const CT_BINARY: u8 = 8;
const CT_LIST: u8 = 9;
const CT_SET: u8 = 10;
const CT_MAP: u8 = 11;
const CT_STRUCT: u8 = 12;

/// Nesting deeper than this is garbage, not a page header (headers nest 2 levels).
const MAX_DEPTH: u32 = 16;

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, String>;

impl Reader<'_> {
    fn byte(&mut self) -> R<u8> {
        let v = *self.b.get(self.pos).ok_or("page header runs past its column chunk")?;
        self.pos += 1;
        Ok(v)
    }
    fn varint(&mut self) -> R<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint of more than 10 bytes in a page header".into())
    }
    fn zigzag(&mut self) -> R<i64> {
        let v = self.varint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }
    fn skip_bytes(&mut self, n: u64) -> R<()> {
        let n = usize::try_from(n).map_err(|_| "a huge length in a page header")?;
        if n > self.b.len() - self.pos {
            return Err("page header runs past its column chunk".into());
        }
        self.pos += n;
        Ok(())
    }
    fn skip(&mut self, ty: u8, depth: u32) -> R<()> {
        if depth > MAX_DEPTH {
            return Err("page header nested too deep".into());
        }
        match ty {
            CT_BOOL_TRUE | CT_BOOL_FALSE => Ok(()),
            CT_BYTE => self.byte().map(|_| ()),
            CT_I16 | CT_I32 | CT_I64 => self.varint().map(|_| ()),
            CT_DOUBLE => self.skip_bytes(8),
            CT_BINARY => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            CT_LIST | CT_SET => {
                let h = self.byte()?;
                let elem = h & 0x0f;
                let n = if h >> 4 == 15 { self.varint()? } else { u64::from(h >> 4) };
                for _ in 0..n {
                    if elem == CT_BOOL_TRUE || elem == CT_BOOL_FALSE {
                        self.byte()?; // a bool element is one byte
                    } else {
                        self.skip(elem, depth + 1)?;
                    }
                }
                Ok(())
            }
            CT_MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                for _ in 0..n {
                    self.skip(kv >> 4, depth + 1)?;
                    self.skip(kv & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            CT_STRUCT => self.skip_struct(depth + 1),
            t => Err(format!("thrift type {t} in a page header")),
        }
    }
    fn skip_struct(&mut self, depth: u32) -> R<()> {
        let mut last = 0i64;
        loop {
            let h = self.byte()?;
            if h == 0 {
                return Ok(());
            }
            let ty = h & 0x0f;
            last = if h >> 4 == 0 { self.zigzag()? } else { last + i64::from(h >> 4) };
            self.skip(ty, depth)?;
        }
    }
}

/// The fields of a page header a check needs.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    len: usize,
    compressed: usize,
    crc: Option<u32>,
}

fn header(b: &[u8]) -> R<Header> {
    let mut r = Reader { b, pos: 0 };
    let (mut last, mut compressed, mut crc) = (0i64, None, None);
    loop {
        let h = r.byte()?;
        if h == 0 {
            break;
        }
        let ty = h & 0x0f;
        let id = if h >> 4 == 0 { r.zigzag()? } else { last + i64::from(h >> 4) };
        last = id;
        match (id, ty) {
            (3, CT_I32) => {
                let v = r.zigzag()?;
                compressed = Some(usize::try_from(v).map_err(|_| format!("a negative page size ({v})"))?);
            }
            (4, CT_I32) => crc = Some(r.zigzag()? as i32 as u32),
            _ => r.skip(ty, 1)?,
        }
    }
    let compressed = compressed.ok_or("a page header without its compressed size")?;
    Ok(Header { len: r.pos, compressed, crc })
}

/// Walks the pages of one column chunk held in `chunk` (starting at byte `at` of its file).
pub fn check_chunk(chunk: &[u8], at: u64, report: &mut PageReport) {
    let mut pos = 0usize;
    report.bytes += chunk.len() as u64;
    while pos < chunk.len() && report.bad.is_none() {
        let where_ = at + pos as u64;
        let h = match header(&chunk[pos..]) {
            Ok(h) => h,
            Err(e) => {
                report.bad = Some((where_, format!("unreadable page header: {e}")));
                return;
            }
        };
        let body = pos + h.len;
        if h.compressed > chunk.len() - body {
            report.bad = Some((
                where_,
                format!(
                    "page of {} bytes runs past its column chunk ({} bytes left)",
                    h.compressed,
                    chunk.len() - body
                ),
            ));
            return;
        }
        report.pages += 1;
        if let Some(want) = h.crc {
            report.with_crc += 1;
            let got = crc32fast::hash(&chunk[body..body + h.compressed]);
            if got != want {
                report.bad =
                    Some((where_, format!("page checksum mismatch (CRC-32 {got:08x}, header says {want:08x})")));
                return;
            }
        }
        pos = body + h.compressed;
    }
}

/// Walks the pages of the column chunks `chunks` ((byte offset, length) each) of the file `path`.
pub fn check_file(path: &std::path::Path, chunks: &[(u64, u64)]) -> io::Result<PageReport> {
    let f = File::open(path)?;
    let size = f.metadata()?.len();
    let mut report = PageReport::default();
    let mut buf = Vec::new();
    for &(at, len) in chunks {
        if at.checked_add(len).is_none_or(|end| end > size) {
            report.bad =
                Some((at, format!("column chunk of {len} bytes at byte {at} runs past the file's end ({size})")));
            break;
        }
        buf.resize(len as usize, 0);
        f.read_exact_at(&mut buf, at)?;
        check_chunk(&buf, at, &mut report);
        if report.bad.is_some() {
            break;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header as the native writer lays it out: type, sizes, crc, then a nested struct.
    fn page(body: &[u8], crc: Option<u32>) -> Vec<u8> {
        let zz = |v: i64| ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        let varint = |out: &mut Vec<u8>, mut v: u64| {
            while v >= 0x80 {
                out.push((v as u8) | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        };
        out.push(0x15);
        varint(&mut out, zz(0));
        out.push(0x15);
        varint(&mut out, zz(body.len() as i64));
        out.push(0x15);
        varint(&mut out, zz(body.len() as i64));
        if let Some(c) = crc {
            out.push(0x15);
            varint(&mut out, zz(c as i32 as i64));
            out.push(0x1c); // field 5, struct
        } else {
            out.push(0x2c); // field 5 (delta 2), struct
        }
        out.push(0x15);
        varint(&mut out, zz(3));
        out.push(0x18); // field 2: a binary, skipped
        out.push(2);
        out.extend_from_slice(b"ab");
        out.push(0);
        out.push(0);
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn pages_with_and_without_crc_are_walked_and_counted() {
        let body = b"some page bytes";
        let mut chunk = page(body, Some(crc32fast::hash(body)));
        chunk.extend(page(b"another", None));
        let mut r = PageReport::default();
        check_chunk(&chunk, 100, &mut r);
        assert_eq!((r.pages, r.with_crc, r.bad), (2, 1, None));
    }

    #[test]
    fn a_flipped_byte_in_a_page_is_named_with_its_offset() {
        let body = b"some page bytes";
        let mut chunk = page(body, Some(crc32fast::hash(body)));
        let n = chunk.len();
        chunk[n - 3] ^= 4;
        let mut r = PageReport::default();
        check_chunk(&chunk, 100, &mut r);
        let (at, why) = r.bad.expect("damage found");
        assert_eq!(at, 100);
        assert!(why.contains("checksum mismatch"), "{why}");
    }

    #[test]
    fn garbage_and_truncation_are_errors_not_panics() {
        let body = b"some page bytes";
        let chunk = page(body, Some(crc32fast::hash(body)));
        for cut in 0..chunk.len() {
            let mut r = PageReport::default();
            check_chunk(&chunk[..cut], 0, &mut r);
            assert!(cut == 0 || r.bad.is_some(), "cut at {cut}");
        }
        let mut x = 0x1234_5678u32;
        for _ in 0..2000 {
            let junk: Vec<u8> = (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let mut r = PageReport::default();
            check_chunk(&junk, 0, &mut r);
        }
    }
}
