"""`python -m tracehouse.record`: record a Python program.

    python -m tracehouse.record [--store DIR] [--name N] [--include PKG] [--exclude PKG] -- prog.py ARGS

is `tracehouse record ... -- python prog.py ARGS` with this interpreter. With `--child FD` it is
the traced process that `tracehouse record` starts (`child.py`).
"""

import sys

if "--child" in sys.argv[1:sys.argv.index("--") if "--" in sys.argv else len(sys.argv)]:
    from tracehouse.record.child import main

    sys.exit(main(sys.argv[1:]))
else:
    from tracehouse.cli import main

    sys.exit(main(["record", *sys.argv[1:]] if "--" in sys.argv else ["record", "--", *sys.argv[1:]]))
