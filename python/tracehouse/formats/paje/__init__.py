"""The Paje trace format (Paje, ViTE, FrameSoC, SimGrid): `%EventDef` headers, then events.

Owns the format's name; its event types are declared once, in Rust
(src/formats/paje/decl.rs, read through `formats/declared.py`). The Rust parser
(`tracehouse._core.NativeParser("paje")`, src/formats/paje/mod.rs) replays the file: containers
become producers (kind = container type name, nested like the containers),
states become `state` spans, PajeNewEvent `event` instants, variables
`variable` counters, links `link` rows. Times in the file are in --time-unit
(seconds by default); stored times are integer nanoseconds.
"""

from __future__ import annotations

from .. import declared

FORMAT = "paje"
DESCRIPTION = declared.description(FORMAT)
EVENT_TYPES = declared.event_types(FORMAT)
