"""Capture five real programs and replay each: the "differ from the trace" count and the skip reasons.

Owns the check of replay against programs nobody here wrote: `cp -r` of a tree, git
(init, add, commit, gc), tar (create and extract), sqlite3 (a few transactions from a
redirected stdin) and a threaded Python program (os.scandir, os.listdir, shutil.copytree,
os.copy_file_range). Each is captured with `tracehouse capture`, replayed with the default
placement (every traced path under the root) and original timing, and its calls that
differ from the trace (failed on the target but not in the trace, or the reverse) are
counted and listed by syscall and error; the tree the replay left under the program's
working directory is compared with the one the program left (entries and file sizes).
Run it on two builds to compare them:

    .venv/bin/python dev/replay_real.py [--work DIR] [--json] [--detail]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PY_PROGRAM = r'''
import os, shutil, sys, threading
src, dst = sys.argv[1], sys.argv[2]
def walk(d):
    n = 0
    with os.scandir(d) as it:
        for e in it:
            n += 1
            if e.is_dir(follow_symlinks=False):
                n += walk(e.path)
    return n
def copy_one(i):
    a, b = os.path.join(dst, f"t{i}"), os.path.join(dst, f"t{i}-copy")
    shutil.copytree(src, a)
    walk(a)
    os.listdir(a)
    os.makedirs(b)
    for name in sorted(os.listdir(a)):
        p = os.path.join(a, name)
        if os.path.isfile(p):
            with open(p, "rb") as fi, open(os.path.join(b, name), "wb") as fo:
                left = os.fstat(fi.fileno()).st_size
                while left > 0:
                    n = os.copy_file_range(fi.fileno(), fo.fileno(), left)
                    if n == 0:
                        break
                    left -= n
os.makedirs(dst, exist_ok=True)
ts = [threading.Thread(target=copy_one, args=(i,)) for i in range(3)]
for t in ts: t.start()
for t in ts: t.join()
'''

SQL = """
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);
BEGIN; INSERT INTO t(name, v) VALUES ('a', 1), ('b', 2), ('c', 3); COMMIT;
BEGIN; UPDATE t SET v = v * 2; INSERT INTO t(name, v) SELECT name || 'x', v FROM t; COMMIT;
CREATE INDEX t_name ON t(name);
BEGIN; DELETE FROM t WHERE v > 4; COMMIT;
PRAGMA journal_mode=WAL;
BEGIN; INSERT INTO t(name, v) VALUES ('w', 9); COMMIT;
SELECT count(*) FROM t;
"""


def make_tree(top: Path) -> Path:
    """A small source tree (a copy of a stdlib package: real files nobody here wrote)."""
    src = Path(shutil.__file__).parent / "email"
    shutil.copytree(src, top, ignore=shutil.ignore_patterns("__pycache__"))
    return top


def programs(work: Path) -> dict[str, tuple[list[str], dict]]:
    """name -> (command, extra environment), each working under `work/<name>`."""
    out = {}
    cp = work / "cp"
    make_tree(cp / "src")
    out["cp -r"] = (["cp", "-r", str(cp / "src"), str(cp / "dst")], {})
    g = work / "git"
    make_tree(g / "repo")
    out["git"] = (["sh", "-c", "cd repo && git init -q && git add . && git commit -qm first && "
                   "echo more >> __init__.py && git commit -qam second && git gc -q"],
                  {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
                   "GIT_COMMITTER_EMAIL": "a@b", "HOME": str(g), "GIT_CONFIG_NOSYSTEM": "1", "_cwd": str(g)})
    t = work / "tar"
    make_tree(t / "src")
    out["tar"] = (["sh", "-c", f"tar -cf {t}/a.tar -C {t} src && mkdir {t}/x && tar -xf {t}/a.tar -C {t}/x"], {})
    s = work / "sqlite3"
    s.mkdir()
    (s / "script.sql").write_text(SQL)
    out["sqlite3"] = (["sh", "-c", f"sqlite3 {s}/db.sqlite < {s}/script.sql"], {})
    p = work / "python"
    make_tree(p / "src")
    (p / "prog.py").write_text(PY_PROGRAM)
    out["python threads"] = ([sys.executable, str(p / "prog.py"), str(p / "src"), str(p / "dst")], {})
    return out


def tree(top: Path) -> dict[str, int | str]:
    """Every entry under `top`: its size, or "dir"."""
    out: dict[str, int | str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            out[str(p.relative_to(top))] = "dir" if p.is_dir() and not p.is_symlink() else os.lstat(p).st_size
    return out


def run(th: list[str], argv: list[str], env: dict | None = None, cwd: str | None = None) -> dict:
    r = subprocess.run([*th, argv[0], "--json", *argv[1:]], capture_output=True, text=True, env=env, cwd=cwd)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)}: exit {r.returncode}\n{r.stderr}")
    return json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", help="working directory (default: a temporary one, removed after)")
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    ap.add_argument("--detail", action="store_true", help="list the differing calls by syscall and error")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="th-replay-real-"))
    store = work / "store"
    th = [sys.executable, "-m", "tracehouse.cli", "--store", str(store)]
    rows = []
    try:
        for name, (cmd, extra) in programs(work / "w").items():
            cwd = extra.pop("_cwd", None)
            env = dict(os.environ, **extra)
            tname = name.replace(" ", "_")
            cap = run(th, ["capture", "--name", tname, "--", *cmd], env, cwd)
            root = work / "roots" / tname
            r = run(th, ["replay", tname, "--root", str(root)])
            sm = r["summary"]
            wd = work / "w" / {"cp -r": "cp", "python threads": "python"}.get(name, name)
            want, got = tree(wd), tree(root / str(wd).lstrip("/"))
            tree_diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            row = {"program": name, "tree_differs": len(tree_diff), "tree_diff": tree_diff[:5], "exit": cap["exit_status"], "syscalls": cap["summary"]["syscalls"],
                   "replayed": sm["ops"], "errors": sm["errors"], "differ": sm["divergent"],
                   "complete": sm["complete"], "skipped": sm["skipped"]}
            if args.detail:
                q = (f'SELECT name, kind, errno, source_errno, count(*) AS n FROM "{r["trace"]}".op '
                     f'WHERE (errno IS NULL) <> (source_errno IS NULL) GROUP BY ALL ORDER BY n DESC LIMIT 12')
                row["detail"] = run(th, ["query", q])
            rows.append(row)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'program':16} {'syscalls':>8} {'replayed':>8} {'differ':>7} {'tree':>5}  skipped")
    for r in rows:
        sk = ", ".join(f"{k} {v}" for k, v in sorted(r["skipped"].items(), key=lambda kv: -kv[1]))
        print(f"{r['program']:16} {r['syscalls']:8} {r['replayed']:8} {r['differ']:7} {r['tree_differs']:5}  {sk}")
        if args.detail and r["tree_diff"]:
            print("       tree:", r["tree_diff"])
        for d in r.get("detail", []) if isinstance(r.get("detail"), list) else r.get("detail", {}).get("rows", []):
            print("      ", d)


if __name__ == "__main__":
    main()
