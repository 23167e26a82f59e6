//! Where a traced path lands under the replay root, decided by text alone.
//!
//! Owns `--map OLD=NEW` (longest matching prefix, whole components only), the default
//! placement (an absolute path `/a/b` becomes `a/b` under the root, a relative one stays
//! relative to the root), lexical normalisation (`.` and empty components dropped, `..`
//! pops one) with refusal of anything that climbs above the root, and the recognition
//! of paths that are not regular files (`pipe:[..]`, `socket:[..]`, `/dev/...`,
//! `/proc/...`, `/sys/...`), which the replayer skips.
//!
//! This is the first of two fences. The second is the kernel: every path is opened
//! relative to the root's directory fd with `openat2(RESOLVE_BENEATH)` (see `fsroot.rs`),
//! which refuses symlinks and `..` that would leave it, whatever the text said.

/// Why a traced path is not replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathRefusal {
    /// Not a regular file (pipe, socket, anon inode, device, /proc, /sys).
    Special,
    /// After mapping it would climb above the root (`..`).
    Escapes,
    /// Outside the `--only` prefixes.
    NotSelected,
}

/// One `--map OLD=NEW`: traced paths under `old` go to `new` (relative to the root).
#[derive(Clone, Debug)]
pub struct MapRule {
    old: Vec<u8>,
    new: Vec<Vec<u8>>,
}

/// Path mapping of a replay: the rules and the `--only` selection.
#[derive(Clone, Debug, Default)]
pub struct Mapper {
    rules: Vec<MapRule>,
    only: Vec<Vec<u8>>,
}

/// Components of `p` after lexical normalisation (`.` and empty ones dropped, `..` pops
/// one). A `..` with nothing to pop is dropped when `at_root_stays` (an absolute path: `/..`
/// is `/`), else the path climbs above its start: None.
fn components(p: &[u8], at_root_stays: bool) -> Option<Vec<&[u8]>> {
    let mut out: Vec<&[u8]> = Vec::new();
    for c in p.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                if out.pop().is_none() && !at_root_stays {
                    return None;
                }
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// Components of the relative path `p` after lexical normalisation, or None if `..` climbs
/// above its start.
pub fn normalize(p: &[u8]) -> Option<Vec<Vec<u8>>> {
    Some(components(p, false)?.into_iter().map(<[u8]>::to_vec).collect())
}

/// Whether `path` (as traced) is under the directory `prefix` (whole components).
fn under(path: &[u8], prefix: &[u8]) -> bool {
    let prefix = if prefix.len() > 1 { prefix.strip_suffix(b"/").unwrap_or(prefix) } else { prefix };
    path == prefix || (path.starts_with(prefix) && (prefix.ends_with(b"/") || path.get(prefix.len()) == Some(&b'/')))
}

/// Whether `p` is how strace -y prints a pipe, socket or namespace (`type:[inode]`, the
/// whole text: a lower-case type, digits in the brackets) or an anonymous inode
/// (`anon_inode:...`). A file path is absolute under -y, so `/tmp/x:[1]` is a file.
fn is_inode_label(p: &[u8]) -> bool {
    if p.starts_with(b"anon_inode:") {
        return true;
    }
    let Some(i) = memchr::memmem::find(p, b":[") else { return false };
    let (ty, rest) = (&p[..i], &p[i + 2..]);
    !ty.is_empty()
        && ty.iter().all(|&b| b.is_ascii_lowercase() || b == b'_')
        && rest.len() > 1
        && rest.ends_with(b"]")
        && rest[..rest.len() - 1].iter().all(u8::is_ascii_digit)
}

/// Whether a traced path names something that is not a regular file or directory.
pub fn is_special(p: &[u8]) -> bool {
    if is_inode_label(p) {
        return true;
    }
    for dir in [&b"/dev"[..], b"/proc", b"/sys"] {
        if under(p, dir) && !under(p, b"/dev/shm") {
            return true;
        }
    }
    false
}

impl Mapper {
    /// A mapper from `(old, new)` pairs and `--only` prefixes. `new` must stay inside the
    /// root (relative, no climbing `..`); `old` must be non-empty.
    pub fn new(maps: &[(Vec<u8>, Vec<u8>)], only: &[Vec<u8>]) -> Result<Self, String> {
        let mut rules = Vec::new();
        for (old, new) in maps {
            if old.is_empty() {
                return Err("--map: empty OLD (expected OLD=NEW, e.g. /var/lib/db=db)".into());
            }
            if new.starts_with(b"/") {
                return Err(format!(
                    "--map {}={}: NEW must be relative to --root (it is placed under the root)",
                    String::from_utf8_lossy(old),
                    String::from_utf8_lossy(new)
                ));
            }
            let comps = normalize(new).ok_or_else(|| {
                format!(
                    "--map {}={}: NEW climbs above --root with '..'",
                    String::from_utf8_lossy(old),
                    String::from_utf8_lossy(new)
                )
            })?;
            rules.push(MapRule { old: old.clone(), new: comps });
        }
        // Longest OLD first: the most specific rule wins.
        rules.sort_by_key(|r| std::cmp::Reverse(r.old.len()));
        Ok(Mapper { rules, only: only.to_vec() })
    }

    /// The path relative to the replay root (no leading `/`; `.` for the root itself), or
    /// why it is not replayed. An absolute traced path is normalised as the kernel would
    /// (`/..` is `/`), then mapped; a relative one (its directory unknown) is placed under
    /// the root and refused if its `..` climb above it.
    pub fn map(&self, p: &[u8]) -> Result<Vec<u8>, PathRefusal> {
        if is_special(p) {
            return Err(PathRefusal::Special);
        }
        let absolute = p.starts_with(b"/");
        let comps = components(p, absolute).ok_or(PathRefusal::Escapes)?;
        let mut text = Vec::with_capacity(p.len() + 1);
        for c in &comps {
            if absolute || !text.is_empty() {
                text.push(b'/');
            }
            text.extend_from_slice(c);
        }
        if absolute && text.is_empty() {
            text.push(b'/');
        }
        if !self.only.is_empty() && !self.only.iter().any(|o| under(&text, o)) {
            return Err(PathRefusal::NotSelected);
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut skip = 0;
        if let Some(r) = self.rules.iter().find(|r| under(&text, &r.old)) {
            out = r.new.clone();
            skip = normalize(&r.old).map(|c| c.len()).unwrap_or(0);
        }
        out.extend(comps[skip.min(comps.len())..].iter().map(|c| c.to_vec()));
        if out.is_empty() {
            return Ok(b".".to_vec());
        }
        Ok(out.join(&b'/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(maps: &[(&str, &str)], only: &[&str]) -> Mapper {
        let maps: Vec<_> = maps.iter().map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec())).collect();
        let only: Vec<_> = only.iter().map(|o| o.as_bytes().to_vec()).collect();
        Mapper::new(&maps, &only).unwrap()
    }

    fn s(r: Result<Vec<u8>, PathRefusal>) -> Result<String, PathRefusal> {
        r.map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn default_placement_keeps_the_absolute_path_under_the_root() {
        let x = m(&[], &[]);
        assert_eq!(s(x.map(b"/var/lib/db/t1.ibd")), Ok("var/lib/db/t1.ibd".into()));
        assert_eq!(s(x.map(b"rel/file")), Ok("rel/file".into()));
        assert_eq!(s(x.map(b"/a/./b//c")), Ok("a/b/c".into()));
        assert_eq!(s(x.map(b"/a/b/../c")), Ok("a/c".into()));
        assert_eq!(s(x.map(b"/")), Ok(".".into()));
    }

    #[test]
    fn climbing_above_the_root_is_refused() {
        let x = m(&[("/data", "db")], &[]);
        // a relative path's `..` would climb above the root
        assert_eq!(x.map(b"../x"), Err(PathRefusal::Escapes));
        assert_eq!(x.map(b"a/../../x"), Err(PathRefusal::Escapes));
        assert_eq!(s(x.map(b"a/../x")), Ok("x".into()));
        // an absolute one is normalised as the kernel does (`/..` is `/`), then mapped
        assert_eq!(s(x.map(b"/../etc/passwd")), Ok("etc/passwd".into()));
        assert_eq!(s(x.map(b"/data/../data/f")), Ok("db/f".into()));
        assert_eq!(s(x.map(b"/data/../../../f")), Ok("f".into()));
        assert_eq!(s(x.map(b"/data/x/../../y")), Ok("y".into()));
    }

    #[test]
    fn map_rules_take_whole_components_longest_first() {
        let x = m(&[("/data", "db"), ("/data/logs", "wal")], &[]);
        assert_eq!(s(x.map(b"/data/t1")), Ok("db/t1".into()));
        assert_eq!(s(x.map(b"/data/logs/0001")), Ok("wal/0001".into()));
        assert_eq!(s(x.map(b"/database/x")), Ok("database/x".into()));
        assert_eq!(s(x.map(b"/data")), Ok("db".into()));
    }

    #[test]
    fn bad_rules_are_refused() {
        let bad = |old: &str, new: &str| Mapper::new(&[(old.into(), new.into())], &[]).unwrap_err();
        assert!(bad("/data", "/etc").contains("relative"));
        assert!(bad("/data", "../x").contains("climbs"));
        assert!(bad("", "x").contains("empty"));
    }

    #[test]
    fn special_files_and_selection() {
        let x = m(&[], &["/work"]);
        assert_eq!(x.map(b"pipe:[1234]"), Err(PathRefusal::Special));
        assert_eq!(x.map(b"socket:[9]"), Err(PathRefusal::Special));
        assert_eq!(x.map(b"/dev/null"), Err(PathRefusal::Special));
        assert_eq!(x.map(b"/proc/self/maps"), Err(PathRefusal::Special));
        assert_eq!(x.map(b"/etc/ld.so.cache"), Err(PathRefusal::NotSelected));
        assert_eq!(x.map(b"/workshop/x"), Err(PathRefusal::NotSelected));
        assert_eq!(s(x.map(b"/work/a")), Ok("work/a".into()));
        assert_eq!(x.map(b"anon_inode:[eventfd]"), Err(PathRefusal::Special));
        // a file whose name looks like a label is a file
        assert!(!is_special(b"/work/x:[1]"));
        assert!(!is_special(b"/work/pipe:[1]"));
        assert!(!is_special(b"x:[1]a"));
        assert!(!is_special(b"notes:[draft]"));
        assert!(!is_special(b"/dev/shm/seg"));
        assert!(!is_special(b"/device/x"));
    }
}
