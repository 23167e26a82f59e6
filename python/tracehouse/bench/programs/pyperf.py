"""A stand-in for `pyperf` so pyperformance's benchmark files run unchanged as plain programs.

`Runner.bench_func` / `bench_time_func` run the benchmark once with $PYPERF_LOOPS loops
(default 1); the command line takes the benchmark's own options. Nothing is timed or spawned
here: `tracehouse bench record` times the whole program from outside.
"""

import argparse
import os
import time

perf_counter = time.perf_counter


class Runner:
    def __init__(self, *args, **kwargs):
        self.argparser = argparse.ArgumentParser()
        self.metadata = {}
        self.args = None

    def parse_args(self, args=None):
        self.args = self.argparser.parse_args(args)
        return self.args

    def _loops(self):
        return int(os.environ.get("PYPERF_LOOPS", "1"))

    def bench_func(self, name, func, *args, inner_loops=None, metadata=None):
        if self.args is None:
            self.parse_args()
        for _ in range(self._loops()):
            func(*args)

    def bench_time_func(self, name, func, *args, inner_loops=None, metadata=None):
        if self.args is None:
            self.parse_args()
        return func(self._loops(), *args)
