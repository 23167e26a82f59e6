"""otlp importer: a file of OTLP requests through the Rust parser: JSON lines (one
`ExportTraceServiceRequest` or `ExportLogsServiceRequest` per line, as the OpenTelemetry
Collector's file exporter writes them), or one protobuf `ExportTraceServiceRequest` (a body as
posted to `/v1/traces`); gzip looked through. Everything else is the format's declaration
(`formats/otlp/__init__.py`).
"""

from __future__ import annotations

from .. import otlp as fmt
from ..parser_loader import plain_importer

NAME = "otlp"

import_file, import_stream = plain_importer(fmt)
