//! The protocol buffers wire format at its lowest level: varints and the (field, wire type,
//! payload) records of a message, for what prost's generated decoding does not do: telling a
//! protobuf format from the first bytes of a file (the sniffers of pprof and Perfetto) and
//! cutting a stream of length-delimited records as it arrives (Perfetto's `Trace.packet`),
//! without decoding the messages themselves.

/// A varint at the start of `b`: (value, bytes read), None when cut or longer than 10 bytes.
pub fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// A field's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: bytes, a string or a message.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

/// The first field of `b`: (field number, value, bytes read); None when `b` does not start with
/// a whole, well-formed field (groups, wire types 3 and 4, are refused: nothing here uses them).
pub fn field(b: &[u8]) -> Option<(u64, Value<'_>, usize)> {
    let (key, n) = varint(b)?;
    let (num, wt) = (key >> 3, key & 7);
    if num == 0 || num > (1 << 29) - 1 {
        return None;
    }
    let rest = &b[n..];
    match wt {
        0 => varint(rest).map(|(v, m)| (num, Value::Varint(v), n + m)),
        1 => rest.get(..8).map(|s| (num, Value::Fixed64(u64::from_le_bytes(s.try_into().unwrap())), n + 8)),
        2 => {
            let (len, m) = varint(rest)?;
            let len = usize::try_from(len).ok()?;
            let body = rest.get(m..m.checked_add(len)?)?;
            Some((num, Value::Bytes(body), n + m + len))
        }
        5 => rest.get(..4).map(|s| (num, Value::Fixed32(u32::from_le_bytes(s.try_into().unwrap())), n + 4)),
        _ => None,
    }
}

/// The fields of a whole message, in order; stops (returning false from the walk) at the first
/// malformed byte.
pub fn walk<'a>(mut b: &'a [u8], mut f: impl FnMut(u64, Value<'a>) -> bool) -> bool {
    while !b.is_empty() {
        let Some((num, v, n)) = field(b) else { return false };
        if !f(num, v) {
            return false;
        }
        b = &b[n..];
    }
    true
}

/// The start of a length-delimited field `num` at the start of `b`: (payload length, header
/// bytes), None when `b` holds too few bytes to tell, Err when it is something else.
pub fn delimited_head(b: &[u8], num: u64) -> Option<Result<(usize, usize), ()>> {
    let (key, n) = match varint(b) {
        Some(k) => k,
        None if b.len() < 10 => return None,
        None => return Some(Err(())),
    };
    if key != (num << 3) | 2 {
        return Some(Err(()));
    }
    match varint(&b[n..]) {
        Some((len, m)) => Some(usize::try_from(len).map(|l| (l, n + m)).map_err(|_| ())),
        None if b.len() - n < 10 => None,
        None => Some(Err(())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_varints() {
        assert_eq!(varint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(varint(&[0x96]), None);
        let msg = [0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 0, 0, 0];
        let mut got = Vec::new();
        assert!(walk(&msg, |n, v| {
            got.push((n, v));
            true
        }));
        assert_eq!(got, vec![(1, Value::Varint(150)), (2, Value::Bytes(b"hi")), (3, Value::Fixed32(1))]);
        assert!(!walk(&[0x12, 0x05, b'h'], |_, _| true));
        assert_eq!(delimited_head(&[0x0a, 0x03, 1, 2, 3], 1), Some(Ok((3, 2))));
        assert_eq!(delimited_head(&[0x0a], 1), None);
        assert_eq!(delimited_head(&[0x08, 0x01], 1), Some(Err(())));
    }
}
