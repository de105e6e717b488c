"""The package layering of mqstore, read from the source (``ast``, nothing imported).

* The store core (the top-level modules, ``commitlog``, ``consumequeue``, ``index``,
  ``ha``) never imports the broker, the client or the tools, at any depth: a broker
  or a client is built on the store, never the other way round.
* No import cycle between the packages at module level: each subpackage of
  ``mqstore`` and each top-level module is one node, a module-level import (outside
  ``if TYPE_CHECKING:``) of another node is an edge, and the graph has no cycle. A
  name imported from the ``mqstore`` package itself is an edge to its ``__init__``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

import mqstore

ROOT = Path(mqstore.__file__).parent
CORE_PACKAGES = ("commitlog", "consumequeue", "index", "ha")
NOT_FOR_THE_CORE = ("mqstore.broker", "mqstore.client", "mqstore.tools")


def _sources() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    out: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(("mqstore", *parts))] = path
    tools = ROOT / "tools"
    if not tools.is_dir():  # an editable install maps mqstore.tools elsewhere
        import mqstore.tools

        for path in sorted(Path(mqstore.tools.__file__).parent.rglob("*.py")):
            rel = path.relative_to(Path(mqstore.tools.__file__).parent).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(("mqstore", "tools", *parts))] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _names(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif node.module and node.level == 0:
        yield node.module
        yield from (f"{node.module}.{alias.name}" for alias in node.names)


def all_imports(source: str) -> set[str]:
    """Every module an import statement anywhere in ``source`` names."""
    return {
        name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in _names(node)
    }


def module_level_imports(source: str) -> set[str]:
    """What ``source`` imports when it is imported: statements at module level,
    inside ``if``/``try`` blocks too, but not under ``if TYPE_CHECKING:`` nor in
    functions or classes."""
    found: set[str] = set()

    def visit(stmts: Iterable[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.update(_names(node))
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(ast.parse(source).body)
    return found


def node_of(module: str, modules: Iterable[str]) -> str | None:
    """The layer a module name belongs to: its subpackage or top-level module of
    mqstore (``__init__`` for a name defined by the package itself); None outside."""
    parts = module.split(".")
    if parts[0] != "mqstore" or len(parts) == 1:
        return None
    known = set(modules)
    if f"mqstore.{parts[1]}" in known:
        return parts[1]
    return "__init__"


def package_graph(sources: dict[str, Path]) -> dict[str, set[str]]:
    """Layer -> the layers its modules import at module level."""
    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        src = node_of(name, sources) if name != "mqstore" else "__init__"
        assert src is not None
        for imported in module_level_imports(path.read_text(encoding="utf-8")):
            dst = node_of(imported, sources)
            if dst is not None and dst != src:
                graph.setdefault(src, set()).add(dst)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def module_graph(sources: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules it imports anywhere: at module level, under
    ``if TYPE_CHECKING:`` and inside functions (a lazy import is still a dependency a
    reader has to follow). ``from p import x`` is an edge to ``p.x`` when that is a
    module, else to ``p`` (the package's ``__init__`` that a submodule import runs is
    Python's mechanics, not a dependency)."""

    def owner(name: str) -> str:
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = {owner(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in sources
                    else owner(node.module)
                    for a in node.names
                }  # fmt: skip
            else:
                continue
            graph.setdefault(name, set()).update(t for t in targets if t and t != name)
    return graph


def _core(sources: dict[str, Path]) -> dict[str, Path]:
    """The package's ``__init__``, its top-level modules and the core subpackages."""
    return {
        name: path
        for name, path in sources.items()
        if path.parent == ROOT or name.split(".")[1] in CORE_PACKAGES
    }


def test_the_store_core_never_imports_broker_client_or_tools() -> None:
    sources = _sources()
    core = _core(sources)
    assert "mqstore.message_store" in core and "mqstore.commitlog.commitlog" in core
    offending = sorted(
        f"{name} imports {imported}"
        for name, path in core.items()
        for imported in all_imports(path.read_text(encoding="utf-8"))
        if any(imported == b or imported.startswith(b + ".") for b in NOT_FOR_THE_CORE)
    )
    assert offending == []


SERVER_SIDES = {
    # each end of the remoting protocol imports remoting's shared values, never the
    # other ends (a broker registers through the client's registrar; the name server
    # is handed the ACL as a RequestGate)
    "namesrv": ("mqstore.broker", "mqstore.client"),
    "broker": ("mqstore.client", "mqstore.namesrv"),
    "client": ("mqstore.broker", "mqstore.namesrv"),
}


@pytest.mark.parametrize("package", sorted(SERVER_SIDES))
def test_the_protocol_ends_import_remoting_not_each_other(package: str) -> None:
    forbidden = SERVER_SIDES[package]
    offending = sorted(
        f"{name} imports {imported}"
        for name, path in _sources().items()
        if name.split(".")[1:2] == [package]
        for imported in all_imports(path.read_text(encoding="utf-8"))
        if any(imported == f or imported.startswith(f + ".") for f in forbidden)
    )
    assert offending == []


SERVERS = ("mqstore.broker", "mqstore.pop", "mqstore.grpc")
"""What serves a store to clients: typed against :class:`mqstore.store_view.StoreView`."""


def store_class_imports(source: str) -> set[str]:
    """The imports in ``source`` that name the store class or its module."""
    return {
        m
        for m in all_imports(source)
        if m in ("mqstore.message_store", "mqstore.MessageStore")
        or m.startswith("mqstore.message_store.")
    }


def test_the_servers_see_the_store_through_its_view() -> None:
    """The broker, POP and gRPC are typed against the narrow ``StoreView`` protocol,
    never the ``MessageStore`` class: mypy then rejects a server's use of anything
    the view does not list (a part of the store included), and checks that the store
    satisfies the view wherever one is handed to a broker."""
    importers = {
        name: found
        for name, path in _sources().items()
        if name.startswith(SERVERS) and (found := store_class_imports(path.read_text()))
    }
    assert importers == {}


def test_an_import_of_the_store_class_is_found() -> None:
    src = "from mqstore.message_store import MessageStore\nfrom mqstore import MessageStore\n"
    assert store_class_imports(src) == {
        "mqstore.message_store", "mqstore.message_store.MessageStore", "mqstore.MessageStore",
    }  # fmt: skip


def test_no_import_cycle_between_packages() -> None:
    graph = package_graph(_sources())
    assert {"broker", "client", "remoting", "consumequeue"} <= set(graph)
    assert cycles(graph) == []


def test_no_module_circle_counting_type_checking_and_lazy_imports() -> None:
    graph = module_graph(_sources())
    assert "mqstore.tools.spark.reader" in graph
    assert cycles(graph) == []


RULE_NAMES = ("TRANSACTION_NOT_TYPE", "TRANSACTION_COMMIT_TYPE", "TRANSACTION_PREPARED_TYPE",
              "TRANSACTION_ROLLBACK_TYPE", '"SCHEDULE_TOPIC_XXXX"')  # fmt: skip
STATE_RULE_FACTS = {
    "mqstore.commitlog._layout",  # the constants
    "mqstore.commitlog.format",  # their re-export
    "mqstore.system_topics",  # the schedule topic's name
    "mqstore.commitlog.dispatch_rule",  # the rule
    "mqstore.tools.spark.headercheck",  # header fields per transaction type (not the rule)
    "mqstore.transaction",  # sets the types of the records it writes (not the rule)
}


def test_the_dispatch_rule_is_stated_in_one_module() -> None:
    naming = {
        name
        for name, path in _sources().items()
        if any(n in path.read_text(encoding="utf-8") for n in RULE_NAMES)
    }
    assert "mqstore.commitlog.dispatch_rule" in naming
    assert naming <= STATE_RULE_FACTS


# ------------------------------------------------------------ one walk over the log

CURSOR = "mqstore.commitlog.cursor"
STEPPERS_LEFT: set[str] = set()
"""Modules besides the cursor that still step from CommitLog record to record themselves
(can only shrink: it is empty, and every reader of the log goes through the cursor)."""
BODY_WALKERS = {
    "mqstore.commitlog._decode",  # decode_all: the records of one pull response body
    "mqstore.client.wire",  # the client's side of the same body
}
"""Not walkers of the log: the records of a pull response body lie back to back in a
message sent over the wire, with no segments, blanks, or damage to resync past (a body
that does not decode is refused whole), so the cursor's rules have nothing to say there."""
SCANNERS = frozenset(("scan", "exact_scan", "scan_one", "decode"))
RECORD_MAGIC = (b"\xda\xa3\x20", rb"\xda\xa3\x20")
"""The MAGICCODE's first bytes, as bytes and as a regular expression's text."""


def _called_name(call: ast.expr) -> str | None:
    if isinstance(call, ast.Call):
        if isinstance(call.func, ast.Name):
            return call.func.id
        if isinstance(call.func, ast.Attribute):
            return call.func.attr
    return None


def record_steps(source: str) -> int:
    """Places that step past a record by the size a codec call gave it: ``+ r.size``
    or ``+= r.size``, ``r`` assigned (in the same function) from a call of ``scan``,
    ``decode`` or the like."""
    count = 0
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        results = {
            t.id
            for node in ast.walk(fn)
            if isinstance(node, ast.Assign) and _called_name(node.value) in SCANNERS
            for t in node.targets
            if isinstance(t, ast.Name)
        }

        def is_size(e: ast.expr, results: set[str] = results) -> bool:
            return (
                isinstance(e, ast.Attribute)
                and e.attr == "size"
                and isinstance(e.value, ast.Name)
                and e.value.id in results
            )

        for node in ast.walk(fn):
            if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
                count += is_size(node.value)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                count += is_size(node.left) or is_size(node.right)
    return count


def test_only_the_cursor_and_the_listed_walkers_step_from_record_to_record() -> None:
    stepping = {
        name for name, path in _sources().items() if record_steps(path.read_text(encoding="utf-8"))
    }
    assert stepping <= STEPPERS_LEFT | BODY_WALKERS | {CURSOR}


def test_only_the_cursor_searches_for_a_record_after_damage() -> None:
    """One resync: the record MAGICCODE is searched for in the cursor only, and every
    other function named ``resync`` hands over to the cursor's."""
    searching, own_resyncs = set(), set()
    for name, path in _sources().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            constant = node.value if isinstance(node, ast.Constant) else None
            if isinstance(constant, bytes) and any(m in constant for m in RECORD_MAGIC):
                searching.add(name)
            if isinstance(node, ast.FunctionDef) and node.name == "resync" and name != CURSOR:
                calls = {_called_name(c) for c in ast.walk(node) if isinstance(c, ast.Call)}
                if "resync" not in calls:
                    own_resyncs.add(name)
    assert searching == {CURSOR}
    assert own_resyncs == set()


BULK_SCANS = frozenset(("scan", "scan_plain"))
"""The bulk scanner's entry points (:mod:`mqstore.commitlog.bulk`): the cursor's backend."""


def bulk_scan_calls(source: str) -> int:
    """Calls of ``bulk.scan(...)`` or ``bulk.scan_plain(...)`` in ``source``."""
    return sum(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in BULK_SCANS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "bulk"
        for node in ast.walk(ast.parse(source))
    )


def test_the_spark_jobs_read_the_log_through_the_cursor() -> None:
    """The audit, reindex, export and the live cut's tail walk read records through
    the cursor (its bulk backend behind it), never the bulk scanner beside it."""
    beside = {
        name
        for name, path in _sources().items()
        if name.startswith("mqstore.tools.spark.")
        and bulk_scan_calls(path.read_text(encoding="utf-8"))
    }
    assert beside == set()


def test_a_bulk_scan_beside_the_cursor_is_found() -> None:
    source = "def walk(buf):\n    return bulk.scan(buf, 0, len(buf)).records\n"
    assert bulk_scan_calls(source) == 1
    assert bulk_scan_calls("def f(x):\n    return fmt.scan(x, 0)\n") == 0


def test_a_step_by_the_scanned_size_is_found() -> None:
    source = (
        "def walk(buf):\n    pos = 0\n    while True:\n"
        "        r = fmt.scan(buf, pos)\n        pos += r.size\n"
    )
    assert record_steps(source) == 1
    assert record_steps("def f(r):\n    return r.size + 1\n") == 0


# ------------------------------------------------------------ the checks themselves


def test_an_import_inside_a_function_counts_for_the_core_but_not_for_cycles() -> None:
    source = "def f():\n    from mqstore.broker.core import BrokerCore\n"
    assert "mqstore.broker.core" in all_imports(source)
    assert module_level_imports(source) == set()


def test_a_type_checking_import_back_closes_a_module_circle() -> None:
    sources = {"mqstore.a": Path("a.py"), "mqstore.b": Path("b.py")}
    graph = {"mqstore.a": {"mqstore.b"}, "mqstore.b": {"mqstore.a"}}
    assert cycles(graph) == [sorted(sources)]


def test_type_checking_imports_are_not_module_level() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from mqstore.client import wire\n"
        "else:\n    import mqstore.remoting.codes\n"
        "try:\n    import mqstore.index.file\nexcept ImportError:\n    pass\n"
    )
    found = module_level_imports(source)
    assert "mqstore.client.wire" not in found
    assert {"mqstore.remoting.codes", "mqstore.index.file"} <= found


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": {"c"}, "d": {"a", "c"}}, []),
        ({"x": {"y"}, "y": {"x"}, "p": {"q"}, "q": {"p"}}, [["p", "q"], ["x", "y"]]),
    ],
)
def test_the_cycle_finder(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


def test_layers_are_subpackages_and_top_level_modules() -> None:
    modules = ["mqstore.broker", "mqstore.broker.core", "mqstore.config"]
    assert node_of("mqstore.broker.core.BrokerCore", modules) == "broker"
    assert node_of("mqstore.config", modules) == "config"
    assert node_of("mqstore.MessageStore", modules) == "__init__"
    assert node_of("json", modules) is None


COMPONENTS = frozenset({
    "writer", "segments", "commitlog", "checkpoint", "logics", "flusher", "disk_guard",
    "queues", "index", "reput", "dispatcher", "ha",
})  # fmt: skip
"""The parts :class:`~mqstore.message_store.MessageStore` is composed of."""
WHITE_BOX = (
    "mqstore.message_store",
    "mqstore._lifecycle",
    "mqstore.tools.bench.putpath",
    "mqstore.tools.bench.queues",
    "mqstore.tools.bench.timers",
)
"""Where reading them is the point: the composition root and the lifecycle that built
them, and the micro-benchmarks that time or count one part at a time (``bench putpath``
times the framer and the append separately, ``bench queues`` counts the queues the close
syncs, ``bench timers`` waits for the timer service's enqueued count)."""


def component_reads(source: str) -> list[str]:
    """``store.<part>`` and ``<x>.store.<part>`` (or ``_store``) reads of a MessageStore part in
    ``source`` (by name: a variable or attribute called ``store`` holds one)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in COMPONENTS:
            v = node.value
            if (isinstance(v, ast.Name) and v.id in ("store", "_store")) or (
                isinstance(v, ast.Attribute) and v.attr in ("store", "_store")
            ):
                found.append((node.lineno, f"{ast.unparse(node)} (line {node.lineno})"))
    return [text for _line, text in sorted(found)]


def test_no_package_reaches_into_the_stores_parts() -> None:
    """The broker, POP, gRPC, the client and the tools see a store through its own
    methods (``queue_ids``, ``record_bytes``, ``stored_message_at``, ...), never
    through the parts it is built from: those can be rebuilt without them noticing."""
    reads = {
        name: found
        for name, path in _sources().items()
        if not name.startswith(WHITE_BOX) and (found := component_reads(path.read_text()))
    }
    assert reads == {}


def test_a_read_through_a_part_is_found() -> None:
    assert component_reads("core.store.queues.drop_topic(t)\nstore.flusher.syncs") == [
        "core.store.queues (line 1)", "store.flusher (line 2)",
    ]  # fmt: skip


MUTABLE_CALLS = frozenset({
    "dict", "list", "set", "Counter", "count", "defaultdict", "deque", "OrderedDict",
    "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "Lock", "RLock", "Event", "local",
})  # fmt: skip
MUTATORS = frozenset({
    "append", "add", "update", "pop", "popitem", "setdefault", "clear", "extend", "insert",
    "remove", "discard",
})  # fmt: skip
SHARED_ON_PURPOSE = {"mqstore.faults": {"_hooks", "_lock"}}
"""The fault-injection registry: engine code passes its named points without a handle,
and only tests register hooks (empty in production)."""


def module_state(source: str) -> set[str]:
    """Names bound at module level to something mutable that the module can change: a
    container, lock or counter under a lower-case name, or a constant-looking
    (upper-case) container the module mutates (``X[k] = v``, ``X.append(...)``)."""
    tree = ast.parse(source)
    bound: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs = [(node.target, node.value)]
        else:
            continue
        bound.update((t.id, v) for t, v in pairs if isinstance(t, ast.Name))
    mutated = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            mutated |= {t.value.id for t in targets
                        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)}  # fmt: skip
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in MUTATORS
            and isinstance(node.value, ast.Name)
        ):
            mutated.add(node.value.id)
    found = set()
    for name, value in bound.items():
        if name.startswith("__"):
            continue
        container = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp,
                                       ast.SetComp))  # fmt: skip
        if isinstance(value, ast.Call):
            f = value.func
            container |= (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in (
                MUTABLE_CALLS
            )
        if container and (not name.isupper() or name in mutated):
            found.add(name)
    return found


def test_no_module_holds_mutable_state() -> None:
    """State belongs to an object that owns it (a store, a transport, a client), so two
    of them in one process never share it and tests never leak it into each other."""
    state = {
        name: found
        for name, path in _sources().items()
        if (found := module_state(path.read_text()) - SHARED_ON_PURPOSE.get(name, set()))
    }
    assert state == {}


def test_module_state_is_found() -> None:
    src = "_seen = {}\nTABLE = {}\nCACHE = {}\nCOUNTER = itertools.count()\nCACHE['k'] = 1\n"
    assert module_state(src) == {"_seen", "CACHE"}


# ------------------------------------------------------------------ who sets what

OWN = ("self", "cls")


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``scope`` outside the functions and classes nested in it (their
    ``def``/``class`` nodes included)."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _made_here(scope: ast.AST) -> set[str]:
    """Names ``scope`` binds to an object it makes and so owns: a constructor's result
    (a capitalised callee, ``cls(...)``), a function it defines, or a part of one of
    those (``sp = out.system_properties``)."""
    nodes = list(_scope_nodes(scope))
    owned = {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    grew = True
    while grew:
        grew = False
        for n in nodes:
            if not (isinstance(n, ast.Assign) and len(n.targets) == 1):
                continue
            target, value = n.targets[0], n.value
            if not isinstance(target, ast.Name) or target.id in owned:
                continue
            if isinstance(value, ast.Call):
                f = value.func
                callee = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                made = callee[:1].isupper() or callee == "cls"
            else:
                root = _root(value) if isinstance(value, (ast.Attribute, ast.Subscript)) else None
                made = isinstance(root, ast.Name) and root.id in owned
            if made:
                owned.add(target.id)
                grew = True
    return owned


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        todo = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        todo = [node.target]
    else:
        return
    while todo:
        t = todo.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            todo.extend(t.elts)
        elif isinstance(t, ast.Starred):
            todo.append(t.value)
        else:
            yield t


@pytest.fixture(scope="module")
def trees() -> dict[str, ast.Module]:
    """Every module parsed, once for the tests of this file that walk them all (and let
    go of after them: the trees of the whole package weigh tens of megabytes)."""
    return {name: ast.parse(path.read_text()) for name, path in _sources().items()}


def foreign_writes(source: str | ast.Module) -> set[str]:
    """Attribute assignments in ``source`` to an object the code does not own: anything
    but ``self.x = ...`` (``cls.x``) and an object the same function made
    (:func:`_made_here`). ``self.part.x = ...`` counts: that is wiring a part after it
    was built, where a constructor argument or a method with a contract belongs."""
    found: set[str] = set()

    def scan(scope: ast.AST, inherited: set[str]) -> None:
        owned = inherited | _made_here(scope)
        for node in _scope_nodes(scope):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                scan(node, owned)
                continue
            for t in _targets(node):
                if not isinstance(t, ast.Attribute):
                    continue
                if isinstance(t.value, ast.Name) and t.value.id in OWN:
                    continue
                root = _root(t)
                if isinstance(root, ast.Name) and root.id in owned and root.id not in OWN:
                    continue
                found.add(ast.unparse(t))

    scan(ast.parse(source) if isinstance(source, str) else source, set())
    return found


FOREIGN_WRITES_LEFT: dict[str, set[str]] = {
    # The dispatcher process's watcher copies the child's checkpoint times.
    "mqstore.consumequeue.watch": {"cp.logics_msg_timestamp", "cp.index_msg_timestamp"},
    # Mapped-file positions, moved by the log that writes the file (Segments' files).
    "mqstore.commitlog.commitlog": {"mf.wrote_position", "mf.last_store_timestamp"},
    "mqstore.commitlog.recovery": {"segments.flushed_where", "searched.bytes"},
    "mqstore.commitlog.bulk": {"out.bad_at"},
    "mqstore.consumequeue.queue": {"mf.wrote_position", "mf.flushed_position",
                                   "self.segments.flushed_where", "segs.flushed_where"},
    "mqstore.consumequeue.mappings": {"mf.used_at"},
    "mqstore.consumequeue.store": {"cq.min_logic_offset"},
    "mqstore.consumequeue.dispatch_batch": {"queues.logics_msg_timestamp"},
    "mqstore.commitlog.flush": {"req.gone", "r.status", "prev.successor"},
    # The broker, the client and the tools: per-request and per-queue records.
    "mqstore.broker.admin_tables": {"core.config"},
    "mqstore.broker.consumers": {"info.data"},
    "mqstore.broker.inprocess": {"self.group_listeners.catch_all"},
    "mqstore.broker.pop_polling": {"w.done"},
    "mqstore.broker.transactions": {"scan.op_end"},
    "mqstore.client.consume_orderly": {"pq.locked", "pq.last_lock_timestamp"},
    "mqstore.client.consumer_base": {"rebalance.on_changed"},
    "mqstore.client.lite_pull_consumer": {"old.dropped", "current.dropped", "pq.dropped"},
    "mqstore.client.pull_service": {"task.inflight", "task.next_offset", "task.locked_first",
                                    "pq.last_pull_timestamp", "pq.dropped"},
    "mqstore.client.rebalance": {"pq.dropped"},
    "mqstore.client.remote": {"self.group_listeners.catch_all"},
    "mqstore.client.remoting_client": {"conn.handler"},
    "mqstore.grpc.service": {"b.endpoints.scheme", "entry.message_id", "entry.transaction_id",
                             "entry.offset"},
    "mqstore.grpc.settings": {"bp.max_attempts", "bp.exponential_backoff.multiplier",
                              "sub.receive_batch_size", "sub.fifo"},
    "mqstore.namesrv.routes": {"broker.cluster"},
    "mqstore.pop.inflight": {"p.ck_offset"},
    "mqstore.pop.service": {"self.reviver.dead", "info.pop_time", "info.invisible_time"},
    "mqstore.tools._pageloss": {"report.kept", "report.dropped", "report.torn"},
    "mqstore.tools.admin": {"args.group"},
    "mqstore.tools.bench._flush_durability": {"lg.propagate"},
    "mqstore.tools.bench._harness": {"deadline.ns"},
    "mqstore.tools.bench._references": {"gc.stopped"},
    "mqstore.tools.cli": {"args.access"},
    "mqstore.tools.lazyfs": {"node.durable_size", "node.entries",
                             "self.nodes[ident].durable_size"},
    "mqstore.tools.logcheck": {"log.start", "log.end"},
    "mqstore.tools.powerloss": {"report.durable_end", "report.reason", "report.abort_lost"},
    "mqstore.tools.spark.audit": {"result.strict"},
}  # fmt: skip
"""Attribute writes to objects the writing module does not own that are still there.
The list may only shrink: a new entry needs a reason a constructor argument or a method
cannot serve. The composition root (``message_store``, ``_lifecycle``, ``_parts``,
``logics``) is not on it: it wires its parts through constructors and methods only
(``Segments(..., on_create=...)``, ``ReputService.start_at``, ``Checkpoint.note``)."""


def test_no_module_sets_an_attribute_of_an_object_it_does_not_own(
    trees: dict[str, ast.Module],
) -> None:
    """Parts are wired by their constructors and changed through their own methods
    (``reput.start_at(offset, limit)``, ``index.follow()``, ``flusher.halt()``), so a
    part's state has one writer, its own class, and a reader of that class sees every
    way it changes."""
    new = {
        name: extra
        for name, tree in trees.items()
        if (extra := foreign_writes(tree) - FOREIGN_WRITES_LEFT.get(name, set()))
    }
    assert new == {}


def test_a_write_into_another_object_is_found() -> None:
    src = (
        "def wire(self, store, n):\n"
        "    self.own = 1\n"
        "    self.reput.reput_from = n\n"
        "    store.segments.on_create = None\n"
        "    a, store.flag = 1, True\n"
        "    out = Message()\n"
        "    out.topic.name = 't'\n"
        "    sp = out.system_properties\n"
        "    sp.tag = 'x'\n"
        "    def handler(): pass\n"
        "    handler.__doc__ = 'built here'\n"
        "    found = store.find(n)\n"
        "    found.x += 1\n"
    )
    assert foreign_writes(src) == {
        "self.reput.reput_from", "store.segments.on_create", "store.flag", "found.x",
    }  # fmt: skip


NAMEDTUPLE_API = frozenset({"_replace", "_fields", "_asdict", "_make", "_field_defaults"})


def private_reads(source: str | ast.Module) -> set[str]:
    """``x._name`` in ``source`` where ``x`` is not ``self``/``cls``, ``_name`` is not
    defined in the module itself (a private name is the module's: its classes may share
    it) and not a namedtuple's public API, and ``x`` is not a library module (whose
    private API is its own business, not our layering)."""
    tree = ast.parse(source) if isinstance(source, str) else source
    defined: set[str] = set()
    libraries: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Import):
            libraries |= {(a.asname or a.name).split(".")[0] for a in node.names
                          if not a.name.startswith("mqstore")}  # fmt: skip
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and not node.module.startswith("mqstore")
        ):
            libraries |= {a.asname or a.name for a in node.names}
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in NAMEDTUPLE_API:
            continue
        if name in defined:
            continue
        root = _root(node)
        if isinstance(root, ast.Name) and (
            root.id in libraries or (root.id in OWN and root is node.value)
        ):
            continue
        found.add(ast.unparse(node))
    return found


PRIVATE_READS_LEFT: dict[str, set[str]] = {
    # The record layout's packers, shared inside mqstore.commitlog and by its bench.
    "mqstore.commitlog._decode": {"_layout._INT", "_layout._SHORT", "_layout._SIZE_MAGIC"},
    "mqstore.commitlog._encode": {"_layout._SHORT", "_layout._SIZE_MAGIC"},
    "mqstore.commitlog.bulk": {"L._PREFIX", "L._HEADERS", "L._SIZE_MAGIC", "text._rows_at"},
    "mqstore.tools.bench.spark_audit": {"_layout._SIZE_MAGIC", "_layout._HEADERS"},
    # tools/spark borrowing helpers of its sibling modules.
    "mqstore.tools.spark._export_columns": {"text._split_tokens"},
    "mqstore.tools.spark.cqscan": {"cqfmt._UNIT"},
    "mqstore.tools.spark.queueparts": {"queues._Capped", "queues._read_queue_units",
                                       "queues._orphans", "queues._compare_matched",
                                       "queues._runs"},
}  # fmt: skip
"""Reads of another module's private names that are still there; the list may only
shrink (make the name public, or move the code to the module that owns it)."""


def test_no_module_reads_another_modules_private_names(trees: dict[str, ast.Module]) -> None:
    """A ``_name`` is its module's to change: reading it from elsewhere (the lifecycle
    setting the flusher's ``_stopped`` event, POP calling its reviver's ``_read``) ties
    two modules' insides together where a public method states the contract."""
    new = {
        name: extra
        for name, tree in trees.items()
        if (extra := private_reads(tree) - PRIVATE_READS_LEFT.get(name, set()))
    }
    assert new == {}


def test_a_private_read_across_modules_is_found() -> None:
    src = (
        "import os\n"
        "from mqstore.commitlog import _layout\n"
        "class A:\n"
        "    def _mine(self): pass\n"
        "    def f(self, other, t):\n"
        "        self._x = 1\n"
        "        other._mine(); other._x\n"
        "        self.flusher._stopped.set()\n"
        "        os._exit(0); t._replace(a=1)\n"
        "        return _layout._INT, other._theirs\n"
    )
    assert private_reads(src) == {"self.flusher._stopped", "_layout._INT", "other._theirs"}
