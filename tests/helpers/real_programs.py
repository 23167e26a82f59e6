"""Real programs nobody here wrote, set up to be captured and replayed: `cp -r` of a tree, tar
(create and extract), git (init, add, commit, gc), sqlite3 (transactions, WAL mode) and a threaded
Python program (os.scandir, os.listdir, shutil.copytree, os.copy_file_range).

Shared by tests/replay/test_replay_real.py and dev/replay_real.py (the before/after table).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

PY_THREADS = r"""
import os, shutil, sys, threading
src, dst = sys.argv[1], sys.argv[2]
def walk(d):
    with os.scandir(d) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                walk(e.path)
def copy_one(i):
    a, b = os.path.join(dst, f"t{i}"), os.path.join(dst, f"t{i}-copy")
    shutil.copytree(src, a)
    walk(a)
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
"""

SQL = """
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);
BEGIN; INSERT INTO t(name, v) VALUES ('a', 1), ('b', 2), ('c', 3); COMMIT;
BEGIN; UPDATE t SET v = v * 2; INSERT INTO t(name, v) SELECT name || 'x', v FROM t; COMMIT;
CREATE INDEX t_name ON t(name);
BEGIN; DELETE FROM t WHERE v > 4; COMMIT;
PRAGMA journal_mode=WAL;
BEGIN; INSERT INTO t(name, v) VALUES ('w', 9); COMMIT;
"""

GIT_ENV = {
    "GIT_AUTHOR_NAME": "a",
    "GIT_AUTHOR_EMAIL": "a@b",
    "GIT_COMMITTER_NAME": "a",
    "GIT_COMMITTER_EMAIL": "a@b",
    "GIT_CONFIG_NOSYSTEM": "1",
}

PROGRAMS = ("cp", "tar", "git", "sqlite3", "python")
# The tools each program needs on PATH.
NEEDS = {"cp": ("cp",), "tar": ("tar", "sh"), "git": ("git", "sh"), "sqlite3": ("sqlite3", "sh"), "python": ()}


def tree(top: Path) -> dict[str, int | str]:
    """Every entry under `top`: its size, or "dir" (symlinks by their own size)."""
    out: dict[str, int | str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            out[str(p.relative_to(top))] = "dir" if p.is_dir() and not p.is_symlink() else os.lstat(p).st_size
    return out


def source_tree(work: Path) -> Path:
    """A small tree of real files (a stdlib package, ~40 files) under `work/src`."""
    src = work / "src"
    shutil.copytree(Path(shutil.__file__).parent / "email", src, ignore=shutil.ignore_patterns("__pycache__"))
    return src


def setup(name: str, work: Path) -> tuple[list[str], dict[str, str], Path]:
    """Makes `work` (new) ready for program `name`: (command, extra environment, the directory
    to run it in: `work`, so that nothing it does lands elsewhere)."""
    work.mkdir(parents=True)
    if name == "cp":
        source_tree(work)
        return ["cp", "-r", str(work / "src"), str(work / "dst")], {}, work
    if name == "tar":
        source_tree(work)
        return (
            ["sh", "-c", f"tar -cf {work}/a.tar -C {work} src && mkdir {work}/x && tar -xf {work}/a.tar -C {work}/x"],
            {},
            work,
        )
    if name == "git":
        source_tree(work)
        return (
            [
                "sh",
                "-c",
                "cd src && git init -q && git add . && git commit -qm first && "
                "echo more >> __init__.py && git commit -qam second && git gc -q",
            ],
            {**GIT_ENV, "HOME": str(work)},
            work,
        )
    if name == "sqlite3":
        (work / "script.sql").write_text(SQL)
        return ["sh", "-c", f"sqlite3 {work}/db.sqlite < {work}/script.sql"], {}, work
    if name == "python":
        source_tree(work)
        (work / "prog.py").write_text(PY_THREADS)
        return [sys.executable, str(work / "prog.py"), str(work / "src"), str(work / "dst")], {}, work
    raise ValueError(f"unknown program {name!r}: expected one of {', '.join(PROGRAMS)}")
