"""The import graph of the `tracehouse` package, and the layering it must keep.

Owns the rule of the layout (docs/architecture.md, "The house"): data flows one way,

    base -> store -> formats -> analysis -> record -> replay -> workload -> server -> bench -> cli
                                                                         (bench-suite: tracehouse_bench, on top)

and a module may import only modules of its own layer or of a lower one; nothing
imports `tracehouse.cli` (the command is the top) and nothing but the CLI imports
`tracehouse.server`. So the server imports no bench, and the benchmark suite (bench-suite/,
package `tracehouse_bench`, a separate distribution) may import tracehouse but tracehouse never
imports it (it plugs in through entry points). Every import counts, also the lazy ones inside a function and the
ones under `if TYPE_CHECKING:` (a type-only back reference is still an arrow back up).
Cycles are looked for between modules too (within a layer).

A name starting with `_` is private to its room (`tracehouse.<room>`): no module of another
room imports it (`from tracehouse.analysis.spans import _x`, a module `_x` of another room)
or reads it off an imported module (`spans._x`). The one exception is `tracehouse._core`,
the native module, whose underscore says it is compiled: its public surface is its stub.

    python dev/importgraph.py            # the package graph as text (docs/import-graph.txt)
    python dev/importgraph.py --dot      # ... as Graphviz (docs/import-graph.dot)
    python dev/importgraph.py --check    # exit 1 listing every violation (tests/test_layout.py runs it)

Reads the sources with `ast` only: nothing is imported, so it runs without the built core.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG_DIR = ROOT / "python" / "tracehouse"
SUITE_DIR = ROOT / "bench-suite" / "tracehouse_bench"
PACKAGES = ("tracehouse", "tracehouse_bench")

# Lowest first. A module belongs to the layer of the longest prefix naming it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "tracehouse._core",
            "tracehouse.arrays",
            "tracehouse.child_processes",
            "tracehouse.errors",
            "tracehouse.jsonvalues",
            "tracehouse.lazy",
            "tracehouse.schema",
            "tracehouse.util",
        ),
    ),
    ("store", ("tracehouse.store",)),
    ("formats", ("tracehouse.formats",)),
    ("analysis", ("tracehouse.analysis",)),
    ("record", ("tracehouse.record",)),
    ("replay", ("tracehouse.replay",)),
    ("workload", ("tracehouse.workload",)),
    ("server", ("tracehouse.server",)),
    ("bench", ("tracehouse.bench",)),
    ("cli", ("tracehouse.cli",)),
    ("bench-suite", ("tracehouse_bench",)),
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
RANK["unplaced"] = len(LAYERS)  # a module no layer names: reported
# Cycles kept on purpose, each with its reason.
ALLOWED_CYCLES = {
    frozenset(
        {"tracehouse.store.engines", "tracehouse.store.spark"}
    ): "open_engine(engine='spark') loads the Spark engine only when asked (pyspark is optional and "
    "heavy); the Spark engine builds on the engines' shared views",
}
# Surfaces: importing them is allowed only from the layers listed.
SURFACES = {"tracehouse.cli": {"cli"}, "tracehouse.server": {"server", "cli"}}


def module_name(path: Path) -> str:
    package_dir = next(p for p in path.parents if p.name in PACKAGES)
    rel = path.relative_to(package_dir.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    out = {module_name(p): p for d in (PKG_DIR, SUITE_DIR) for p in sorted(d.rglob("*.py"))}
    out["tracehouse._core"] = PKG_DIR / "_core.pyi"
    return out


def layer_of(mod: str) -> str:
    if mod == "tracehouse":
        return "store"  # the package root re-exports Store and what it needs, nothing higher
    best, best_len = "unplaced", -1
    for name, prefixes in LAYERS:
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best_len:
                best, best_len = name, len(p)
    return best


def _from_module(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module a `from X import ...` in `mod` imports from."""
    if node.level:
        base = mod.split(".") if is_pkg else mod.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def _resolve(known: dict[str, Path], mod: str, is_pkg: bool, node: ast.ImportFrom) -> list[str]:
    target = _from_module(mod, is_pkg, node)
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        out.append(sub if sub in known else target)
    return out


def imports(known: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the tracehouse modules it imports (anywhere in its body)."""
    graph: dict[str, set[str]] = {}
    for mod, path in known.items():
        if path.suffix != ".py":
            graph[mod] = set()
            continue
        tree = ast.parse(path.read_text(), str(path))
        is_pkg = path.name == "__init__.py"
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                deps.update(_resolve(known, mod, is_pkg, node))
            elif (
                isinstance(node, ast.Call)
                and _call_name(node) in ("import_module", "lazy.module")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                deps.add(node.args[0].value)  # importlib.import_module("tracehouse.x"), lazy.module("tracehouse.x")
        graph[mod] = {_known_prefix(known, d) for d in deps if d.split(".")[0] in PACKAGES}
        graph[mod].discard(mod)
    return graph


def _call_name(node: ast.Call) -> str | None:
    """`f` for a call of `f(...)` or `x.f(...)`, `lazy.module` for `lazy.module(...)`."""
    f = node.func
    if isinstance(f, ast.Attribute):
        return "lazy.module" if f.attr == "module" and getattr(f.value, "id", None) == "lazy" else f.attr
    return getattr(f, "id", None)


def _known_prefix(known: dict[str, Path], name: str) -> str:
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _parents(mod: str) -> set[str]:
    """A module's enclosing packages: importing `a.b.c` runs `a/__init__` and `a/b/__init__`
    first, but that is Python's doing, not an arrow of ours."""
    parts = mod.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


# Private by its name but the door of its room: (module, reason).
PUBLIC_PRIVATE = {"tracehouse._core": "the native module: its surface is the stub _core.pyi"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_part(mod: str) -> str | None:
    """The first private component of a dotted module name, with what precedes it."""
    parts = mod.split(".")
    for i, p in enumerate(parts):
        if _private(p):
            return ".".join(parts[: i + 1])
    return None


def private_uses(known: dict[str, Path]) -> list[str]:
    """Every use of another room's private name: imported by name, a private module
    imported, or read as an attribute of a module imported from another room."""
    out = []
    for mod, path in sorted(known.items()):
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        is_pkg = path.name == "__init__.py"
        bound: dict[str, str] = {}  # local name -> tracehouse module it names

        def check(target: str, what: str, line: int, mod: str = mod) -> None:
            priv = _private_part(target)
            if priv is None or priv in PUBLIC_PRIVATE or group(priv) == group(mod):
                return
            out.append(f"{mod}:{line} uses the private {what} of another room")

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("tracehouse."):
                        check(a.name, f"module {a.name}", node.lineno)
                        if a.asname:
                            bound[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom):
                target = _from_module(mod, is_pkg, node)
                if target != "tracehouse" and not target.startswith("tracehouse."):
                    continue
                check(target, f"module {target}", node.lineno)
                for a in node.names:
                    full = f"{target}.{a.name}"
                    check(full, f"name {full}", node.lineno)
                    if full in known:
                        bound[a.asname or a.name] = full
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and _private(node.attr)
            ):
                check(f"{bound[node.value.id]}.{node.attr}", f"name {bound[node.value.id]}.{node.attr}", node.lineno)
    return out


def violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for mod, deps in sorted(graph.items()):
        mine = layer_of(mod)
        if mine == "unplaced":
            out.append(f"{mod} is in no layer (add its room to LAYERS)")
        for d in sorted(deps):
            if d in _parents(mod) and d != "tracehouse":
                continue
            theirs = layer_of(d)
            for surface, allowed in SURFACES.items():
                if (d == surface or d.startswith(surface + ".")) and mine not in allowed:
                    out.append(f"{mod} imports the surface {d}")
            if RANK[theirs] > RANK[mine]:
                out.append(f"{mod} ({mine}) imports {d} ({theirs}): an arrow back up")
    for cycle in cycles(graph):
        if frozenset(cycle) in ALLOWED_CYCLES:
            continue
        out.append("cycle: " + " -> ".join(cycle + [cycle[0]]))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as a list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w in _parents(v):
                continue  # a package's __init__ importing its own submodule is not a cycle with it
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def group(mod: str) -> str:
    """The room a module lives in: tracehouse.<room> (or the top-level module itself); the
    benchmark suite is one room."""
    parts = mod.split(".")
    return parts[0] if parts[0] == "tracehouse_bench" else ".".join(parts[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for mod, deps in graph.items():
        g = group(mod)
        out.setdefault(g, set())
        for d in deps:
            if group(d) != g and d not in _parents(mod):
                out[g].add(group(d))
    return out


def text(graph: dict[str, set[str]]) -> str:
    pg = package_graph(graph)
    lines = [
        "tracehouse: rooms by layer (lowest first) and what each imports",
        "(generated by dev/importgraph.py; every arrow points down a layer or across one)",
        "",
    ]
    for name in [*(n for n, _ in LAYERS), "unplaced"]:
        rooms = sorted(r for r in pg if layer_of(r) == name)
        if not rooms:
            continue
        lines.append(f"[{name}]")
        for r in rooms:
            deps = sorted(pg[r], key=lambda d: (RANK[layer_of(d)], d))
            lines.append(f"  {r:<24} -> {', '.join(deps) if deps else '(nothing of ours)'}")
    return "\n".join(lines) + "\n"


def dot(graph: dict[str, set[str]]) -> str:
    pg = package_graph(graph)
    lines = ["// generated by dev/importgraph.py --dot", "digraph tracehouse {", "  rankdir=BT; node [shape=box];"]
    for name, _ in LAYERS:
        rooms = sorted(r for r in pg if layer_of(r) == name)
        if rooms:
            lines.append(f'  subgraph cluster_{name} {{ label="{name}"; ' + " ".join(f'"{r}";' for r in rooms) + " }")
    for r in sorted(pg):
        for d in sorted(pg[r]):
            lines.append(f'  "{r}" -> "{d}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dot", action="store_true", help="Graphviz instead of text")
    p.add_argument("--check", action="store_true", help="list violations of the layering; exit 1 if any")
    args = p.parse_args(argv)
    graph = imports(modules())
    if args.check:
        bad = violations(graph) + private_uses(modules())
        for b in bad:
            print(b)
        return 1 if bad else 0
    sys.stdout.write(dot(graph) if args.dot else text(graph))
    return 0


if __name__ == "__main__":
    sys.exit(main())
