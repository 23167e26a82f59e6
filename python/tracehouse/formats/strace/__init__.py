"""The strace format (seed 002): the syscalls of traced processes, typed for IO replay.

Owns the format's name and the reasons below; the three event types are declared
once, in Rust (src/formats/strace/decl.rs, read through `formats/declared.py`), and
the parser (`tracehouse._core.StraceParser`, src/formats/strace/mod.rs) builds its
batches' schemas from that declaration. Producers are
processes (kind "process", parent: the forking process) and their threads
(kind "thread", parent: their process); strace's pid column is a thread id.

Decisions:
- One span type `syscall` for every syscall, typed columns for what an IO replayer
  and a performance engineer ask (which file, where, how much, how long, did it
  fail), instead of one type per syscall: a trace is one table to scan, and a
  syscall we do not decode is still kept (its arguments as text in `args`).
- `pos` is the file offset the call operated at: explicit for pread/pwrite/lseek/
  mmap, the tracked file position for read/write/readv/writev (null when unknown:
  fd opened before the trace, O_APPEND, pipes and sockets). Not `offset`: that is
  an SQL keyword and would need quoting in every query.
- `path` comes from `-y` when present, else from the fd table the parser rebuilds
  per process (open/dup/fork/close/execve), else from the path argument made
  absolute against its directory fd or the working directory when known.
- Calls that move bytes between two fds (copy_file_range, splice, sendfile, tee)
  are typed like a read on the source and a write on the destination in one row:
  `fd`/`path`/`pos` the source, `fd2`/`path2`/`pos2` the destination, `size` the
  length asked, `ret` the bytes moved. New columns go at the end: a replayer's
  queries over the older ones keep working.
- `path_arg` keeps what the program asked for (`src/a.bin`) beside the resolved
  `path` (`/home/u/src/a.bin` from -y or the working directory).
- `= ?` results (exit, a killed thread) and calls whose `<... resumed>` never came
  are kept with a null `ret`; signals and exits are instants of their own types.
"""

from __future__ import annotations

from .. import declared

FORMAT = "strace"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)
