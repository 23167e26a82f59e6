"""`python -m tracehouse.record`: record a Python program with this interpreter.

    python -m tracehouse.record [--store DIR] [--name N] [--include PKG] [--exclude PKG] [--json] prog.py ARGS
    python -m tracehouse.record ... -m MODULE ARGS

is `tracehouse record ... -- python prog.py ARGS` with this interpreter (the same recording, the
same report). With `--child FD` it is the traced process `tracehouse record` starts (`child.py`).
"""

import sys


def _parent(argv: list[str]) -> int:
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m tracehouse.record", description="record a Python program")
    p.add_argument("--store", help="store directory (default: $TRACEHOUSE_HOME or ./tracehouse-data)")
    p.add_argument("--name")
    p.add_argument("--include", action="append", default=[])
    p.add_argument("--exclude", action="append", default=[])
    p.add_argument("--json", action="store_true")
    p.add_argument("program", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    prog = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not prog:
        p.error("no program to record")
    import tracehouse

    from .record import record

    with tracehouse.open(args.store) as s:
        r = record(
            s,
            [sys.executable, *prog],
            args.name,
            include=args.include,
            exclude=args.exclude,
            stdout=2 if args.json else None,
        )
    if args.json:
        print(json.dumps(r.to_json(), indent=2))
    else:
        print(
            f"recorded {r.trace}: {r.events:,} events in {r.seconds:.2f} s; the program exited with {r.exit_status}"
            + ("" if r.complete else f" (incomplete: {r.reason})")
        )
    return r.exit_status if r.exit_status is not None else 1


if __name__ == "__main__":
    head = sys.argv[1 : sys.argv.index("--")] if "--" in sys.argv else sys.argv[1:]
    if "--child" in head:
        from tracehouse.record.child import main

        sys.exit(main(sys.argv[1:]))
    sys.exit(_parent(sys.argv[1:]))
