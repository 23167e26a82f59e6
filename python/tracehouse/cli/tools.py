"""`tracehouse tools`: every importer, exporter and analysis the installation can use.

Owns listing them. Tools are found through Python entry points, one group per kind
(`formats.registry.GROUPS`), so another package adds a format, an exporter or an analysis by
declaring it in its own pyproject.toml, without touching ours:

    [project.entry-points."tracehouse.importers"]     # a module/object with NAME, DESCRIPTION,
    myformat = "mypkg.myformat"                        # sniff(head) and import_file(store, path, name, ...)
    [project.entry-points."tracehouse.exporters"]     # NAME, DESCRIPTION, export(store, trace, out, *, progress)
    [project.entry-points."tracehouse.analyses"]      # an Analysis (tracehouse.analysis.registry): name, summary,
    longest = "mypkg.longest:LONGEST"                  # parameters with units, run(store, trace, window, **params)

tracehouse declares its own importers, exporters and analyses in the same groups, and nowhere
else. A plugin that fails to load is listed with its error instead of breaking the command.
"""

from __future__ import annotations

from .output import emit_json, out


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0]


def list_tools() -> list[dict]:
    """[{name, kind, description, source, version, module, options}] sorted by kind then name."""
    from .. import __version__
    from ..analysis import registry as analyses
    from ..formats import registry

    found: dict[tuple[str, str], dict] = {}

    def add(kind, name, obj, source, version, module):
        found.setdefault(
            (kind, name),
            {
                "name": name,
                "kind": kind,
                "description": getattr(obj, "DESCRIPTION", None) or _first_line(getattr(obj, "__doc__", "")),
                "source": source,
                "version": version,
                "module": module,
                "options": sorted(getattr(obj, "OPTIONS", None) or {}),
            },
        )

    for name, a in analyses.analyses().items():
        found[("analysis", name)] = {
            "name": name,
            "kind": "analysis",
            "description": a.summary,
            "source": a.source,
            "version": a.version or (__version__ if a.source == "tracehouse" else None),
            "module": getattr(a.run, "__module__", None) or "?",
            "options": [],
        }  # its parameters: `tracehouse analyze NAME --help`
    for name, why in analyses.failures().items():
        found.setdefault(
            ("analysis", name),
            {
                "name": name,
                "kind": "analysis",
                "description": why,
                "source": "?",
                "version": None,
                "module": "?",
                "options": [],
            },
        )
    for kind in registry.GROUPS:
        if kind == "analysis":
            continue  # the analysis registry read the group
        for ep in registry.entry_points(kind):
            if (kind, ep.name) in found:
                continue
            dist = getattr(ep, "dist", None)
            source = dist.name if dist is not None else "?"
            version = dist.version if dist is not None else None
            try:
                # An importer's description may be its format's declaration's (registry.Importer).
                obj = registry.importers().get(ep.name) if kind == "importer" else None
                obj = obj or ep.load()
            except Exception as e:  # a broken plugin is reported, not fatal
                found[(kind, ep.name)] = {
                    "name": ep.name,
                    "kind": kind,
                    "description": f"failed to load: {e!r}",
                    "source": source,
                    "version": version,
                    "module": ep.value,
                    "options": [],
                }
                continue
            add(kind, ep.name, obj, source, version, ep.value)
    return sorted(found.values(), key=lambda t: (list(registry.GROUPS).index(t["kind"]), t["name"]))


def cmd_tools(args) -> int:
    tools = list_tools()
    if args.kind:
        tools = [t for t in tools if t["kind"] == args.kind]
    if args.json:
        emit_json(tools)
        return 0
    from rich.table import Table

    table = Table(show_edge=False, header_style="bold")
    for col in ("name", "kind", "description", "source"):
        table.add_column(col, overflow="fold")
    for t in tools:
        desc = t["description"] + (
            f" (options: {', '.join('--' + o.replace('_', '-') for o in t['options'])})" if t["options"] else ""
        )
        src = t["source"] + (f" {t['version']}" if t.get("version") else "")
        table.add_row(t["name"], t["kind"], desc, src)
    out.print(table)
    return 0


def register(commands) -> None:
    sp = commands.add("tools", cmd_tools)
    sp.add_argument("--kind", choices=("importer", "exporter", "analysis"), help="only tools of this kind")
