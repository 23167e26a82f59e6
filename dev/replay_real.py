"""Capture five real programs and replay each: the "differ from the trace" count and the skip reasons.

Owns the check of replay against programs nobody here wrote: `cp -r` of a tree, git
(init, add, commit, gc), tar (create and extract), sqlite3 (a few transactions from a
redirected stdin) and a threaded Python program (os.scandir, os.listdir, shutil.copytree,
os.copy_file_range). Each is captured with `tracehouse capture`, replayed with the default
placement (every traced path under the root, the working directory mapped to `data`) and
original timing; its calls that differ from the trace (failed on the target but not in
the trace or the reverse, short writes) are counted and listed by syscall and error, and
the tree the replay left under `data` is compared with the one the program left (entries
and file sizes). The programs are the tests' (tests/helpers/real_programs.py).
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from helpers.real_programs import PROGRAMS, setup, tree  # noqa: E402 (the tests' own programs)

LABELS = {"cp": "cp -r", "python": "python threads"}


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
        for name in PROGRAMS:
            wd = work / "w" / name
            cmd, extra, cwd = setup(name, wd)
            cap = run(th, ["capture", "--name", name, "--", *cmd], dict(os.environ, **extra), cwd)
            root = work / "roots" / name
            r = run(th, ["replay", name, "--root", str(root), "--map", f"{wd}=data"])
            sm = r["summary"]
            want, got = tree(wd), tree(root / "data")
            tree_diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            row = {
                "program": LABELS.get(name, name),
                "tree_differs": len(tree_diff),
                "tree_diff": tree_diff[:5],
                "exit": cap["exit_status"],
                "syscalls": cap["summary"]["syscalls"],
                "replayed": sm["ops"],
                "errors": sm["errors"],
                "differ": sm["divergent"],
                "complete": sm["complete"],
                "skipped": sm["skipped"],
            }
            if args.detail:
                q = (
                    f'SELECT name, kind, errno, source_errno, count(*) AS n FROM "{r["trace"]}".op '
                    f"WHERE (errno IS NULL) <> (source_errno IS NULL) GROUP BY ALL ORDER BY n DESC LIMIT 12"
                )
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
