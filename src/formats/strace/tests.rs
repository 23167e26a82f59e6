//! Tests of the strace parser on lines copied from real strace 6.1 output (over 600 lines:
//! one case per line shape strace prints; they read best side by side).

use arrow_array::{Array, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray};

use super::*;

/// Every batch of one event type concatenated, as rows of strings ("" for null).
#[derive(Debug, Default)]
struct Table {
    cols: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn col(&self, name: &str) -> Vec<String> {
        let k = self.cols.iter().position(|c| c == name).unwrap_or_else(|| panic!("no column {name}"));
        self.rows.iter().map(|r| r[k].clone()).collect()
    }

    fn get(&self, row: usize, name: &str) -> String {
        self.col(name)[row].clone()
    }
}

fn cell(a: &dyn Array, i: usize) -> String {
    if a.is_null(i) {
        return String::new();
    }
    if let Some(x) = a.as_any().downcast_ref::<Int64Array>() {
        return x.value(i).to_string();
    }
    if let Some(x) = a.as_any().downcast_ref::<Int32Array>() {
        return x.value(i).to_string();
    }
    if let Some(x) = a.as_any().downcast_ref::<StringArray>() {
        return x.value(i).to_string();
    }
    if let Some(x) = a.as_any().downcast_ref::<BooleanArray>() {
        return x.value(i).to_string();
    }
    panic!("unexpected type")
}

fn tables(batches: &[(&'static str, RecordBatch)]) -> [Table; 3] {
    let mut out: [Table; 3] = Default::default();
    for (k, t) in out.iter_mut().enumerate() {
        t.cols = schema(k).fields().iter().map(|f| f.name().clone()).collect();
    }
    for (name, b) in batches {
        let k = EVENT_TYPES.iter().position(|n| n == name).unwrap();
        assert_eq!(b.schema(), schema(k));
        for i in 0..b.num_rows() {
            out[k].rows.push(b.columns().iter().map(|c| cell(c.as_ref(), i)).collect());
        }
    }
    out
}

fn parse_with(text: &str, cfg: Config, chunk: usize) -> (StraceParser, [Table; 3]) {
    parse_pieces(cfg, text.as_bytes().chunks(chunk.max(1)))
}

/// Feeds the pieces in order, then the end; the parser and its tables.
fn parse_pieces<'a>(cfg: Config, pieces: impl Iterator<Item = &'a [u8]>) -> (StraceParser, [Table; 3]) {
    let mut p = StraceParser::new(cfg, &[None]);
    let mut batches = Vec::new();
    for c in pieces.filter(|c| !c.is_empty()) {
        p.feed(0, c);
        batches.extend(p.take_batches());
    }
    p.feed(0, b"");
    p.finish();
    batches.extend(p.take_batches());
    batches.extend(p.take_late());
    let t = tables(&batches);
    (p, t)
}

fn parse(text: &str) -> (StraceParser, [Table; 3]) {
    parse_with(text, Config::default(), usize::MAX)
}

const THREADS: &str = "\
25886 1795366107.340333 execve(\"./mt\", [\"./mt\"], 0x7fff7abe3348 /* 35 vars */) = 0 <0.000130>
25886 1795366107.341124 openat(AT_FDCWD</tmp/st>, \"/etc/ld.so.cache\", O_RDONLY|O_CLOEXEC) = 3</etc/ld.so.cache> <0.000005>
25886 1795366107.341239 close(3</etc/ld.so.cache>) = 0 <0.000003>
25886 1795366107.341784 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x7fb704d8d990, parent_tid=0x7fb704d8d990, exit_signal=0, stack=0x7fb70458d000, stack_size=0x7fff80, tls=0x7fb704d8d6c0} => {parent_tid=[25887]}, 88) = 25887 <0.000027>
25887 1795366107.341833 rseq(0x7fb704d8dfe0, 0x20, 0, 0x53053053 <unfinished ...>
25886 1795366107.341839 rt_sigprocmask(SIG_SETMASK, [],  <unfinished ...>
25887 1795366107.341846 <... rseq resumed>) = 0 <0.000010>
25886 1795366107.341852 <... rt_sigprocmask resumed>NULL, 8) = 0 <0.000009>
25887 1795366107.342198 openat(AT_FDCWD</tmp/st>, \"/tmp/st/out-1.dat\", O_WRONLY|O_CREAT|O_TRUNC, 0644 <unfinished ...>
25887 1795366107.342242 <... openat resumed>) = 4</tmp/st/out-1.dat> <0.000036>
25887 1795366107.342308 write(4</tmp/st/out-1.dat>, \"\"..., 4096 <unfinished ...>
25887 1795366107.342329 <... write resumed>) = 4096 <0.000015>
25887 1795366107.342811 write(4</tmp/st/out-1.dat>, \"\"..., 4096) = 4096 <0.000007>
25887 1795366107.343960 lseek(4</tmp/st/out-1.dat>, 0, SEEK_SET <unfinished ...>
25887 1795366107.344020 <... lseek resumed>) = 0 <0.000026>
25887 1795366107.344050 pwrite64(4</tmp/st/out-1.dat>, \"\"..., 100, 8192 <unfinished ...>
25887 1795366107.344085 <... pwrite64 resumed>) = 100 <0.000025>
25887 1795366107.344247 read(4</tmp/st/out-1.dat>,  <unfinished ...>
25887 1795366107.344283 <... read resumed>\"\"..., 1000) = 1000 <0.000032>
25887 1795366107.346234 exit(0 <unfinished ...>
25887 1795366107.346258 <... exit resumed>) = ?
25887 1795366107.346297 +++ exited with 0 +++
25886 1795366107.346400 exit_group(0)   = ?
25886 1795366107.346500 +++ exited with 0 +++
";

#[test]
fn threads_pairs_unfinished_calls_and_types_io() {
    let (p, [sys, sig, exit]) = parse(THREADS);
    assert_eq!(p.rejects(), &[]);
    assert_eq!(p.stats().lines, 24);
    assert_eq!(sys.rows.len(), 14);
    assert_eq!(exit.rows.len(), 2);
    assert_eq!(sig.rows.len(), 0);
    // Sorted by ts although completed out of order.
    let ts: Vec<i64> = sys.col("ts").iter().map(|s| s.parse().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
    assert_eq!(
        sys.col("name"),
        [
            "execve",
            "openat",
            "close",
            "clone3",
            "rseq",
            "rt_sigprocmask",
            "openat",
            "write",
            "write",
            "lseek",
            "pwrite64",
            "read",
            "exit",
            "exit_group"
        ]
    );
    let row = |n: &str, k: usize| sys.rows.iter().filter(|r| r[4] == n).nth(k).unwrap().clone();
    let get = |r: &Vec<String>, c: &str| r[sys.cols.iter().position(|x| x == c).unwrap()].clone();
    // The unfinished rseq: start from its first line, duration from -T.
    let rseq = row("rseq", 0);
    assert_eq!(get(&rseq, "ts"), "1795366107341833000");
    assert_eq!(get(&rseq, "dur"), "10000");
    assert_eq!(get(&rseq, "ret"), "0");
    assert_eq!(get(&rseq, "args"), "0x7fb704d8dfe0, 0x20, 0, 0x53053053");
    // Arguments split across both lines.
    let mask = row("rt_sigprocmask", 0);
    assert_eq!(get(&mask, "args"), "SIG_SETMASK, [], NULL, 8");
    let open = row("openat", 1);
    assert_eq!(get(&open, "path"), "/tmp/st/out-1.dat");
    assert_eq!(get(&open, "flags"), "O_WRONLY|O_CREAT|O_TRUNC");
    assert_eq!(get(&open, "ret"), "4");
    assert_eq!(get(&open, "fd"), "");
    let w0 = row("write", 0);
    assert_eq!(get(&w0, "fd"), "4");
    assert_eq!(get(&w0, "path"), "/tmp/st/out-1.dat");
    assert_eq!(get(&w0, "size"), "4096");
    assert_eq!(get(&w0, "pos"), "0");
    assert_eq!(get(&w0, "args"), "");
    let w1 = row("write", 1);
    assert_eq!(get(&w1, "pos"), "4096");
    assert_eq!(get(&row("lseek", 0), "flags"), "SEEK_SET");
    assert_eq!(get(&row("lseek", 0), "pos"), "0");
    let pw = row("pwrite64", 0);
    assert_eq!((get(&pw, "pos"), get(&pw, "size"), get(&pw, "ret")), ("8192".into(), "100".into(), "100".into()));
    // read after lseek(0): offset 0 (pwrite64 does not move the position).
    let rd = row("read", 0);
    assert_eq!((get(&rd, "pos"), get(&rd, "size"), get(&rd, "ret")), ("0".into(), "1000".into(), "1000".into()));
    assert_eq!(get(&row("exit", 0), "ret"), "");
    assert_eq!(get(&row("exit_group", 0), "ret"), "");
    assert_eq!(exit.col("status"), ["0", "0"]);
    assert_eq!(exit.col("core"), ["false", "false"]);
    // Producers: process mt (pid 25886) with threads 25886 and 25887.
    let prods = p.producers();
    let procs: Vec<_> = prods.iter().filter(|p| p.kind == "process").collect();
    assert_eq!(procs.len(), 1);
    assert_eq!(procs[0].name, "mt");
    assert_eq!(procs[0].os_id, 25886);
    let threads: Vec<_> = prods.iter().filter(|p| p.kind == "thread").collect();
    assert_eq!(threads.len(), 2);
    assert!(threads.iter().all(|t| t.parent == Some(procs[0].id) && t.pid == Some(25886)));
    assert_eq!(threads.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["mt/25886", "mt/25887"]);
    // seq numbers each producer's events from 0 in ts order, over syscalls and exits.
    let t2 = threads[1].id.to_string();
    let mut seqs: Vec<(i64, i64)> = sys
        .rows
        .iter()
        .chain(exit.rows.iter())
        .filter(|r| r[1] == t2)
        .map(|r| (r[0].parse().unwrap(), r[2].parse().unwrap()))
        .collect();
    seqs.sort();
    assert_eq!(seqs.iter().map(|s| s.1).collect::<Vec<_>>(), (0..seqs.len() as i64).collect::<Vec<_>>());
}

#[test]
fn any_chunking_gives_the_same_events() {
    let (_, whole) = parse(THREADS);
    for chunk in [1, 2, 3, 7, 64, 100, 1000] {
        let (_, t) = parse_with(THREADS, Config::default(), chunk);
        for k in 0..3 {
            assert_eq!(t[k].rows, whole[k].rows, "chunk {chunk}, type {k}");
        }
    }
}

#[test]
fn small_batches_stay_sorted_and_complete() {
    let (_, whole) = parse(THREADS);
    let cfg = Config { batch_rows: 2, ..Config::default() };
    let mut p = StraceParser::new(cfg, &[None]);
    p.feed(0, THREADS.as_bytes());
    p.finish();
    let batches = p.take_batches();
    assert!(p.take_late().is_empty());
    assert!(batches.len() > 3);
    let mut last = i64::MIN;
    for (name, b) in &batches {
        if *name == "syscall" {
            let ts = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            for v in ts.values() {
                assert!(*v >= last);
                last = *v;
            }
        }
    }
    let t = tables(&batches);
    let mut a = t[0].rows.clone();
    let mut b = whole[0].rows.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn fd_table_gives_paths_and_positions_without_dash_y() {
    let text = "\
100 10.000000 openat(AT_FDCWD, \"/data/a.db\", O_RDWR|O_CLOEXEC) = 3 <0.000010>
100 10.000100 read(3, \"\"..., 4096) = 4096 <0.000010>
100 10.000200 dup2(3, 7) = 7 <0.000001>
100 10.000300 write(7, \"\"..., 100) = 100 <0.000010>
100 10.000400 read(3, \"\"..., 10) = 10 <0.000010>
100 10.000500 lseek(3, -10, SEEK_END) = 5000 <0.000001>
100 10.000600 read(3, \"\"..., 10) = 0 <0.000001>
100 10.000700 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 101 <0.000050>
101 10.000800 read(7, \"\"..., 10) = 10 <0.000001>
100 10.000900 close(3) = 0 <0.000001>
100 10.001000 read(3, \"\"..., 10) = -1 EBADF (Bad file descriptor) <0.000001>
101 10.001100 read(3, \"\"..., 10) = 10 <0.000001>
100 10.001200 chdir(\"/data\") = 0 <0.000001>
100 10.001300 stat(\"b.db\", {st_mode=S_IFREG|0644, st_size=1, ...}) = 0 <0.000001>
100 10.001400 execve(\"/bin/true\", [\"true\"], 0x1 /* 1 var */) = 0 <0.000100>
100 10.001500 read(3, \"\"..., 10) = -1 EBADF (Bad file descriptor) <0.000001>
101 10.001600 rename(\"x\", \"/y\") = -1 ENOENT (No such file or directory) <0.000001>
";
    let (p, [sys, ..]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    assert_eq!(sys.col("path")[..7], ["/data/a.db"; 7].map(String::from));
    assert_eq!(sys.col("pos")[1..7], ["0", "", "4096", "4196", "-10", "5000"].map(String::from));
    // The forked child has a copy of the table sharing the open file description:
    // fd 7 is at 5000 after the parent's failed read at EOF.
    assert_eq!(sys.get(8, "path"), "/data/a.db");
    assert_eq!(sys.get(8, "pos"), "5000");
    // Parent closed 3: unknown there, still open in the child.
    assert_eq!(sys.get(10, "path"), "");
    assert_eq!(sys.get(10, "errno"), "EBADF");
    assert_eq!(sys.get(11, "path"), "/data/a.db");
    assert_eq!(sys.get(11, "pos"), "5010");
    assert_eq!(sys.get(13, "path"), "/data/b.db");
    assert_eq!(sys.get(13, "args"), "\"b.db\", {st_mode=S_IFREG|0644, st_size=1, ...}");
    assert_eq!(sys.get(16, "path"), "x");
    assert_eq!(sys.get(16, "path2"), "/y");
    let prods = p.producers();
    assert_eq!(prods.len(), 4);
    assert_eq!(prods[0].name, "true"); // renamed by execve
    assert_eq!(prods[2].kind, "process");
    assert_eq!(prods[2].parent, Some(prods[0].id)); // forked child's parent is the process
    assert_eq!(prods[2].name, "pid 101");
}

#[test]
fn pid_brackets_time_of_day_and_midnight() {
    let text = "\
23:59:59.999000 read(0, \"\", 10) = 0
[pid  42] 23:59:59.999500 write(1, \"x\", 1) = 1
[pid  42] 00:00:00.000250 write(1, \"x\", 1) = 1
";
    let (p, [sys, ..]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    assert_eq!(sys.col("ts"), ["86399999000000", "86399999500000", "86400000250000"]);
    assert_eq!(sys.col("dur"), ["0", "0", "0"]);
    let prods = p.producers();
    assert_eq!(prods.iter().filter(|p| p.kind == "thread").map(|p| p.os_id).collect::<Vec<_>>(), [0, 42]);
}

#[test]
fn nanosecond_stamps_and_durations() {
    let text = "1795366107.340333123 fsync(3</x>) = 0 <0.000130456>\n";
    let (_, [sys, ..]) = parse(text);
    assert_eq!(sys.col("ts"), ["1795366107340333123"]);
    assert_eq!(sys.col("dur"), ["130456"]);
    assert_eq!(sys.col("path"), ["/x"]);
    assert_eq!(sys.col("fd"), ["3"]);
}

#[test]
fn escaped_paths_are_unescaped() {
    let text = concat!(
        "1.0 openat(AT_FDCWD</tmp/st>, \"/tmp/st/w/x) = 5 <0.1>\", O_RDONLY|O_CLOEXEC) = 3</tmp/st/w/x) = 5 \\0740.1\\76> <0.000004>\n",
        "1.1 read(3</tmp/st/w/x) = 5 \\0740.1\\76>, \"\"..., 10) = 2 <0.000005>\n",
        "1.2 openat(AT_FDCWD</tmp/st>, \"/tmp/st/w/\\303\\251\", O_RDONLY) = 4</tmp/st/w/\\303\\251> <0.000004>\n",
        "1.3 openat(AT_FDCWD</tmp/st>, \"w/q\\\"uote\", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000004>\n",
        "1.4 openat(AT_FDCWD</tmp/st>, \"w/bad\\377\", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000004>\n",
    );
    let (p, [sys, ..]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    assert_eq!(
        sys.col("path"),
        ["/tmp/st/w/x) = 5 <0.1>", "/tmp/st/w/x) = 5 <0.1>", "/tmp/st/w/é", "/tmp/st/w/q\"uote", "/tmp/st/w/bad\\377"]
    );
    assert_eq!(sys.col("dur"), ["4000", "5000", "4000", "4000", "4000"]);
    assert_eq!(sys.col("ret"), ["3", "2", "4", "-1", "-1"]);
    assert_eq!(sys.col("errno"), ["", "", "", "ENOENT", "ENOENT"]);
}

#[test]
fn signals_exits_and_question_marks_are_events() {
    let text = "\
7 1.000 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=8, si_uid=0, si_status=0, si_utime=0, si_stime=0} ---
7 1.001 --- stopped by SIGSTOP ---
7 1.002 nanosleep({tv_sec=5, tv_nsec=0},  <unfinished ...>
7 1.003 +++ killed by SIGKILL (core dumped) +++
8 1.004 read(0,  <unfinished ...>
8 1.005 <... read resumed> <unfinished ...>) = ?
8 1.006 +++ exited with 3 +++
";
    let (p, [sys, sig, exit]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    assert_eq!(sig.col("signal"), ["SIGCHLD", "SIGSTOP"]);
    assert_eq!(sig.col("code"), ["CLD_EXITED", "stopped"]);
    assert_eq!(sig.col("sender"), ["8", ""]);
    assert_eq!(exit.col("status"), ["", "3"]);
    assert_eq!(exit.col("signal"), ["SIGKILL", ""]);
    assert_eq!(exit.col("core"), ["true", "false"]);
    // nanosleep never resumed: recorded, lasting until the kill, no result.
    assert_eq!(sys.col("name"), ["nanosleep", "read"]);
    assert_eq!(sys.col("dur"), ["1000000", "1000000"]);
    assert_eq!(sys.col("ret"), ["", ""]);
    assert_eq!(sys.get(0, "args"), "{tv_sec=5, tv_nsec=0}");
    assert_eq!(sys.get(1, "fd"), "0");
    assert_eq!(p.stats().unfinished, 1);
}

#[test]
fn bad_lines_are_counted_with_numbers_and_reasons() {
    let text = "\
1.0 read(3, \"\", 1) = 0
garbage here
1.1 read(3, \"\", 1
1.2 write(1, \"abc) = 3
strace: Process 12 attached

1.3 read(3, \"\", 1) = 0
read(3, \"\", 1) = 0
1.4 <... write resumed>) = 3
";
    let (p, [sys, ..]) = parse(text);
    assert_eq!(sys.rows.len(), 3);
    assert_eq!(p.stats().rejected, 4);
    assert_eq!(p.stats().notes, 1);
    assert_eq!(p.stats().orphans, 1);
    let lines: Vec<u64> = p.rejects().iter().map(|r| r.line).collect();
    assert_eq!(lines, [2, 3, 4, 8]);
    assert!(p.rejects()[0].reason.contains("not a syscall"));
    assert!(p.rejects()[1].reason.contains("')'"));
    assert!(p.rejects()[2].reason.contains("string"));
    assert!(p.rejects()[3].reason.contains("timestamp"));
}

#[test]
fn overlong_lines_are_rejected_and_skipped_in_any_chunking() {
    let long = format!("1.0 write(1, \"{}\", 5000) = 5000\n", "x".repeat(5000));
    let text = format!("1.0 read(0, \"\", 1) = 0\n{long}1.1 close(0) = 0\n{}", long.trim_end());
    for chunk in [1, 100, 1 << 20] {
        let cfg = Config { max_line: 1000, ..Config::default() };
        let (p, [sys, ..]) = parse_with(&text, cfg, chunk);
        assert_eq!(sys.col("name"), ["read", "close"], "chunk {chunk}");
        assert_eq!(p.rejects().iter().map(|r| r.line).collect::<Vec<_>>(), [2, 4], "chunk {chunk}");
        assert_eq!(p.stats().lines, 4);
    }
}

#[test]
fn per_thread_files_merge_by_timestamp() {
    let a = "1.000 openat(AT_FDCWD, \"/f\", O_RDONLY) = 3 <0.000001>\n1.003 clone3({flags=CLONE_VM|CLONE_FILES|CLONE_THREAD}, 88) = 11 <0.000001>\n1.006 read(3, \"\", 10) = 10 <0.000001>\n";
    let b = "1.004 read(3, \"\", 10) = 10 <0.000001>\n1.005 read(3, \"\", 10) = 10 <0.000001>\n";
    for chunk in [1, 5, 1000] {
        let mut p = StraceParser::new(Config::default(), &[Some(10), Some(11)]);
        let srcs = [a.as_bytes(), b.as_bytes()];
        let mut pos = [0usize; 2];
        while let Some(i) = p.need() {
            let end = (pos[i] + chunk).min(srcs[i].len());
            p.feed(i, &srcs[i][pos[i]..end]);
            pos[i] = end;
        }
        p.finish();
        let [sys, ..] = tables(&p.take_batches());
        assert_eq!(sys.col("ts"), ["1000000000", "1003000000", "1004000000", "1005000000", "1006000000"]);
        // The thread shares the process's table: offsets continue across threads.
        assert_eq!(sys.col("pos"), ["", "", "0", "10", "20"]);
        assert_eq!(sys.col("path"), ["/f", "", "/f", "/f", "/f"]);
        let prods = p.producers();
        assert_eq!(
            prods.iter().map(|p| (p.kind, p.os_id)).collect::<Vec<_>>(),
            [("process", 10), ("thread", 10), ("thread", 11)]
        );
    }
}

#[test]
fn child_seen_before_its_clone_returns_is_placed_by_the_clone() {
    let text = "\
5 1.0 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD, child_tid=0x1} <unfinished ...>
6 1.1 openat(AT_FDCWD, \"/z\", O_RDONLY) = 3 <0.000001>
5 1.2 <... clone3 resumed> => {parent_tid=[6]}, 88) = 6 <0.000100>
5 1.3 read(3, \"\", 4) = 4 <0.000001>
5 1.4 clone(child_stack=NULL, flags=SIGCHLD <unfinished ...>
7 1.5 read(3, \"\", 4) = 4 <0.000001>
5 1.6 <... clone resumed>) = 7 <0.000100>
";
    let (p, [sys, ..]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    assert_eq!(sys.col("path"), ["", "/z", "/z", "", "/z"]);
    assert_eq!(sys.col("pos"), ["", "", "0", "", "4"]);
    let prods = p.producers();
    let kinds: Vec<_> = prods.iter().map(|p| (p.kind, p.os_id, p.pid)).collect();
    assert_eq!(
        kinds,
        [
            ("process", 5, None),
            ("thread", 5, Some(5)),
            ("thread", 6, Some(5)),
            ("process", 7, None),
            ("thread", 7, Some(7))
        ]
    );
}

#[test]
fn typed_columns_of_the_listed_syscalls() {
    let text = "\
1 1.0 creat(\"/t/c\", 0644) = 3 <0.000001>
1 1.1 pread64(3, \"\"..., 512, 1024) = 512 <0.000001>
1 1.2 readv(3, [{iov_base=\"\"..., iov_len=100}, {iov_base=\"\"..., iov_len=28}], 2) = 128 <0.000001>
1 1.3 pwritev2(3, [{iov_base=\"\"..., iov_len=8}], 1, -1, RWF_SYNC) = 8 <0.000001>
1 1.4 fdatasync(3) = 0 <0.000001>
1 1.5 fcntl(3, F_DUPFD_CLOEXEC, 10) = 10 <0.000001>
1 1.6 dup(10) = 11 <0.000001>
1 1.7 dup3(11, 12, O_CLOEXEC) = 12 <0.000001>
1 1.8 mmap(NULL, 8192, PROT_READ, MAP_SHARED, 12, 0x1000) = 0x7f0000000000 <0.000001>
1 1.9 newfstatat(12, \"\", {st_mode=S_IFREG|0644, st_size=136, ...}, AT_EMPTY_PATH) = 0 <0.000001>
1 2.0 unlinkat(AT_FDCWD, \"/t/c\", 0) = 0 <0.000001>
1 2.1 renameat2(AT_FDCWD, \"/t/a\", AT_FDCWD, \"/t/b\", RENAME_NOREPLACE) = 0 <0.000001>
1 2.2 mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000002000 <0.000001>
1 2.3 pipe2([4, 5], O_CLOEXEC) = 0 <0.000001>
1 2.4 write(5, \"\"..., 3) = 3 <0.000001>
1 2.5 statx(AT_FDCWD, \"/etc\", AT_STATX_SYNC_AS_STAT, STATX_ALL, {stx_mask=STATX_ALL}) = 0 <0.000001>
1 2.6 futex(0x7f, FUTEX_WAKE_PRIVATE, 1) = 0 <0.000001>
";
    let (p, [sys, ..]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    let cols = ["name", "fd", "path", "path2", "pos", "size", "ret", "errno", "flags"];
    let got: Vec<Vec<String>> = (0..sys.rows.len()).map(|i| cols.iter().map(|c| sys.get(i, c)).collect()).collect();
    let want: Vec<Vec<&str>> = vec![
        vec!["creat", "", "/t/c", "", "", "", "3", "", "O_WRONLY|O_CREAT|O_TRUNC"],
        vec!["pread64", "3", "/t/c", "", "1024", "512", "512", "", ""],
        vec!["readv", "3", "/t/c", "", "0", "128", "128", "", ""],
        vec!["pwritev2", "3", "/t/c", "", "128", "8", "8", "", ""],
        vec!["fdatasync", "3", "/t/c", "", "", "", "0", "", ""],
        vec!["fcntl", "3", "/t/c", "", "", "", "10", "", "F_DUPFD_CLOEXEC, 10"],
        vec!["dup", "10", "/t/c", "", "", "", "11", "", ""],
        vec!["dup3", "11", "/t/c", "", "", "", "12", "", "O_CLOEXEC"],
        vec!["mmap", "12", "/t/c", "", "4096", "8192", "139637976727552", "", "PROT_READ, MAP_SHARED"],
        vec!["newfstatat", "12", "/t/c", "", "", "", "0", "", ""],
        vec!["unlinkat", "", "/t/c", "", "", "", "0", "", ""],
        vec!["renameat2", "", "/t/a", "/t/b", "", "", "0", "", "RENAME_NOREPLACE"],
        vec!["mmap", "", "", "", "", "4096", "139637976735744", "", "PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS"],
        vec!["pipe2", "", "", "", "", "", "0", "", ""],
        vec!["write", "5", "", "", "", "3", "3", "", ""],
        vec!["statx", "", "/etc", "", "", "", "0", "", ""],
        vec!["futex", "", "", "", "", "", "0", "", ""],
    ];
    assert_eq!(got, want);
    assert_eq!(sys.get(16, "args"), "0x7f, FUTEX_WAKE_PRIVATE, 1");
    assert_eq!(sys.get(1, "args"), "");
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = crate::workload::rng::SplitMix64::new(7);
    let alphabet = b"0123456789 .:()[]{}<>\"\\,=?-+EOFread<... resumed>unfinished\n\t\xff";
    for _ in 0..300 {
        let n = (rng.next_u64() % 400) as usize;
        let bytes: Vec<u8> = (0..n).map(|_| alphabet[(rng.next_u64() % alphabet.len() as u64) as usize]).collect();
        let mut p = StraceParser::new(Config { batch_rows: 3, max_line: 50, keep_rejects: 2 }, &[None]);
        for c in bytes.chunks(1 + (rng.next_u64() % 17) as usize) {
            p.feed(0, c);
        }
        p.finish();
        let _ = tables(&p.take_batches());
    }
}

#[test]
fn summary_table_of_dash_capital_c_is_skipped() {
    let text = "\
1 1.0 read(0, \"\", 1) = 0 <0.000001>
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.000001           1         1           read
------ ----------- ----------- --------- --------- ----------------
100.00    0.000001           1         1           total
";
    let (p, [sys, ..]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    assert_eq!(sys.rows.len(), 1);
    assert_eq!(p.stats().notes, 5);
}

/// Parse speed on a real file: `STRACE_BENCH=FILE cargo test --release --no-default-features
/// -- --ignored parse_speed --nocapture` (CPU time of this thread; not run in CI).
#[test]
#[ignore]
fn parse_speed() {
    let Ok(path) = std::env::var("STRACE_BENCH") else { return };
    let data = std::fs::read(path).unwrap();
    let cpu = || -> f64 {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        s.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 1e9
    };
    for _ in 0..3 {
        let c0 = cpu();
        let w0 = std::time::Instant::now();
        let mut p = StraceParser::new(Config::default(), &[None]);
        let mut rows = 0;
        for c in data.chunks(4 << 20) {
            p.feed(0, c);
            rows += p.take_batches().iter().map(|(_, b)| b.num_rows()).sum::<usize>();
        }
        p.finish();
        rows += p.take_batches().iter().map(|(_, b)| b.num_rows()).sum::<usize>();
        let dt = cpu() - c0;
        let wall = w0.elapsed().as_secs_f64();
        let lines = p.stats().lines as f64;
        println!(
            "{:.2} M lines/s per CPU-s of this thread ({:.0} ns/line), {:.2} M lines/s wall, {rows} rows",
            lines / dt / 1e6,
            dt * 1e9 / lines,
            lines / wall / 1e6
        );
    }
}

#[test]
fn word_at_a_time_digits_agree_with_a_byte_loop() {
    let mut rng = crate::workload::rng::SplitMix64::new(3);
    let alphabet = b"0123456789012345678901234567890123456789. :x\xff/";
    for _ in 0..20_000 {
        let n = (rng.next_u64() % 30) as usize;
        let s: Vec<u8> = (0..n).map(|_| alphabet[(rng.next_u64() % alphabet.len() as u64) as usize]).collect();
        let start = if n > 0 { (rng.next_u64() % n as u64) as usize } else { 0 };
        let k = s[start..].iter().take_while(|b| b.is_ascii_digit()).count();
        let want = std::str::from_utf8(&s[start..start + k]).unwrap().parse::<u64>().ok();
        let (got, gk) = line::lead_digits(&s, start);
        assert_eq!(gk, k, "{:?}", String::from_utf8_lossy(&s));
        if k > 0 {
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&s));
        }
    }
    assert_eq!(line::parse_seconds(b"1795366107.340333"), Some(1_795_366_107_340_333_000));
    assert_eq!(line::parse_seconds(b"0.1234567891"), Some(123_456_789));
    assert_eq!(line::parse_seconds(b"12"), Some(12_000_000_000));
    assert_eq!(line::parse_seconds(b"12."), None);
    assert_eq!(line::parse_seconds(b"99999999999999999999.1"), None);
}

#[test]
fn dash_y_paths_correct_a_table_made_stale_by_rough_timestamps() {
    // Thread 11's openat got fd 3 after thread 10 closed it, but strace stamped the
    // close later than the openat's start.
    let a = "1.000 openat(AT_FDCWD</>, \"/a\", O_RDONLY) = 3</a> <0.000001>\n1.002 clone3({flags=CLONE_VM|CLONE_FILES|CLONE_THREAD}, 88) = 11 <0.000001>\n1.004 close(3</a>) = 0 <0.000001>\n";
    let b = "1.003 openat(AT_FDCWD</>, \"/b\", O_RDONLY) = 3</b> <0.000005>\n1.009 read(3</b>, \"\", 10) = 10 <0.000001>\n1.010 read(3</b>, \"\", 10) = 10 <0.000001>\n";
    let mut p = StraceParser::new(Config::default(), &[Some(10), Some(11)]);
    p.feed(0, a.as_bytes());
    p.feed(1, b.as_bytes());
    p.feed(0, b"");
    p.feed(1, b"");
    p.finish();
    let [sys, ..] = tables(&p.take_batches());
    assert_eq!(sys.col("name"), ["openat", "clone3", "openat", "close", "read", "read"]);
    assert_eq!(sys.col("path"), ["/a", "", "/b", "/a", "/b", "/b"]);
    assert_eq!(sys.col("pos"), ["", "", "", "", "0", "10"]);
}

#[test]
fn close_frees_its_fd_when_it_starts() {
    // Thread 2's openat gets fd 3 while thread 1's close(3) has not returned yet.
    let text = "\
1 1.000 openat(AT_FDCWD, \"/a\", O_RDONLY) = 3 <0.000001>
1 1.001 clone3({flags=CLONE_VM|CLONE_FILES|CLONE_THREAD}, 88) = 2 <0.000001>
1 1.002 close(3 <unfinished ...>
2 1.003 openat(AT_FDCWD, \"/b\", O_RDONLY <unfinished ...>
2 1.004 <... openat resumed>) = 3 <0.000001>
1 1.005 <... close resumed>) = 0 <0.000003>
2 1.006 read(3, \"\", 10) = 10 <0.000001>
";
    let (p, [sys, ..]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    assert_eq!(sys.col("name"), ["openat", "clone3", "close", "openat", "read"]);
    assert_eq!(sys.col("path"), ["/a", "", "/a", "/b", "/b"]);
    assert_eq!(sys.col("pos"), ["", "", "", "", "0"]);
}

#[test]
fn a_call_blocked_for_many_batches_comes_last_and_keeps_its_seq() {
    let mut text = String::from("1 1.000 futex(0x1, FUTEX_WAIT, 2, NULL <unfinished ...>\n");
    for k in 0..20 {
        text += &format!("2 1.{:03} read(0, \"\", 1) = 1 <0.000001>\n", k + 1);
    }
    text += "1 1.500 <... futex resumed>) = 0 <0.500000>\n1 1.600 close(0) = 0 <0.000001>\n";
    let cfg = Config { batch_rows: 4, ..Config::default() };
    let mut p = StraceParser::new(cfg, &[None]);
    p.feed(0, text.as_bytes());
    p.finish();
    let mut batches = p.take_batches();
    let late = p.take_late();
    assert_eq!(late.len(), 1);
    batches.extend(late);
    let ts: Vec<Vec<i64>> = batches
        .iter()
        .map(|(_, b)| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec())
        .collect();
    // Every batch continues in ts order; the futex (ts 1.000) comes late, alone.
    let flat: Vec<i64> = ts[..ts.len() - 1].concat();
    assert!(flat.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(*ts.last().unwrap(), vec![1_000_000_000]);
    let [sys, ..] = tables(&batches);
    let futex = sys.rows.iter().find(|r| r[4] == "futex").unwrap();
    let close = sys.rows.iter().find(|r| r[4] == "close").unwrap();
    assert_eq!((futex[2].as_str(), close[2].as_str()), ("0", "1"));
    assert_eq!(futex[3], "500000000");
}

#[test]
fn a_big_chunk_split_across_two_threads_gives_the_same_events() {
    let mut text = String::new();
    for k in 0..800 {
        // Copies of THREADS one second apart, so the log stays in time order.
        for line in THREADS.lines() {
            let (pid, rest) = line.split_once(' ').unwrap();
            let (ts, body) = rest.split_once(' ').unwrap();
            let ts: f64 = ts.parse().unwrap();
            text += &format!("{pid} {:.6} {body}\n", ts + k as f64);
        }
        if k == 400 {
            text += &format!("{}\n", "x".repeat(2000)); // an overlong line in the far part
            text += "garbage\n";
        }
    }
    assert!(text.len() > 2 * PARALLEL_MIN);
    let cfg = || Config { max_line: 1000, ..Config::default() };
    let (p1, whole) = parse_with(&text, cfg(), usize::MAX);
    let (p2, small) = parse_with(&text, cfg(), 4096);
    assert_eq!(p1.stats(), p2.stats());
    assert_eq!(p1.rejects(), p2.rejects());
    assert_eq!(p1.rejects().len(), 2);
    for k in 0..3 {
        assert_eq!(whole[k].rows, small[k].rows);
    }
}

/// Regression: `cp -r` moved 44 MB through copy_file_range and nothing typed it. Lines from
/// strace 6.1 tracing coreutils 9.1 `cp` and Python's os.sendfile/copy_file_range/splice.
#[test]
fn calls_moving_bytes_between_two_fds_are_typed_source_then_destination() {
    let text = "\
1 1.0 openat(AT_FDCWD</tmp/cpt>, \"src/a.bin\", O_RDONLY|O_NOFOLLOW) = 3</tmp/cpt/src/a.bin> <0.000050>
1 1.1 openat(AT_FDCWD</tmp/cpt>, \"dst/a.bin\", O_WRONLY|O_CREAT|O_EXCL, 0644) = 4</tmp/cpt/dst/a.bin> <0.000092>
1 1.2 copy_file_range(3</tmp/cpt/src/a.bin>, NULL, 4</tmp/cpt/dst/a.bin>, NULL, 9223372035781033984, 0) = 300000 <0.000225>
1 1.3 copy_file_range(3</tmp/cpt/src/a.bin>, NULL, 4</tmp/cpt/dst/a.bin>, NULL, 9223372035781033984, 0) = 0 <0.000048>
1 1.4 sendfile(4</tmp/cpt/dst/a.bin>, 3</tmp/cpt/src/a.bin>, NULL, 1000) = 1000 <0.000144>
1 1.5 sendfile(4</tmp/cpt/dst/a.bin>, 3</tmp/cpt/src/a.bin>, [5000] => [6000], 1000) = 1000 <0.000112>
1 1.6 copy_file_range(3</tmp/cpt/src/a.bin>, [0], 4</tmp/cpt/dst/a.bin>, [200], 100, 0) = 100 <0.000067>
1 1.7 splice(3</tmp/cpt/src/a.bin>, [10], 6<pipe:[18757]>, NULL, 500, 0) = 500 <0.000078>
1 1.8 splice(5<pipe:[18757]>, NULL, 4</tmp/cpt/dst/a.bin>, NULL, 500, SPLICE_F_MOVE) = 500 <0.000071>
1 1.9 tee(5<pipe:[18757]>, 7<pipe:[18758]>, 64, 0) = 0 <0.000001>
";
    let (p, [sys, ..]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    let cols = ["name", "fd", "path", "pos", "fd2", "path2", "pos2", "size", "ret", "flags", "args"];
    let got: Vec<Vec<String>> = (2..sys.rows.len()).map(|i| cols.iter().map(|c| sys.get(i, c)).collect()).collect();
    let (a, b) = ("/tmp/cpt/src/a.bin", "/tmp/cpt/dst/a.bin");
    // args keep the printed arguments (whether an offset was NULL or explicit), but for tee.
    let (c1, c3) = ("3</tmp/cpt/src/a.bin>, NULL, 4</tmp/cpt/dst/a.bin>, NULL, 9223372035781033984, 0", "");
    let want: Vec<Vec<&str>> = vec![
        vec!["copy_file_range", "3", a, "0", "4", b, "0", "9223372035781033984", "300000", "0", c1],
        vec!["copy_file_range", "3", a, "300000", "4", b, "300000", "9223372035781033984", "0", "0", c1],
        vec![
            "sendfile",
            "3",
            a,
            "300000",
            "4",
            b,
            "300000",
            "1000",
            "1000",
            "",
            "4</tmp/cpt/dst/a.bin>, 3</tmp/cpt/src/a.bin>, NULL, 1000",
        ],
        // an explicit offset leaves the file position where it was
        vec![
            "sendfile",
            "3",
            a,
            "5000",
            "4",
            b,
            "301000",
            "1000",
            "1000",
            "",
            "4</tmp/cpt/dst/a.bin>, 3</tmp/cpt/src/a.bin>, [5000] => [6000], 1000",
        ],
        vec![
            "copy_file_range",
            "3",
            a,
            "0",
            "4",
            b,
            "200",
            "100",
            "100",
            "0",
            "3</tmp/cpt/src/a.bin>, [0], 4</tmp/cpt/dst/a.bin>, [200], 100, 0",
        ],
        vec![
            "splice",
            "3",
            a,
            "10",
            "6",
            "pipe:[18757]",
            "",
            "500",
            "500",
            "0",
            "3</tmp/cpt/src/a.bin>, [10], 6<pipe:[18757]>, NULL, 500, 0",
        ],
        vec![
            "splice",
            "5",
            "pipe:[18757]",
            "",
            "4",
            b,
            "302000",
            "500",
            "500",
            "SPLICE_F_MOVE",
            "5<pipe:[18757]>, NULL, 4</tmp/cpt/dst/a.bin>, NULL, 500, SPLICE_F_MOVE",
        ],
        vec!["tee", "5", "pipe:[18757]", "", "7", "pipe:[18758]", "", "64", "0", "0", c3],
    ];
    assert_eq!(got, want);
    // What the program asked for, beside the resolved path.
    assert_eq!((sys.get(0, "path_arg"), sys.get(0, "path")), ("src/a.bin".into(), a.into()));
    assert_eq!((sys.get(1, "path_arg"), sys.get(1, "path")), ("dst/a.bin".into(), b.into()));
    assert_eq!(sys.get(2, "path_arg"), "");
}

#[test]
fn path_arguments_are_kept_as_asked() {
    let text = "\
1 1.0 chdir(\"/w\") = 0 <0.000001>
1 1.1 newfstatat(AT_FDCWD, \"sub/../f\", {st_mode=S_IFREG|0644, st_size=1, ...}, 0) = 0 <0.000001>
1 1.2 rename(\"a\", \"b\") = 0 <0.000001>
1 1.3 renameat2(AT_FDCWD, \"x\", AT_FDCWD, \"y\", RENAME_NOREPLACE) = 0 <0.000001>
1 1.4 symlinkat(\"target\", AT_FDCWD, \"link\") = 0 <0.000001>
1 1.5 open(\"rel\\\\t.txt\", O_RDONLY) = 3 <0.000001>
";
    let (p, [sys, ..]) = parse(text);
    assert_eq!(p.rejects(), &[]);
    let cols = ["path", "path_arg", "path2", "path2_arg"];
    let got: Vec<Vec<String>> = (0..sys.rows.len()).map(|i| cols.iter().map(|c| sys.get(i, c)).collect()).collect();
    let want: Vec<Vec<&str>> = vec![
        vec!["/w", "/w", "", ""],
        vec!["/w/sub/../f", "sub/../f", "", ""],
        vec!["/w/a", "a", "/w/b", "b"],
        vec!["/w/x", "x", "/w/y", "y"],
        vec!["target", "target", "/w/link", "link"],
        vec!["/w/rel\\t.txt", "rel\\t.txt", "", ""],
    ];
    assert_eq!(got, want);
}

/// The real multithreaded capture (tests/data/strace/threads.strace) copied `n` times, each copy
/// one second later with its pids moved by 100,000 per copy (new processes, new fd tables).
fn real_threads_copies(n: usize) -> String {
    let capture = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/strace/threads.strace"))
        .expect("tests/data/strace/threads.strace");
    let mut text = String::new();
    for k in 0..n {
        for line in capture.lines() {
            let (pid, rest) = line.split_once(' ').unwrap();
            let (ts, body) = rest.split_once(' ').unwrap();
            let pid: u64 = pid.parse().unwrap();
            let ts: f64 = ts.parse().unwrap();
            text += &format!("{} {:.6} {body}\n", pid + 100_000 * k as u64, ts + k as f64);
        }
    }
    text
}

/// Feeds `text` in pieces ending at `cuts` (byte offsets); the parser and its tables.
fn parse_cut(text: &str, cuts: &[usize]) -> (StraceParser, [Table; 3]) {
    let ends: Vec<usize> = cuts.iter().copied().chain([text.len()]).collect();
    let starts = [0].into_iter().chain(ends.clone());
    parse_pieces(Config::default(), starts.zip(ends).map(|(a, b)| &text.as_bytes()[a..b]))
}

/// The second thread joins and parses unfinished/resumed pairs ahead of the main one.
/// On a real capture, the events must be those of a parse that never splits (4 KiB chunks are
/// below the parallel size) whatever the chunks: one big chunk, chunks cut between the two halves of
/// pairs (the unfinished line in one chunk, its resumption in the next), and cuts inside lines.
#[test]
fn pairs_joined_ahead_give_the_events_of_a_sequential_parse_in_any_chunking() {
    let text = real_threads_copies(40); // ~1.7 MB: several parallel parts per big chunk
    assert!(text.len() > 4 * PARALLEL_MIN);
    let pairs = text.matches("<unfinished ...>\n").count() as u64;
    let (seq, reference) = parse_with(&text, Config::default(), 1 << 12);
    assert_eq!(seq.pre_joined, 0, "4 KiB chunks are parsed on one thread");
    // Cuts right after `<unfinished ...>` lines whose resumption is on a later line, about every
    // 300 KB, so chunks stay big enough for the second thread and each border splits a pair.
    let mut border_pairs = Vec::new();
    let mut pos = 0;
    let mut next = 300_000;
    for line in text.split_inclusive('\n') {
        pos += line.len();
        if pos >= next && line.trim_end().ends_with("<unfinished ...>") {
            border_pairs.push(pos);
            next = pos + 300_000;
        }
    }
    assert!(border_pairs.len() >= 4);
    let mid_line: Vec<usize> = border_pairs.iter().map(|&c| c + 7).collect(); // inside the next line
    for (what, cuts) in
        [("one chunk", vec![]), ("cut between pairs' halves", border_pairs), ("cut inside lines", mid_line)]
    {
        let (p, t) = parse_cut(&text, &cuts);
        // Most pairs have both halves in the second thread's part of a chunk.
        assert!(2 * p.pre_joined > pairs, "{what}: {} of {pairs} pairs joined ahead", p.pre_joined);
        // The parts' buffers (lines and joined pairs) went back to the second thread and were
        // kept for the next chunk: the reused ones gave the same rows as above.
        assert!(!p.spare.is_empty(), "{what}: no part's buffers kept");
        assert!(p.spare.iter().all(|s| s.pres.capacity() > 0), "{what}: a kept buffer lost its allocation");
        assert_eq!(p.stats(), seq.stats(), "{what}");
        assert_eq!(p.rejects(), seq.rejects(), "{what}");
        assert_eq!(p.producers(), seq.producers(), "{what}");
        for k in 0..3 {
            assert_eq!(t[k].rows.len(), reference[k].rows.len(), "{what}, type {k}");
            for (i, (a, b)) in t[k].rows.iter().zip(&reference[k].rows).enumerate() {
                assert_eq!(a, b, "{what}, type {k}, row {i}");
            }
        }
    }
}

/// The memory of emitted batches (one slab per cut, slab.rs) comes back to the parser
/// once the consumer drops the batches (the import's store does, after writing them), and later
/// batches are built in it: over what earlier batches left there, validity bits included. They
/// must equal the batches of a parse that keeps every batch (so never reuses a slab).
#[test]
fn batches_built_in_the_memory_of_dropped_ones_equal_a_parse_that_keeps_every_batch() {
    let text = real_threads_copies(160); // ~40K rows
    let cfg = Config { batch_rows: 8192, ..Config::default() };
    let ts_at = |b: &RecordBatch| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().as_ptr() as usize;
    let mut p = StraceParser::new(cfg.clone(), &[None]);
    let (mut got, mut seen, mut reused): ([Table; 3], std::collections::HashSet<usize>, usize) = Default::default();
    let mut take = |batches: Vec<(&'static str, RecordBatch)>| {
        for (_, b) in &batches {
            reused += !seen.insert(ts_at(b)) as usize;
        }
        for (k, t) in tables(&batches).into_iter().enumerate() {
            got[k].rows.extend(t.rows);
        }
        // (dropped here: their slab goes back to the parser)
    };
    for piece in text.as_bytes().chunks(48 << 10) {
        p.feed(0, piece);
        take(p.take_batches());
    }
    p.feed(0, b"");
    p.finish();
    take(p.take_batches());
    take(p.take_late());
    assert!(reused >= 2, "{reused} batches built in a returned slab");
    let (_, reference) = parse_with(&text, cfg, text.len());
    for k in 0..3 {
        assert_eq!(got[k].rows.len(), reference[k].rows.len(), "{}", EVENT_TYPES[k]);
        assert!(got[k].rows == reference[k].rows, "{} rows differ", EVENT_TYPES[k]);
    }
}

#[test]
fn drain_hands_over_what_arrived_and_loses_nothing() {
    // A pipe: lines arrive a few at a time and are committed between arrivals; a call left
    // unfinished at a drain still comes out once (from `take_late`), completed.
    let (_, whole) = parse(THREADS);
    let mut p = StraceParser::new(Config::default(), &[None]);
    let mut got = Vec::new();
    let lines: Vec<&str> = THREADS.split_inclusive('\n').collect();
    for part in lines.chunks(3) {
        p.feed(0, part.concat().as_bytes());
        p.drain();
        let b = p.take_batches();
        got.extend(b);
    }
    p.finish();
    got.extend(p.take_batches());
    got.extend(p.take_late());
    let t = tables(&got);
    for k in 0..3 {
        let mut a = t[k].rows.clone();
        let mut b = whole[k].rows.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "type {k}");
    }
}
