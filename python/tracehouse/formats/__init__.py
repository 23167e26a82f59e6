"""Built-in formats: each module declares a format's event types once, as data."""

from . import strace, tod

BUILTIN = {tod.FORMAT: tod, strace.FORMAT: strace}

__all__ = ["BUILTIN", "strace", "tod"]
