"""Built-in formats: each module declares a format's event types once, as data."""

from . import bpftrace, chrome, stap, strace, tod

BUILTIN = {m.FORMAT: m for m in (tod, strace, chrome, bpftrace, stap)}

__all__ = ["BUILTIN", "bpftrace", "chrome", "stap", "strace", "tod"]
