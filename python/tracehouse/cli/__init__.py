"""The `tracehouse` command: a surface over `Store` (nothing below imports it).

`command.py` parses arguments and runs a command; the command groups live one module each
beside it (`analyze`, `replay`, `serve`, ...). `main` here imports them only when called,
so `import tracehouse.cli` costs nothing. `run` is the installed command (and `python -m
tracehouse.cli`): `main`, then the process ends without the interpreter's teardown.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from .command import main as run

    return run(argv)


def run() -> None:
    """`main()` as the process: once it returned, what an exit must do is done here (the
    standard streams flushed, non-daemon threads joined and `atexit` handlers run, as the
    interpreter does them) and the process ends with `os._exit`, skipping the teardown that
    frees every object and module one by one only for the kernel to drop the memory anyway.

    Measured on `tracehouse import strace` of the 3M-line many-process log (12 runs of each,
    interleaved, 2 cores): the teardown was 30-45 ms of the command after the import was done
    (garbage collection of everything pyarrow and the store built, then glibc handing a 31 MB
    arena back, 22 ms of it in one madvise); the command's median 0.845 -> 0.815 s. Again against
    `sys.exit(main())` (12 interleaved pairs each, load 4.5): importing a 1M-line strace log 732 ->
    639 ms wall, 695 -> 647 ms CPU; a GROUP BY over a 2M-event trace 572 -> 536 ms wall.
    It leans on CPython's private `threading._shutdown` (the join of non-daemon threads an exit
    owes): tests/cli/test_issue11_cli.py runs a thread that writes only after the command returned
    and fails if that join is gone. An exception or SystemExit (argparse's errors, --help) takes
    the ordinary way out."""
    import os
    import sys

    _start_early(sys.argv[1:])
    code = main()
    import atexit
    import threading

    try:
        sys.stdout.flush()
    except BrokenPipeError:  # `tracehouse ... | head`: what the reader did not take is dropped
        code = code or 0
    except (OSError, ValueError):  # (ValueError: stdout closed by the command)
        code = code or 1
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    # What Py_FinalizeEx does before its teardown: threading's own exit hooks (executors'
    # shutdown) and the join of non-daemon threads, then the atexit handlers.
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def _start_early(argv: list[str]) -> None:
    """`tracehouse [--store S] import FORMAT FILE ...`: an importer that declares a `start` hook
    (strace: the parse of FILE on threads of its own) begins before the command's modules are
    loaded and its arguments parsed (`formats.registry.start_early`); `import` takes it over
    and checks the command as always. Any other shape of command line is left to that.
    Measured on the 3M-line many-process strace log, 16 interleaved runs each at load ~0:
    median 0.750 -> 0.730 s, best 0.720 -> 0.690 s; it pays only while the parse is the
    command's critical path (with the command at ~1.5 s and 2+ CPU-s it made no difference)."""
    k = 0
    while k < len(argv) and argv[k] != "import":
        if argv[k] == "--store":
            k += 2
        elif argv[k].startswith("--store="):
            k += 1
        else:
            return
    if len(argv) < k + 3 or argv[k + 1].startswith("-") or argv[k + 2].startswith("-"):
        return
    from ..formats.registry import start_early

    start_early(argv[k + 1], argv[k + 2])


__all__ = ["main", "run"]
