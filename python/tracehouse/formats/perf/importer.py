"""perf importer: `perf script` text (a file, gzip or not, or a pipe) through the Rust parser.

`perf record -g -o perf.data CMD; perf script -i perf.data > perf.txt; tracehouse import perf
perf.txt`, or `perf script -i perf.data | tracehouse import perf -`. Everything else (sniffer,
description, event types) is the format's declaration (`formats/perf/__init__.py`).
"""

from __future__ import annotations

from .. import perf as fmt
from ..parser_loader import plain_importer

NAME = "perf"

import_file, import_stream = plain_importer(fmt)
