"""Threads writing, reading back and checking files (the file-IO program of `bench record`).

Each of THREADS workers writes FILES files of LINES lines into its own directory, reads them
back, parses every line and sums a checksum, then removes them; the main thread checks the
totals. Usage: file_io_threads.py [THREADS] [FILES] [LINES]
"""

import os
import sys
import tempfile
import threading


class Worker(threading.Thread):
    def __init__(self, index, root, files, lines):
        super().__init__(name=f"io-{index}")
        self.index = index
        self.dir = os.path.join(root, f"w{index}")
        self.files = files
        self.lines = lines
        self.written = 0
        self.checksum = 0

    def write_file(self, path, seed):
        with open(path, "w") as f:
            for i in range(self.lines):
                value = (seed * 31 + i * 7) % 1000
                f.write(f"{i},{value},{'x' * (value % 13)}\n")
                self.written += 1

    def read_file(self, path):
        total = 0
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split(",")
                total += int(parts[1]) + len(parts[2])
        return total

    def run(self):
        os.makedirs(self.dir)
        for k in range(self.files):
            path = os.path.join(self.dir, f"f{k}.csv")
            self.write_file(path, self.index * 1000 + k)
            self.checksum += self.read_file(path)
            os.remove(path)
        os.rmdir(self.dir)


def main(threads=4, files=10, lines=2000):
    with tempfile.TemporaryDirectory(prefix="th-io-") as root:
        workers = [Worker(i, root, files, lines) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    total = sum(w.checksum for w in workers)
    written = sum(w.written for w in workers)
    assert written == threads * files * lines, written
    print(f"{written} lines, checksum {total}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
