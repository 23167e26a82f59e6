//! Plans built from hand-written rows, run on temporary directories.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::paths::Mapper;
use super::plan::{Kind, Plan, PlanBuilder, Prep, Row, SkipReason};
use super::run::{copy_roots, prepare, RunConfig, Runner, Timing};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("th-replay-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A row: (ts us, producer, name, fd, path, pos, size, ret).
fn row<'a>(ts_us: i64, producer: i32, name: &'a str) -> Row<'a> {
    Row { ts: ts_us * 1000, dur: 1000, producer, name, ..Default::default() }
}

fn open<'a>(ts: i64, p: i32, path: &'a str, flags: &'a str, fd: i64) -> Row<'a> {
    Row { path: Some(path.as_bytes()), flags: Some(flags), ret: Some(fd), ..row(ts, p, "openat") }
}

fn rw<'a>(ts: i64, p: i32, name: &'a str, fd: i64, pos: i64, size: i64, ret: i64) -> Row<'a> {
    Row { fd: Some(fd), pos: Some(pos), size: Some(size), ret: Some(ret), ..row(ts, p, name) }
}

fn fdcall<'a>(ts: i64, p: i32, name: &'a str, fd: i64) -> Row<'a> {
    Row { fd: Some(fd), ret: Some(0), ..row(ts, p, name) }
}

fn build(rows: &[Row<'_>], maps: &[(&str, &str)]) -> Plan {
    let maps: Vec<_> = maps.iter().map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec())).collect();
    // producers 11, 12 are threads of process 10
    let process_of: HashMap<i32, i32> = [(11, 10), (12, 10), (10, 10)].into();
    let mut b = PlanBuilder::new(Mapper::new(&maps, &[]).unwrap(), process_of, HashMap::new());
    for (i, r) in rows.iter().enumerate() {
        b.push(i as u32, r);
    }
    b.finish()
}

fn run(plan: Plan, root: &std::path::Path, copies: usize, timing: Timing) -> Vec<Vec<Vec<super::run::Rec>>> {
    let plan = Arc::new(plan);
    let roots = copy_roots(root, copies).unwrap();
    let prepared = prepare(&plan, &roots, false);
    assert!(prepared.iter().all(|p| p.errors.is_empty()), "{prepared:?}");
    let r =
        Runner::start(plan, roots, &RunConfig { copies, timing, spin_ns: None, lead_ns: 1_000_000, realtime: false })
            .unwrap();
    r.join()
}

/// Two threads of one process: thread 11 writes then reads back /data/a; thread 12 reads
/// a pre-existing file /data/b (a short read at its end) through an fd that thread 11
/// opened, and writes /data/c through an fd it got by dup.
fn two_threads() -> Vec<Row<'static>> {
    vec![
        open(0, 11, "/data/a", "O_WRONLY|O_CREAT|O_TRUNC", 3),
        open(5, 11, "/data/b", "O_RDONLY", 4),
        rw(10, 11, "write", 3, 0, 4096, 4096),
        rw(20, 12, "pread64", 4, 0, 8192, 8192),
        rw(30, 11, "write", 3, 4096, 100, 100),
        rw(40, 12, "pread64", 4, 8192, 8192, 1000), // short: b is 9192 bytes
        fdcall(50, 11, "fsync", 3),
        fdcall(60, 12, "close", 4),
        open(70, 12, "/data/c", "O_RDWR|O_CREAT", 5),
        Row { fd: Some(5), ret: Some(6), ..row(75, 12, "dup") },
        rw(80, 12, "write", 6, 0, 10, 10),
        fdcall(90, 12, "close", 5),
        rw(95, 12, "write", 6, 10, 10, 10),
        fdcall(99, 12, "close", 6),
        fdcall(100, 11, "close", 3),
        Row { fd: Some(7), ret: Some(1), size: Some(1), ..row(101, 11, "write") }, // fd never opened
        Row { ret: Some(0x7f00), ..row(102, 11, "mmap") },
        Row { path: Some(b"/data/c"), path2: Some(b"/data/d"), ret: Some(0), ..row(110, 12, "rename") },
        Row { path: Some(b"/data/a"), ret: Some(0), ..row(120, 11, "unlink") },
    ]
}

#[test]
fn plan_has_threads_slots_dependencies_and_preparation() {
    let plan = build(&two_threads(), &[("/data", "db")]);
    assert_eq!(plan.threads.len(), 2);
    let (t11, t12) = (&plan.threads[0], &plan.threads[1]);
    assert_eq!((t11.producer, t12.producer), (11, 12));
    let kinds = |t: &super::plan::ThreadPlan| t.ops.iter().map(|o| o.kind).collect::<Vec<_>>();
    assert_eq!(kinds(t11), [Kind::Open, Kind::Open, Kind::Write, Kind::Write, Kind::Fsync, Kind::Close, Kind::Unlink]);
    assert_eq!(
        kinds(t12),
        [
            Kind::Pread,
            Kind::Pread,
            Kind::Close,
            Kind::Open,
            Kind::Dup,
            Kind::Write,
            Kind::Close,
            Kind::Write,
            Kind::Close,
            Kind::Rename
        ]
    );
    // thread 12's first pread waits for thread 11's open of b (completed before it in the trace)
    let d = plan.deps_of(&t12.ops[0]);
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].thread, d[0].idx, d[0].complete), (0, 1, true));
    // the dup'ed slot's writes and the close of the original fd need no other thread
    assert!(t12.ops[4..].iter().all(|o| plan.deps_of(o).is_empty()));
    // thread 11's unlink of a: same thread as everything on a, no dependency
    assert!(plan.deps_of(&t11.ops[6]).is_empty());
    assert_eq!(t12.ops[0].slot, t11.ops[1].new_slot);
    assert_eq!(t12.ops[5].slot, t12.ops[4].new_slot);
    // skipped: the write on an fd never opened, the mmap
    assert_eq!(plan.skips, vec![(15, SkipReason::FdBeforeTrace), (16, SkipReason::Unsupported)]);
    // planned offsets and think gaps
    assert_eq!(t12.ops[0].at, 20_000);
    assert_eq!(t12.ops[1].gap, 40_000 - 21_000);
    assert_eq!(plan.span, 121_000);
    let path = |p: &Prep| match *p {
        Prep::Dir(i) | Prep::File(i, _) | Prep::Absent(i) => String::from_utf8(plan.paths[i as usize].clone()).unwrap(),
    };
    let prep: Vec<(String, Option<u64>, bool)> = plan
        .prep
        .iter()
        .map(|p| (path(p), if let Prep::File(_, s) = p { Some(*s) } else { None }, matches!(p, Prep::Dir(_))))
        .collect();
    assert_eq!(
        prep,
        vec![
            ("db".into(), None, true),
            ("db/a".into(), None, false), // created by the trace (O_TRUNC): absent first
            ("db/b".into(), Some(9192), false), // read, short read at 9192
            ("db/c".into(), None, false), // O_CREAT and never read: absent first
            ("db/d".into(), None, false), // rename target: absent first
        ]
    );
}

#[test]
fn replay_writes_the_traced_sizes_in_order() {
    let dir = TempDir::new("sizes");
    let plan = build(&two_threads(), &[("/data", "db")]);
    let recs = run(plan, &dir.0, 1, Timing::Original(1.0));
    let root = dir.0.clone();
    assert!(!root.join("db/a").exists(), "unlinked at the end");
    assert_eq!(std::fs::metadata(root.join("db/b")).unwrap().len(), 9192);
    assert_eq!(std::fs::metadata(root.join("db/d")).unwrap().len(), 20);
    assert!(!root.join("db/c").exists());
    let t12 = &recs[0][1];
    assert_eq!(t12.iter().map(|r| r.ret).take(2).collect::<Vec<_>>(), [8192, 1000]);
    for r in recs[0].iter().flatten() {
        assert_eq!(r.errno, 0, "{recs:?}");
        assert!(r.issue >= r.planned, "never early: {r:?}");
        assert!(r.done >= r.issue);
    }
}

#[test]
fn copies_get_their_own_roots() {
    let dir = TempDir::new("copies");
    let plan = build(&two_threads(), &[("/data", "db")]);
    let recs = run(plan, &dir.0, 3, Timing::Asap);
    assert_eq!(recs.len(), 3);
    for (k, rec) in recs.iter().enumerate() {
        assert_eq!(std::fs::metadata(dir.0.join(format!("copy-{k}/db/d"))).unwrap().len(), 20);
        assert!(rec.iter().flatten().all(|r| r.errno == 0 && r.planned == i64::MIN));
    }
}

#[test]
fn a_symlink_planted_in_the_root_does_not_lead_out() {
    let dir = TempDir::new("escape");
    let outside = TempDir::new("outside");
    let root = dir.0.join("root");
    std::fs::create_dir_all(root.join("db")).unwrap();
    std::os::unix::fs::symlink(&outside.0, root.join("db/evil")).unwrap();
    std::os::unix::fs::symlink("../../..", root.join("db/up")).unwrap();
    let rows = vec![
        open(0, 11, "/data/evil/x", "O_WRONLY|O_CREAT", 3),
        rw(1, 11, "write", 3, 0, 10, 10),
        open(2, 11, "/data/up/tmp/y", "O_WRONLY|O_CREAT", 4),
        Row { path: Some(b"/data/evil/z"), ret: Some(0), ..row(3, 11, "unlink") },
    ];
    std::fs::write(outside.0.join("z"), b"keep").unwrap();
    let plan = Arc::new(build(&rows, &[("/data", "db")]));
    let roots = copy_roots(&root, 1).unwrap();
    let prepared = prepare(&plan, &roots, false);
    // preparing db/evil (a directory on the way) is refused by the kernel, not followed
    assert!(prepared[0].errors.iter().all(|(_, e)| *e == libc::EXDEV || *e == libc::ENOTDIR), "{prepared:?}");
    let r = Runner::start(
        plan,
        roots,
        &RunConfig { copies: 1, timing: Timing::Asap, spin_ns: None, lead_ns: 0, realtime: false },
    )
    .unwrap();
    let recs = r.join();
    let errnos: Vec<i32> = recs[0][0].iter().map(|r| r.errno).collect();
    assert_eq!(errnos, [libc::EXDEV, libc::EBADF, libc::EXDEV, libc::EXDEV]);
    assert_eq!(std::fs::read_dir(&outside.0).unwrap().count(), 1);
    assert_eq!(std::fs::read(outside.0.join("z")).unwrap(), b"keep");
}

#[test]
fn overlapping_calls_wait_only_for_issue() {
    // thread 12's pwrite starts while thread 11's pwrite on the same file is running
    let rows = vec![
        open(0, 11, "/f", "O_RDWR|O_CREAT", 3),
        Row { dur: 50_000, ..rw(10, 11, "pwrite64", 3, 0, 10, 10) },
        rw(20, 12, "pwrite64", 3, 10, 10, 10),
    ];
    let plan = build(&rows, &[]);
    let d = plan.deps_of(&plan.threads[1].ops[0]);
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].idx, d[0].complete), (1, false));
}

#[test]
fn preads_of_two_threads_do_not_wait_for_each_other() {
    let rows = vec![
        open(0, 11, "/f", "O_RDONLY", 3),
        rw(10, 11, "pread64", 3, 0, 10, 10),
        rw(20, 12, "pread64", 3, 10, 10, 10),
        rw(30, 11, "pread64", 3, 20, 10, 10),
        rw(40, 12, "write", 3, 30, 10, 10), // a write waits for both threads' reads
    ];
    let plan = build(&rows, &[]);
    let t12 = &plan.threads[1];
    // first pread: only the open
    assert_eq!(plan.deps_of(&t12.ops[0]).iter().map(|d| d.idx).collect::<Vec<_>>(), [0]);
    assert!(plan.deps_of(&plan.threads[0].ops[2]).is_empty());
    assert_eq!(plan.deps_of(&t12.ops[1]).iter().map(|d| (d.thread, d.idx)).collect::<Vec<_>>(), [(0, 2)]);
    match plan.prep[..] {
        [Prep::File(_, 30)] => {}
        ref p => panic!("{p:?}"),
    }
}

#[test]
fn special_files_and_failed_fd_calls_are_skipped_with_their_reason() {
    let rows = vec![
        open(0, 11, "/dev/null", "O_WRONLY", 3),
        rw(1, 11, "write", 3, 0, 10, 10),
        Row { fd: Some(1), path: Some(b"/dev/pts/0"), size: Some(5), ret: Some(5), ..row(2, 11, "write") },
        Row { fd: Some(9), path: Some(b"pipe:[77]"), size: Some(5), ret: Some(5), ..row(3, 11, "read") },
        open(4, 11, "/w", "O_RDONLY", 4),
        Row { errno: Some("EAGAIN"), ..rw(5, 11, "read", 4, 0, 10, -1) },
        Row { ret: None, ..rw(6, 11, "read", 4, 0, 10, 0) },
        open(7, 11, "/nope", "O_RDONLY", -1),
    ];
    let mut rows = rows;
    rows[7].errno = Some("ENOENT");
    let plan = build(&rows, &[]);
    let why: Vec<_> = plan.skips.iter().map(|s| s.1).collect();
    assert_eq!(
        why,
        [
            SkipReason::NotAFile,
            SkipReason::NotAFile,
            SkipReason::NotAFile,
            SkipReason::NotAFile,
            SkipReason::FailedInTrace,
            SkipReason::NoResult
        ]
    );
    // the failed open is replayed (the lookup is real work) and its path prepared absent
    assert_eq!(plan.threads[0].ops.iter().map(|o| o.kind).collect::<Vec<_>>(), [Kind::Open, Kind::Open]);
    assert!(plan.prep.iter().any(|p| matches!(p, Prep::Absent(i) if plan.paths[*i as usize] == b"nope")));
}

#[test]
fn stat_and_seek_end_give_the_size_of_a_file_never_read() {
    let rows = vec![
        open(0, 11, "/s", "O_RDONLY", 3),
        Row {
            fd: Some(3),
            args: Some("{st_mode=S_IFREG|0644, st_size=12345, ...}"),
            ret: Some(0),
            ..row(1, 11, "fstat")
        },
        open(2, 11, "/e", "O_RDWR", 4),
        Row { fd: Some(4), pos: Some(0), flags: Some("SEEK_END"), ret: Some(777), ..row(3, 11, "lseek") },
    ];
    let plan = build(&rows, &[]);
    let sizes: Vec<_> = plan
        .prep
        .iter()
        .filter_map(|p| if let Prep::File(i, s) = p { Some((plan.paths[*i as usize].clone(), *s)) } else { None })
        .collect();
    assert_eq!(sizes, vec![(b"s".to_vec(), 12345), (b"e".to_vec(), 777)]);
}

fn errnos(recs: &[Vec<Vec<super::run::Rec>>]) -> Vec<i32> {
    recs[0][0].iter().map(|r| r.errno).collect()
}

fn start(plan: Plan, root: &std::path::Path) -> (Arc<Plan>, Vec<super::fsroot::Root>) {
    let plan = Arc::new(plan);
    let roots = copy_roots(root, 1).unwrap();
    let prepared = prepare(&plan, &roots, false);
    assert!(prepared[0].errors.is_empty(), "{prepared:?}");
    (plan, roots)
}

fn go(plan: Arc<Plan>, roots: Vec<super::fsroot::Root>) -> Vec<Vec<Vec<super::run::Rec>>> {
    let cfg = RunConfig { copies: 1, timing: Timing::Asap, spin_ns: None, lead_ns: 0, realtime: false };
    Runner::start(plan, roots, &cfg).unwrap().join()
}

#[test]
fn test_issue29_a_hard_link_is_copied_before_preparing_and_refused_when_planted_later() {
    let dir = TempDir::new("hardlink");
    let outside = TempDir::new("hl-outside");
    let victim = outside.0.join("victim");
    std::fs::write(&victim, b"123456789").unwrap();
    let root = dir.0.join("root");
    std::fs::create_dir_all(root.join("db")).unwrap();
    std::fs::hard_link(&victim, root.join("db/hl")).unwrap();
    // a file opened for writing without O_CREAT: it must exist, prepared at 9 bytes
    let rows = vec![open(0, 11, "/data/hl", "O_WRONLY|O_APPEND", 3), rw(1, 11, "write", 3, 9, 100, 100)];
    let (plan, roots) = start(build(&rows, &[("/data", "db")]), &root);
    // preparing replaced the second name by a copy: the outside file has one link again
    assert_eq!(std::fs::metadata(&victim).unwrap().nlink(), 1);
    // planted after preparing (between plan and run): the write-open is refused
    std::fs::remove_file(root.join("db/hl")).unwrap();
    std::fs::hard_link(&victim, root.join("db/hl")).unwrap();
    assert_eq!(errnos(&go(plan, roots)), [libc::EXDEV, libc::EBADF]);
    assert_eq!(std::fs::read(&victim).unwrap(), b"123456789");
    // a link the trace makes itself is written through
    let rows = vec![
        open(0, 11, "/data/a", "O_WRONLY|O_CREAT|O_EXCL", 3),
        fdcall(1, 11, "close", 3),
        Row { path: Some(b"/data/a"), path2: Some(b"/data/b"), ret: Some(0), ..row(2, 11, "link") },
        open(3, 11, "/data/b", "O_WRONLY", 4),
        rw(4, 11, "write", 4, 0, 10, 10),
    ];
    let (plan, roots) = start(build(&rows, &[("/data", "db")]), &root);
    assert_eq!(errnos(&go(plan, roots)), [0; 5]);
    assert_eq!(std::fs::metadata(root.join("db/a")).unwrap().len(), 10);
}

use std::os::unix::fs::MetadataExt;

#[test]
fn test_issue29_a_directory_the_trace_makes_is_made_by_its_mkdir() {
    let failed = |mut r: Row<'static>, e: &'static str| {
        r.errno = Some(e);
        r.ret = Some(-1);
        r
    };
    let rows = vec![
        // git: the object's directory does not exist yet; make it, then create the object
        failed(open(0, 11, "/repo/objects/9f/tmp", "O_RDWR|O_CREAT|O_EXCL", -1), "ENOENT"),
        Row {
            path: Some(b"/repo/objects/9f"),
            args: Some("\"/repo/objects/9f\", 0777"),
            ret: Some(0),
            ..row(1, 11, "mkdir")
        },
        open(2, 11, "/repo/objects/9f/tmp", "O_RDWR|O_CREAT|O_EXCL", 3),
        rw(3, 11, "write", 3, 0, 10, 10),
        fdcall(4, 11, "close", 3),
        Row {
            path: Some(b"/repo/objects/9f/tmp"),
            path2: Some(b"/repo/objects/9f/ab"),
            ret: Some(0),
            ..row(5, 11, "link")
        },
        Row { path: Some(b"/repo/objects/9f/tmp"), ret: Some(0), ..row(6, 11, "unlink") },
        Row {
            path: Some(b"/repo/objects/x"),
            path2: Some(b"/repo/objects/9f/ln"),
            target: Some(b"/repo/objects/9f/ab"),
            ret: Some(0),
            ..row(7, 11, "symlink")
        },
        open(8, 11, "/repo/objects/9f/ln", "O_RDONLY", 4),
        rw(9, 11, "read", 4, 0, 100, 10),
        // the parent existed: a file in it was opened before
        open(10, 11, "/repo/objects/pack", "O_RDONLY|O_DIRECTORY", 5),
    ];
    let plan = build(&rows, &[]);
    let named = |i: u32| String::from_utf8(plan.paths[i as usize].clone()).unwrap();
    let dirs: Vec<String> =
        plan.prep.iter().filter_map(|p| if let Prep::Dir(i) = p { Some(named(*i)) } else { None }).collect();
    assert_eq!(dirs, ["repo", "repo/objects", "repo/objects/pack"]);
    assert!(plan.prep.iter().any(|p| matches!(p, Prep::Absent(i) if named(*i) == "repo/objects/9f")));
    // the symlink's absolute target is made relative to its directory, beneath the root
    assert_eq!(plan.targets, [b"../../../repo/objects/9f/ab".to_vec()]);
    let root = TempDir::new("mkdir-root");
    for _ in 0..2 {
        // twice into the same root: the first run's directory is removed before the second
        let plan = build(&rows, &[]);
        let (plan, roots) = start(plan, &root.0);
        assert_eq!(errnos(&go(plan, roots)), [libc::ENOENT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(std::fs::metadata(root.0.join("repo/objects/9f/ab")).unwrap().len(), 10);
        assert!(!root.0.join("repo/objects/9f/tmp").exists());
    }
}

#[test]
fn test_issue29_copies_replay_with_the_fds_positions_or_as_the_side_they_have() {
    let src = "3</s>, NULL, 4</d>, NULL, 9223372035781033984, 0";
    let rows = vec![
        open(0, 11, "/s", "O_RDONLY", 3),
        open(1, 11, "/d", "O_WRONLY|O_CREAT|O_EXCL", 4),
        Row {
            fd2: Some(4),
            pos2: Some(0),
            args: Some(src),
            ..rw(2, 11, "copy_file_range", 3, 0, 9223372035781033984, 5000)
        },
        Row {
            fd2: Some(4),
            pos2: Some(5000),
            args: Some(src),
            ..rw(3, 11, "copy_file_range", 3, 5000, 9223372035781033984, 0)
        },
        // sendfile with an explicit offset into the same file: the source position stays
        Row {
            fd2: Some(4),
            pos2: Some(5000),
            args: Some("4</d>, 3</s>, [100] => [200], 100"),
            ..rw(4, 11, "sendfile", 3, 100, 100, 100)
        },
        // splice into a pipe: the read it is on the file's side
        Row {
            fd2: Some(9),
            path2: Some(b"pipe:[1]"),
            args: Some("3</s>, NULL, 9<pipe:[1]>, NULL, 50, 0"),
            ..rw(5, 11, "splice", 3, 5000, 50, 0)
        },
        rw(6, 11, "read", 3, 5000, 10, 0),
    ];
    let plan = build(&rows, &[]);
    let kinds: Vec<Kind> = plan.threads[0].ops.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        [Kind::Open, Kind::Open, Kind::CopyRange, Kind::CopyRange, Kind::Sendfile, Kind::Read, Kind::Read]
    );
    assert!(matches!(plan.prep[..], [Prep::File(_, 5000), Prep::Absent(_)]), "{:?}", plan.prep);
    let root = TempDir::new("copy");
    let (plan, roots) = start(plan, &root.0);
    let recs = go(plan, roots);
    let rets: Vec<i64> = recs[0][0].iter().map(|r| r.ret).collect();
    // both copies moved the fds' positions: the final read is at the end of s
    assert_eq!(rets, [rets[0], rets[1], 5000, 0, 100, 0, 0]);
    assert_eq!(std::fs::metadata(root.0.join("d")).unwrap().len(), 5100);
}

#[test]
fn test_issue29_an_fd_number_reused_while_another_thread_opens_means_the_earlier_file() {
    // thread 12's open of /b started at 15 and returned 3 at 25: thread 11's write at 18 and
    // close at 20 are on /a, its fd 3 until then.
    let rows = vec![
        open(0, 11, "/a", "O_WRONLY|O_CREAT", 3),
        Row { dur: 10_000, ..open(15, 12, "/b", "O_WRONLY|O_CREAT", 3) },
        rw(18, 11, "write", 3, 0, 10, 10),
        fdcall(20, 11, "close", 3),
        rw(30, 12, "write", 3, 0, 20, 20),
        fdcall(40, 12, "close", 3),
    ];
    let plan = build(&rows, &[]);
    let (t11, t12) = (&plan.threads[0], &plan.threads[1]);
    assert_eq!((t11.ops[1].slot, t11.ops[2].slot), (t11.ops[0].new_slot, t11.ops[0].new_slot));
    assert_eq!((t12.ops[1].slot, t12.ops[2].slot), (t12.ops[0].new_slot, t12.ops[0].new_slot));
}

#[test]
fn an_fd_number_reused_by_two_pending_opens_means_the_file_it_held_when_the_call_started() {
    // Three threads churn through fd 3 (shutil.copytree in threads, strace slowed by load):
    // thread 11 reads /a through fd 3 until its close at 40; thread 12's open of /b started
    // at 15 and returned 3 at 45, and thread 10's open of /c started at 16 and returned 3 at
    // 60, after 12 closed it at 50. Thread 11's read at 30 is on /a, not on /b.
    let rows = vec![
        open(0, 11, "/a", "O_RDONLY", 3),
        Row { dur: 30_000, ..open(15, 12, "/b", "O_RDONLY", 3) },
        Row { dur: 44_000, ..open(16, 10, "/c", "O_RDONLY", 3) },
        rw(30, 11, "pread64", 3, 0, 10, 10),
        fdcall(40, 11, "close", 3),
        rw(47, 12, "pread64", 3, 0, 10, 10),
        fdcall(50, 12, "close", 3),
        rw(70, 10, "pread64", 3, 0, 10, 10),
        fdcall(80, 10, "close", 3),
    ];
    let plan = build(&rows, &[]);
    for t in &plan.threads {
        let opened = t.ops[0].new_slot;
        assert!(t.ops[1..].iter().all(|o| o.slot == opened), "{:?}", t.ops);
    }
}

#[test]
fn test_issue29_stats_of_the_root_and_through_a_dirfd() {
    let rows = vec![
        // ls -ld /: the root itself is never prepared
        Row {
            path: Some(b"/"),
            args: Some("\"/\", {st_mode=S_IFDIR|0755, st_size=4096, ...}"),
            ret: Some(0),
            ..row(0, 11, "statx")
        },
        open(1, 11, "/src", "O_RDONLY|O_DIRECTORY", 3),
        // tar: fstatat(3</src>, "empty") names the file, not the directory fd 3
        Row {
            fd: Some(3),
            path: Some(b"/src/empty"),
            args: Some("3</src>, \"empty\", {st_mode=S_IFREG|0644, st_size=0, ...}, AT_SYMLINK_NOFOLLOW"),
            ret: Some(0),
            ..row(2, 11, "newfstatat")
        },
        Row {
            fd: Some(3),
            path: Some(b"/src"),
            args: Some("3</src>, \"\", {st_mode=S_IFDIR|0755, st_size=4096, ...}, AT_EMPTY_PATH"),
            ret: Some(0),
            ..row(3, 11, "newfstatat")
        },
    ];
    let plan = build(&rows, &[]);
    let named = |i: u32| String::from_utf8(plan.paths[i as usize].clone()).unwrap();
    let prep: Vec<(String, Option<u64>)> = plan
        .prep
        .iter()
        .map(|p| match *p {
            Prep::Dir(i) => (named(i), None),
            Prep::File(i, s) => (named(i), Some(s)),
            Prep::Absent(i) => (named(i), Some(u64::MAX)),
        })
        .collect();
    assert_eq!(prep, [("src".to_string(), None), ("src/empty".to_string(), Some(0))]);
    assert!(plan.skips.iter().all(|s| s.1 == SkipReason::Stat));
}
