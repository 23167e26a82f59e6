"""Built-in formats: each module declares a format's event types once, as data."""

from . import tod

BUILTIN = {tod.FORMAT: tod}

__all__ = ["BUILTIN", "tod"]
