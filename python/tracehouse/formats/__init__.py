"""Built-in formats: each module declares a format's event types once, as data."""

from . import bpftrace, chrome, paje, stap, strace, tod

BUILTIN = {m.FORMAT: m for m in (tod, strace, chrome, bpftrace, stap, paje)}

__all__ = ["BUILTIN", "bpftrace", "chrome", "paje", "stap", "strace", "tod"]
