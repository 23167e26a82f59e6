"""Perfetto importer: a protobuf trace (a file, gzip or not, or a pipe) through the Rust parser.

`tracehouse import perfetto trace.perfetto-trace`, or `... | tracehouse import perfetto -`
(packets are parsed as they arrive). Everything else (sniffer, description, event types) is the
format's declaration (`formats/perfetto/__init__.py`).
"""

from __future__ import annotations

from .. import perfetto as fmt
from ..parser_loader import plain_importer

NAME = "perfetto"

import_file, import_stream = plain_importer(fmt)
