"""The omniscient recorder of Python programs, and travel back in a recording.

- `child.py`: inside the traced process (the tracer is `src/record/tracer.rs`).
- `record.py`: `tracehouse record -- python prog.py`: starts the program, stores its events.
- `reference.py`: a pure-Python `sys.settrace` recorder of the same events (the baseline of
  `bench record` and the reference of the equivalence tests).
- `debug.py`: `tracehouse debug` and the web UI's Debug page: position, stack, steps, origins.

Nothing here is imported by `import tracehouse`; the traced process imports `child` alone.
"""
