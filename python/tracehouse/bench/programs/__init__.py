"""The programs `tracehouse bench record` records: pyperformance's nbody, richards, json_dumps,
json_loads and regex_effbot (MIT license, © the pyperformance authors; the files are theirs,
unchanged: `pyperf.py` here stands in for the pyperf package they import), and a threaded
file-IO program of ours (`file_io_threads.py`)."""
