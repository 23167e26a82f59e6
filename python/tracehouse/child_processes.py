"""Processes tracehouse starts that must not outlive the process that started them.

Owns the contract between the two: the starter puts its pid in the child's environment
(`env_for_child`); the child calls `exit_with_parent()` once its signal handlers are in place,
and the kernel then sends it SIGTERM when the starter dies, even by SIGKILL, which no `finally`
of the starter survives (prctl PR_SET_PDEATHSIG). An orphan `tracehouse serve` of a killed
bench loaded this machine during later measurements.
"""

from __future__ import annotations

import os
import signal

EXIT_WITH_PARENT = "TRACEHOUSE_EXIT_WITH_PARENT"
PR_SET_PDEATHSIG = 1


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
