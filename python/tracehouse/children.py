"""Processes tracehouse starts: its own, which must not outlive the process that started them,
and the user's (`capture`), which must get the environment as the user set it.

Owns the contract between the first two: the starter puts its pid in the child's environment
(`env_for_child`); the child calls `exit_with_parent()` once its signal handlers are in place,
and the kernel then sends it SIGTERM when the starter dies, even by SIGKILL, which no `finally`
of the starter survives (prctl PR_SET_PDEATHSIG). An orphan `tracehouse serve` of a killed
bench loaded this machine during later measurements.

Owns too the variables the command sets for itself (`one_blas_thread`), which `user_env` leaves
out of a user's program.
"""

from __future__ import annotations

import os
import signal

EXIT_WITH_PARENT = "TRACEHOUSE_EXIT_WITH_PARENT"
PR_SET_PDEATHSIG = 1

BLAS_THREADS = "OPENBLAS_NUM_THREADS"
# Variables this process set for itself, not asked for by the user (see `user_env`).
_OWN: set[str] = set()


def one_blas_thread() -> None:
    """numpy, which pyarrow imports, loads OpenBLAS, and OpenBLAS starts a thread per core when it
    loads, which spins a while: the command does no linear algebra worth a thread, and on 2 cores
    that spin took the core the strace parse was running on. So the command asks for one thread,
    unless the user chose a number (OpenBLAS reads it once, when it loads).

    Measured: `import pyarrow` 0.16 -> 0.10 CPU-s; `tracehouse import strace` of the 3M-line
    many-process log, 10 interleaved runs each, median 0.785 -> 0.745 s, 1.33 -> 1.305 CPU-s."""
    if BLAS_THREADS not in os.environ:
        os.environ[BLAS_THREADS] = "1"
        _OWN.add(BLAS_THREADS)


def user_env() -> dict[str, str]:
    """The environment for a program the user asked to run (`capture -- CMD`): this process's,
    without what it set for itself (`one_blas_thread`): a traced numpy program keeps its threads."""
    return {k: v for k, v in os.environ.items() if k not in _OWN}


def env_for_child() -> dict[str, str]:
    """This process's environment, asking the child to exit with this process.

    The kernel signals the child when the *thread* that started it exits: start it from a thread
    that lives as long as the child is needed (e.g. the main thread)."""
    return {**os.environ, EXIT_WITH_PARENT: str(os.getpid())}


def exit_with_parent() -> bool:
    """In a child started with `env_for_child`: SIGTERM to this process when its starter dies
    (at once if it died already). False when not asked to."""
    want = os.environ.pop(EXIT_WITH_PARENT, None)
    if not want:
        return False
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(want):  # it died before the prctl: nobody else will send the signal
        os.kill(os.getpid(), signal.SIGTERM)
    return True
