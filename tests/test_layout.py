"""The package's layering (README "Layout"): data flows one way, nothing imports the CLI, no
cycles. dev/importgraph.py reads the sources with `ast`; this runs its check."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_imports_flow_one_way_and_nothing_imports_the_cli():
    r = subprocess.run([sys.executable, str(ROOT / "dev" / "importgraph.py"), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 0, "layering violations:\n" + r.stdout + r.stderr


def test_help_loads_no_heavy_module():
    """`tracehouse --help` imports neither pyarrow nor DuckDB nor the command modules (start-up time)."""
    code = ("import sys\nfrom tracehouse.cli import command\n"
            "try:\n    command.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'duckdb', 'numpy', 'rich')"
            " or m.startswith('tracehouse.cli.') and m != 'tracehouse.cli.command'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"
