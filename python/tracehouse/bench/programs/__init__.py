"""What `tracehouse bench record` runs beside pyperformance's programs: `pyperf.py`, a stand-in for
the pyperf package that pyperformance's nbody, richards, json_dumps, json_loads and regex_effbot
import (they are taken unchanged from the installed `pyperformance` package, see bench/record.py),
and a threaded file-IO program of ours (`file_io_threads.py`)."""
