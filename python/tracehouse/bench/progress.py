"""Progress of a long benchmark on stderr, whether or not stderr is a terminal.

Owns how a benchmark says it is alive. On a terminal: rich's live bars. Piped or
redirected (a CI log, `2> bench.log`, an agent's shell), rich draws nothing until the end
and a 36-second run looked hung: there a stage prints one line when it starts, a line
at most every `every` seconds while it runs (done/total, elapsed) and one when it ends.
The same three calls drive both (`add_task`, `advance`, `update`), as rich's
`Progress` has them, so a benchmark is written once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@dataclass
class _Stage:
    description: str
    total: float | None
    completed: float = 0
    started: float = 0.0
    printed: float = 0.0
    done: bool = False


class LineProgress:
    """`rich.progress.Progress`'s add_task / advance / update, as plain lines (see the module doc)."""

    def __init__(self, console: Console, every: float = 5.0) -> None:
        self.console = console
        self.every = every
        self.stages: list[_Stage] = []

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        for i, st in enumerate(self.stages):
            if not st.done and exc[0] is None:
                self._finish(i)

    def _say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _count(self, st: _Stage) -> str:
        done = f"{st.completed:,.0f}"
        return f"{done}/{st.total:,.0f}" if st.total else done

    def add_task(self, description: str, total: float | None = None, **_) -> int:
        now = time.monotonic()
        self.stages.append(_Stage(description.strip(), total, started=now, printed=now))
        self._say(f"{description.strip()} ..." + (f" ({total:,.0f})" if total else ""))
        return len(self.stages) - 1

    def advance(self, task: int, advance: float = 1) -> None:
        st = self.stages[task]
        st.completed += advance
        self._tick(task)

    def update(self, task: int, *, total: float | None = None, completed: float | None = None, **_) -> None:
        st = self.stages[task]
        if total is not None:
            st.total = total
        if completed is not None:
            st.completed = completed
        self._tick(task)

    def _tick(self, task: int) -> None:
        st = self.stages[task]
        if st.done:
            return
        now = time.monotonic()
        if st.total is not None and st.completed >= st.total:
            self._finish(task)
        elif now - st.printed >= self.every:
            st.printed = now
            self._say(f"{st.description}: {self._count(st)}, {now - st.started:.0f} s")

    def _finish(self, task: int) -> None:
        st = self.stages[task]
        st.done = True
        self._say(f"{st.description}: done ({self._count(st)}) in {time.monotonic() - st.started:.1f} s")


def stages(enabled: bool = True, *, every: float = 5.0, console: Console | None = None) -> Progress | LineProgress:
    """Live bars on a terminal, `LineProgress` lines otherwise (nothing when not enabled)."""
    console = console or Console(stderr=True)
    if enabled and not console.is_terminal:
        return LineProgress(console, every)
    return Progress(
        TextColumn("{task.description:<26}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not enabled,
    )
