"""pprof importer: a profile.proto file (gzipped, as Go writes it, or not) through the Rust parser.

`go test -cpuprofile cpu.pprof; tracehouse import pprof cpu.pprof`, or
`curl .../debug/pprof/profile | tracehouse import pprof -`. Everything else (sniffer,
description, event type) is the format's declaration (`formats/pprof/__init__.py`).
"""

from __future__ import annotations

from .. import pprof as fmt
from ..parser_loader import plain_importer

NAME = "pprof"

import_file, import_stream = plain_importer(fmt)
