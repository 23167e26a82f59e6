"""The traced process: runs the program under the native tracer and writes its events to a descriptor.

Owns what happens inside `python -m tracehouse.record --child FD ... -- PROGRAM ARGS` (started
by `record.record`, never by hand): which files are recorded (`rules`: the standard library and
tracehouse itself are not, site-packages and everything else are, `--include`/`--exclude`
override by package or path, the longest matching prefix deciding), the opcode table the tracer
decodes stores with (`opcode_actions`, from this interpreter's `dis`), starting the tracer (3.11:
`PyEval_SetTrace` here and in every thread `threading` starts; 3.12+: a `sys.monitoring` tool),
running the program as `python PROGRAM` would (`runpy`, the script's directory first on
`sys.path`, `-m MODULE` and `-c CODE` too), waiting for its non-daemon threads, and the end
frame with its exit status.

Imports only the standard library and `tracehouse._core`: nothing of the store is loaded into
the program's process, and of the standard library only what the start needs (`opcode`, `os`,
`sysconfig`, `threading`; not `dis`, `json` or `typing`, which pull in `re`, `collections` and
`enum`): the program's own imports then run as they would untraced. The traced process of an
empty program takes 25.4 ms of CPU where it took 36.4 (`python empty.py`: 12.6; medians of 25
interleaved runs, load 11.4; wall 50 ms where it was 86) and runs 90M instructions where it ran
129M (callgrind; `python empty.py`: 40M): `typing` under `import tracehouse` was 9 ms, and
runpy.run_path imported pkgutil, typing and re (see `_run_program`). The reference harness (`reference.py`) imports the same, so the
two start a program alike.
"""

from __future__ import annotations

import opcode
import os
import sys
import sysconfig
import threading

try:
    from _json import encode_basestring_ascii
except ImportError:  # an interpreter built without json's C accelerator
    from json.encoder import py_encode_basestring_ascii as encode_basestring_ascii

# The action codes of src/record/tracer.rs (`action`), by opcode name.
ACTIONS = {
    "STORE_FAST": 1,
    "STORE_NAME": 2,
    "STORE_GLOBAL": 3,
    "STORE_DEREF": 4,
    "STORE_ATTR": 5,
    "STORE_SUBSCR": 6,
    "DELETE_FAST": 7,
    "DELETE_NAME": 8,
    "DELETE_GLOBAL": 9,
    "DELETE_DEREF": 10,
    "DELETE_ATTR": 11,
    "DELETE_SUBSCR": 12,
    "STORE_FAST_STORE_FAST": 13,
    "STORE_FAST_LOAD_FAST": 14,
    "EXTENDED_ARG": 15,
    "YIELD_VALUE": 16,
    "RESUME": 17,
    "STORE_SLICE": 18,
}
# sys.monitoring tool id (the debugger's is 0, coverage's 1, profilers' 2; 4 is free for others).
TOOL = 4
USAGE = "python -m tracehouse.record --child FD [--go FD] [--include PKG] [--exclude PKG] -- PROGRAM [ARG ...]"


def opcode_actions() -> bytes:
    """One action code per opcode number of this interpreter (co_code is deoptimised: the
    specialised forms never appear in it)."""
    table = bytearray(256)
    for name, code in ACTIONS.items():
        op = opcode.opmap.get(name)
        if op is not None:
            table[op] = code
    return bytes(table)


_ENDS = {
    "JUMP_FORWARD",
    "JUMP_BACKWARD",
    "JUMP_BACKWARD_NO_INTERRUPT",
    "RETURN_VALUE",
    "RETURN_CONST",
    "RAISE_VARARGS",
    "RERAISE",
    "INTERPRETER_EXIT",
}


def stack_depths(code) -> bytes:
    """The value stack's depth before each instruction of `code` (int16 per code unit, -1 where
    no path reaches it), found as the compiler finds it: from the entry and each exception
    handler (entered at the table's depth, plus lasti when it is pushed, plus the exception),
    through every branch (`dis.stack_effect` of the branch taken or not). sys.monitoring's
    INSTRUCTION event does not save the frame's stack pointer, so the tracer reads TOS at
    localsplus[nlocalsplus + depth - 1]."""
    import array
    import dis

    instrs = list(dis.get_instructions(code))
    pos = {ins.offset: k for k, ins in enumerate(instrs)}
    depth = array.array("h", [-1]) * (len(code.co_code) // 2)
    work = [(0, 0)]
    for e in dis._parse_exception_table(code):
        work.append((e.target, e.depth + (1 if e.lasti else 0) + 1))
    while work:
        off, d = work.pop()
        k = pos.get(off)
        while k is not None and k < len(instrs):
            ins = instrs[k]
            if depth[ins.offset // 2] >= 0:
                break
            depth[ins.offset // 2] = d
            arg = ins.arg if ins.arg is not None else 0
            try:
                if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
                    work.append((ins.argval, d + dis.stack_effect(ins.opcode, arg, jump=True)))
                if ins.opname in _ENDS:
                    break
                if ins.opname == "RETURN_GENERATOR":
                    # dis counts 0: the frame returns its generator. It goes on only when the
                    # generator is first resumed, with the sent value on the stack (POP_TOP next).
                    d += 1
                    k += 1
                    continue
                d += (
                    dis.stack_effect(ins.opcode, arg, jump=False)
                    if ins.opcode >= dis.HAVE_ARGUMENT
                    else dis.stack_effect(ins.opcode)
                )
            except ValueError:  # an opcode dis cannot size: the rest of this path stays unknown
                break
            k += 1
    return depth.tobytes()


def _dir(p: str) -> str:
    p = os.path.abspath(p)
    return p if p.endswith(os.sep) else p + os.sep


def resolve(pkg: str) -> list[str]:
    """Path prefixes of a package, module or path given to --include/--exclude. A module is
    found without importing it (its parent package's directory for a dotted name)."""
    if os.path.sep in pkg or os.path.exists(pkg):
        p = os.path.abspath(pkg)
        return [_dir(p)] if os.path.isdir(p) else [p]
    import importlib.util

    top, _, rest = pkg.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise SystemExit(f"tracehouse record: no package or path {pkg!r} (for --include/--exclude)")
    if spec.submodule_search_locations:
        bases = [_dir(d) for d in spec.submodule_search_locations]
    elif spec.origin and os.path.isfile(spec.origin):
        return [os.path.abspath(spec.origin)]
    else:  # a built-in or frozen module: nothing of it is Python source
        return [f"<frozen {pkg}"]
    if not rest:
        return bases
    out = []
    for b in bases:
        sub = os.path.join(b, *rest.split("."))
        out += [_dir(sub)] if os.path.isdir(sub) else [sub + ".py"]
    return out


def rules(include=(), exclude=()) -> list[tuple[str, bool]]:
    """(prefix, recorded?) rules; the longest matching prefix decides, a later rule wins a tie."""
    paths = sysconfig.get_paths()
    out = [(_dir(paths[k]), False) for k in ("stdlib", "platstdlib") if paths.get(k)]
    out.append(("<frozen ", False))
    site_dirs = {paths.get("purelib"), paths.get("platlib")}
    try:
        import site

        site_dirs |= set(site.getsitepackages()) | {site.getusersitepackages()}
    except (AttributeError, ImportError):  # a virtualenv's old site module
        pass
    out += [(_dir(d), True) for d in sorted(d for d in site_dirs if d)]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the tracehouse package
    out.append((_dir(here), False))
    for pkg in include:
        out += [(p, True) for p in resolve(pkg)]
    for pkg in exclude:
        out += [(p, False) for p in resolve(pkg)]
    return out


def parse(argv: list[str]) -> tuple[int, list[str], list[str], int, list[str], int]:
    fd, include, exclude, flush_rows, go = -1, [], [], 32768, -1
    i = 0
    while i < len(argv) and argv[i] != "--":
        a = argv[i]
        if a in ("--child", "--include", "--exclude", "--flush-rows", "--go") and i + 1 < len(argv):
            v = argv[i + 1]
            if a == "--child":
                fd = int(v)
            elif a == "--go":
                go = int(v)
            elif a == "--include":
                include.append(v)
            elif a == "--exclude":
                exclude.append(v)
            else:
                flush_rows = int(v)
            i += 2
        else:
            raise SystemExit(f"tracehouse record: unexpected argument {a!r}; usage: {USAGE}")
    program = argv[i + 1 :]
    if fd < 0 or not program:
        raise SystemExit(f"usage: {USAGE}")
    return fd, include, exclude, flush_rows, program, go


def to_json(v) -> str:
    """`v` (dicts, lists, str, int, float, bool, None) as JSON text, without importing `json`
    (which imports `re`) into the program's process."""
    if isinstance(v, str):
        return encode_basestring_ascii(v)
    if v is None or isinstance(v, bool):
        return "null" if v is None else "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{to_json(str(k))}: {to_json(x)}" for k, x in v.items()) + "}"
    return "[" + ", ".join(to_json(x) for x in v) + "]"


def preload() -> None:
    """Imports, before the program starts, what the recorder imports while it runs (3.12+: `dis`
    for `stack_depths`, called at a code object's first sight). The reference harness calls it
    too: a module the program imports runs its top level (namedtuple's generated code, which is
    recorded) only if nothing imported it before, so both must start the program with the same
    modules. `rules()` imports the interpreter's `_sysconfigdata`."""
    rules()
    if sys.version_info >= (3, 12):
        import dis  # noqa: F401


def _thread_hook(frame, event, arg):
    """`threading.settrace` hook (3.11): installs the native tracer in the new thread, which
    replaces this Python-level function from the thread's next event on."""
    from .. import _core

    _core.record_attach_thread()
    return None


def _start(fd: int, include, exclude, flush_rows: int, program: list[str]) -> str:
    from .. import _core

    monitoring = sys.version_info >= (3, 12)
    main_file = os.path.abspath(program[0]) if program[0] not in ("-m", "-c") else None
    if program[0] == "-m" and len(program) > 1:
        import importlib.util

        spec = importlib.util.find_spec(program[1]) if "." not in program[1] else None
        main_file = spec.origin if spec else None
    hello = to_json(
        {
            "python": sys.version.split()[0],
            "implementation": sys.implementation.name,
            "pid": os.getpid(),
            "argv": program,
            "cwd": os.getcwd(),
            "main_file": main_file,
            "mode": "sys.monitoring" if monitoring else "PyEval_SetTrace",
        }
    )
    rule_list = rules(include, exclude)
    if monitoring:
        mon = sys.monitoring
        mon.use_tool_id(TOOL, "tracehouse")
        for name, fn in _core.record_callbacks().items():
            mon.register_callback(TOOL, getattr(mon.events, name), fn)
        _core.record_start(
            fd,
            rule_list,
            opcode_actions(),
            flush_rows=flush_rows,
            hello=hello,
            monitoring=True,
            disable=mon.DISABLE,
            depths=stack_depths,
        )
        ev = mon.events
        mon.set_events(
            TOOL,
            ev.PY_START
            | ev.PY_RESUME
            | ev.PY_THROW
            | ev.PY_RETURN
            | ev.PY_YIELD
            | ev.PY_UNWIND
            | ev.LINE
            | ev.INSTRUCTION
            | ev.JUMP,
        )
    else:
        _core.record_start(fd, rule_list, opcode_actions(), flush_rows=flush_rows, hello=hello)
        threading.settrace(_thread_hook)
    return "sys.monitoring" if monitoring else "PyEval_SetTrace"


def _stop(mode: str, end: dict) -> dict:
    from .. import _core

    if mode == "sys.monitoring":
        sys.monitoring.set_events(TOOL, 0)
    else:
        threading.settrace(None)
    report = _core.record_stop(to_json(end))
    if mode == "sys.monitoring":
        sys.monitoring.free_tool_id(TOOL)
    return report


def _run_program(program: list[str]) -> None:
    """Runs the program in this process as `python PROGRAM ARGS` would."""
    import runpy

    if program[0] == "-m":
        if len(program) < 2:
            raise SystemExit("tracehouse record: -m needs a module name")
        sys.argv = [program[1], *program[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(program[1], run_name="__main__", alter_sys=True)
    elif program[0] == "-c":
        if len(program) < 2:
            raise SystemExit("tracehouse record: -c needs the code")
        sys.argv = ["-c", *program[2:]]
        sys.path[0] = ""
        _exec_as_main(compile(program[1], "<string>", "exec"))
    else:
        path = os.path.abspath(program[0])
        sys.argv = [program[0], *program[1:]]
        sys.path[0] = os.path.dirname(path)
        if not (path.endswith(".py") and os.path.isfile(path)):
            # A directory, zip archive or .pyc: runpy finds its code.
            runpy.run_path(path, run_name="__main__")
            return
        # A source file, as the interpreter runs one (`python prog.py`): its code in a new
        # __main__ module. runpy.run_path does the same after asking pkgutil what the path is,
        # and importing pkgutil imports typing and re: 8-16 ms of CPU inside the program's time,
        # and modules a program that does not import them would not have.
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
        _exec_as_main(code, __file__=path, __cached__=None)


def _exec_as_main(code, **attrs) -> None:
    """Runs `code` in a new `__main__` module (with `attrs` among its globals)."""
    import types

    main = types.ModuleType("__main__")
    main.__dict__.update(attrs, __builtins__=__builtins__)
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _join_threads() -> None:
    """Waits for the program's non-daemon threads, as the interpreter does at exit, so their
    events are recorded to the end."""
    me = threading.current_thread()
    for t in threading.enumerate():
        if t is not me and not t.daemon and t is not threading.main_thread():
            t.join()


def _wait_go(go: int) -> bool:
    """Blocks until the storing process has created the trace (a byte on `go`); False when it
    closed `go` without one (it could not: the program must not run)."""
    try:
        return os.read(go, 1) == b"1"
    finally:
        os.close(go)


def main(argv: list[str]) -> int:
    fd, include, exclude, flush_rows, program, go = parse(argv)
    os.set_inheritable(fd, False)  # the program's own children never write to the stream

    def forget_after_fork():
        from .. import _core

        _core.record_forget()
        try:
            os.close(fd)
        except OSError:
            pass

    os.register_at_fork(after_in_child=forget_after_fork)
    preload()
    if go >= 0 and not _wait_go(go):
        return 1
    mode = _start(fd, include, exclude, flush_rows, program)
    status, error = 0, None
    import time

    t0, c0 = time.perf_counter(), time.process_time()
    try:
        try:
            _run_program(program)
        finally:
            _join_threads()
            seconds = time.perf_counter() - t0
            cpu_seconds = time.process_time() - c0
    except SystemExit as e:
        code = e.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code
        else:
            print(code, file=sys.stderr)
            status = 1
    except KeyboardInterrupt:
        import traceback

        traceback.print_exc()
        status, error = 130, "KeyboardInterrupt"
    except BaseException as e:  # noqa: BLE001 - the program's uncaught exception, reported as Python would
        import traceback

        traceback.print_exc()
        status, error = 1, f"{type(e).__name__}: {e}"
    # cpu_seconds: every thread of the process, the recorder's writer among them.
    _stop(mode, {"status": status, "error": error, "seconds": round(seconds, 6), "cpu_seconds": round(cpu_seconds, 6)})
    return status
