"""The package's structure rules, checked on its source:

* imports flow one way, along :data:`LAYER_ORDER` (core <- kernels <- runtime <- io <- index <- indexer
  <- selfjoin <- query <- lifecycle <- diagnostics <- extras <- api <- duck <- faces); every module but the
  package root lives in a layer; kernels are pure numpy + numba (and core's format and tuning
  constants and array helpers);
* only io/ touches Lance: no ``import lance``, ``LanceFileReader`` or ``_take_rows``
  elsewhere (``bench.py`` runs Lance itself as a benchmark peer), and no member of a
  ``LanceDataset`` or ``LanceFragment`` (``count_rows``, ``schema``, ``version``, ``uri``,
  ``get_fragment``, ...) used on a dataset or fragment object (a name such as ``ds``,
  ``dataset``, ``new_ds``, ``frag``, or an attribute ``.ds``): io/ has a function for each;
* only duck/ and faces/ speak DuckDB: no ``import duckdb`` elsewhere (the engine sorts by
  ``order_by`` through ``core/sql_order.py``);
* no generator yields a string-tagged tuple (``yield "links", a, b``): what a generator
  yields is a value or a small named record;
* no module uses another module's private names (``from .x import _y``, ``x._y``);
* a module over :data:`MAX_LINES` lines is listed (a warning, not a failure: modules are cut
  by responsibility, not by length); so is a long definition, which must be one of
  :data:`LONG_DEFINITIONS`.

The checker is :func:`violations`; the ``test_checker_*`` tests feed it sources that break
each rule, so it cannot silently stop finding them.
"""

from __future__ import annotations

import ast
import pathlib
import re

import lance
import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "lance_minhash_sql"
LAYER_ORDER = ["core", "kernels", "runtime", "io", "index", "indexer", "selfjoin", "query", "lifecycle", "diagnostics",
               "extras", "api", "duck", "faces"]
LANCE_PEERS = {"faces/bench.py"}  # runs Lance itself as a benchmark peer
LANCE_ONLY_NAMES = ("_take_rows", "LanceFileReader")
# members of pylance's dataset and fragment objects, and the names such objects go by
LANCE_MEMBERS = frozenset(m for cls in (lance.LanceDataset, lance.LanceFragment) for m in dir(cls)
                          if not m.startswith("__"))
LANCE_OBJECT = re.compile(r"^(ds|dataset|\w+_ds|ds_\w+|\w+_dataset|frag|fragment|\w+_frag)$")
MAX_LINES = 600
# distinctly Lance members (not pyarrow's, numpy's or Python's): called on any name outside io/
LANCE_CALLS = frozenset({
    "count_rows", "get_fragments", "get_fragment", "deletion_file", "data_files", "create_scalar_index",
    "describe_indices", "list_indices", "checkout_version", "latest_version", "merge_insert", "cleanup_old_versions",
    "has_index", "physical_rows", "num_deletions", "commit_existing_index_segments", "merge_existing_index_segments",
    "drop_index", "create_index", "to_table", "scanner", "lance_schema", "has_stable_row_ids"})
# private members of other libraries' objects that the package reads on purpose, each in one place
FOREIGN_PRIVATE = {
    "_take_rows": "Lance's take by row id (io/takes.py)",
    "_cache": "numba's cache of a dispatcher (kernels/config.py: in_cache, _cache_place)",
    "_cache_file": "numba's cache index file (kernels/config.py: in_cache)",
    "_load_index": "numba's cache index (kernels/config.py: in_cache)",
    "_cache_path": "numba's cache folder (kernels/config.py, faces/warmup.py)",
}
MAX_FUNCTION_LINES = 80  # longer functions and classes must be listed in LONG_DEFINITIONS
MAX_CLASS_LINES = 250
# the definitions over those lengths, each the clearest form of its work (a kernel's one
# loop, a writer's one sequence of steps); the list only shrinks
LONG_DEFINITIONS = frozenset({
    "lance_minhash_sql/indexer/builder.py:write_segment",
    "lance_minhash_sql/faces/corpus_kernels.py:build_vocabulary",
    "lance_minhash_sql/kernels/bucket_pairs.py:pair_chunk",
    "lance_minhash_sql/kernels/tokenize.py:tokenize_doc",
})


def _resolve(rel: str, node: ast.ImportFrom) -> str:
    """Absolute module of an ``ImportFrom`` in the package file ``rel`` (posix, from PKG's parent)."""
    if not node.level:
        return node.module or ""
    package = rel.removesuffix(".py").split("/")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(tree: ast.AST, rel: str) -> set[str]:
    """Absolute module names imported by a file (relative imports resolved)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(rel, node)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "lance_minhash_sql" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYER_ORDER else None


def _own_layer(rel: str) -> str | None:
    parts = rel.removesuffix(".py").split("/")[1:]  # drop "lance_minhash_sql"
    return parts[0] if len(parts) > 1 and parts[0] in LAYER_ORDER else None


def _is_package_module(mod: str) -> bool:
    return mod == "lance_minhash_sql" or mod.startswith("lance_minhash_sql.")


def violations(source: str, rel: str) -> list[str]:
    """Every rule ``source`` breaks as the file ``rel`` (e.g. ``lance_minhash_sql/index/x.py``)."""
    tree = ast.parse(source)
    out = []
    own = _own_layer(rel)
    name = rel.split("/", 1)[1]
    in_io = name.startswith("io/")
    # import direction
    if own is not None:
        for mod in imports_of(tree, rel):
            other = layer_of(mod)
            if other is not None and LAYER_ORDER.index(other) > LAYER_ORDER.index(own):
                out.append(f"{rel}: imports {mod} (layer {other} above {own})")
    if own is None and name != "__init__.py":
        out.append(f"{rel}: a module outside every layer (put it in one of {', '.join(LAYER_ORDER)})")
    if own is not None and "lance_minhash_sql" in imports_of(tree, rel):
        out.append(f"{rel}: imports the package root, the layer above every other (import from the module "
                   "that holds the name)")
    # only io/ touches Lance
    if not in_io:
        for mod in imports_of(tree, rel):
            if mod.split(".")[0] == "lance" and name not in LANCE_PEERS:
                out.append(f"{rel}: imports {mod} (only io/ touches Lance)")
        for node in ast.walk(tree):
            ident = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if ident is None and isinstance(node, ast.Constant) and isinstance(node.value, str):
                ident = node.value if node.value in LANCE_ONLY_NAMES else None
            if ident in LANCE_ONLY_NAMES:
                out.append(f"{rel}:{node.lineno}: uses {ident} (only io/ touches Lance)")
            if isinstance(node, ast.Attribute) and node.attr in LANCE_MEMBERS and name not in LANCE_PEERS:
                owner = node.value
                owner = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else None
                if owner is not None and LANCE_OBJECT.match(owner):
                    out.append(f"{rel}:{node.lineno}: uses Lance member {owner}.{node.attr} (only io/ touches Lance; "
                               "ask through an io/ function)")
    # only duck/ and faces/ speak DuckDB
    if not name.startswith(("duck/", "faces/")):
        for mod in imports_of(tree, rel):
            if mod.split(".")[0] == "duckdb":
                out.append(f"{rel}: imports {mod} (only duck/ and faces/ speak DuckDB)")
    # no generator yields a string-tagged tuple
    for node in ast.walk(tree):
        if (isinstance(node, ast.Yield) and isinstance(node.value, ast.Tuple) and node.value.elts
                and isinstance(node.value.elts[0], ast.Constant) and isinstance(node.value.elts[0].value, str)):
            out.append(f"{rel}:{node.lineno}: yields a tuple tagged {node.value.elts[0].value!r} (yield a named "
                       "record: a NamedTuple or a dataclass)")
    # no private names of other modules
    aliases = {}  # local name -> package module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _resolve(rel, node)
            if not _is_package_module(mod):
                continue
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(f"{rel}:{node.lineno}: imports private {a.name} from {mod}")
                aliases[a.asname or a.name] = f"{mod}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _is_package_module(a.name):
                    aliases[a.asname or a.name.split(".")[0]] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            out.append(f"{rel}:{node.lineno}: uses private {aliases[node.value.id]}.{node.attr}")
    # no private member of an object whose class lives in another module: a member `_x` used
    # on anything but self/cls must be defined in this module
    own_names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    own_names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    own_names |= {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                  for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and (node.value.id in ("self", "cls")
                                                                or node.value.id in aliases))
                and node.attr not in own_names and node.attr not in FOREIGN_PRIVATE):
            out.append(f"{rel}:{node.lineno}: uses private member {node.attr} of another module's object "
                       f"({ast.unparse(node)}); make it public in its class, or ask through a function")
    # Lance calls on any name outside io/
    if not in_io and name not in LANCE_PEERS:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr in LANCE_CALLS
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                out.append(f"{rel}:{node.lineno}: calls Lance's {node.attr} ({ast.unparse(node)}); only io/ "
                           "touches Lance: ask through an io/ function")
    return out


def module_lines(source: str) -> int:
    return source.count("\n") + (not source.endswith("\n"))


def modules():
    return sorted(PKG.rglob("*.py"))


def _rel(path: pathlib.Path) -> str:
    return path.relative_to(PKG.parent).as_posix()


def test_there_are_modules_to_check():
    names = {p.relative_to(PKG).as_posix() for p in modules()}
    assert {"kernels/minhash.py", "io/segments.py", "index/sign.py", "faces/cli.py", "core/params.py"} <= names


def test_the_package_keeps_every_rule():
    found = [v for path in modules() for v in violations(path.read_text(), _rel(path))]
    assert found == []


# from core: Lance's format constants, the tuning constants and the arrays' helpers (numpy only), and
# the status line config.py shows while numba compiles (the standard library only)
KERNEL_IMPORTS = ("lance_minhash_sql.kernels", "lance_minhash_sql.core.lance_format", "lance_minhash_sql.core.tuning",
                  "lance_minhash_sql.core.arrays", "lance_minhash_sql.core.status")


def test_kernels_are_pure():
    # sys, threading, time: config.py's log of numba compilations and its one-line notice;
    # gc: config.py pauses the collector while numba loads;
    # llvmlite (numba's own IR builder): minhash.py's vector intrinsic. No process is
    # started here (runtime/compile_ahead.py starts the compile-ahead helper)
    allowed_roots = {"numpy", "numba", "llvmlite", "math", "os", "functools", "typing", "types", "__future__",
                     "dataclasses", "sys", "threading", "time", "gc"}
    for path in (PKG / "kernels").glob("*.py"):
        for mod in imports_of(ast.parse(path.read_text()), _rel(path)):
            root = mod.split(".")[0]
            if root == "lance_minhash_sql":
                assert mod == "lance_minhash_sql.core" or mod.startswith(KERNEL_IMPORTS), (path.name, mod)
            else:
                assert root in allowed_roots, (path.name, mod)
        for node in ast.walk(ast.parse(path.read_text())):  # nor through os
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
                assert not node.attr.startswith(("fork", "spawn", "exec", "posix_spawn", "system", "popen")), \
                    (path.name, node.attr)


def test_the_corpus_generator_lives_beside_the_demo():
    """The synthetic corpus (the demo's, the tests' and the benchmarks') is no engine
    kernel: its generator and the generator's kernels live in faces/, and no engine layer
    imports them."""
    assert not (PKG / "kernels" / "corpus.py").exists()
    assert (PKG / "faces" / "corpus.py").exists() and (PKG / "faces" / "corpus_kernels.py").exists()
    for path in modules():
        if _own_layer(_rel(path)) not in (None, "faces"):
            assert not {m for m in imports_of(ast.parse(path.read_text()), _rel(path)) if "corpus" in m}, path


# --------------------------------------------------------------------------- the checker itself


@pytest.mark.parametrize("rel, source, expected", [
    ("lance_minhash_sql/index/x.py", "from ..duck import tables\n", "layer duck above index"),
    ("lance_minhash_sql/io/x.py", "from lance_minhash_sql.query.topk import search\n", "layer query above io"),
    ("lance_minhash_sql/index/x.py", "import lance\n", "only io/ touches Lance"),
    ("lance_minhash_sql/duck/x.py", "from lance.file import LanceFileReader\n", "only io/ touches Lance"),
    ("lance_minhash_sql/index/x.py", "def f(ds, ids):\n    return ds._take_rows(ids, ['a'])\n", "uses _take_rows"),
    ("lance_minhash_sql/index/x.py", "def f(ds):\n    return hasattr(ds, '_take_rows')\n", "uses _take_rows"),
    ("lance_minhash_sql/index/x.py", "def f(p, m):\n    return m.LanceFileReader(p)\n", "uses LanceFileReader"),
    ("lance_minhash_sql/index/x.py", "def f(ds):\n    return ds.count_rows()\n", "uses Lance member ds.count_rows"),
    ("lance_minhash_sql/index/x.py", "def f(o):\n    return o.ds.schema.names\n", "uses Lance member ds.schema"),
    ("lance_minhash_sql/duck/x.py", "def f(dataset):\n    return int(dataset.version)\n",
     "uses Lance member dataset.version"),
    ("lance_minhash_sql/index/x.py", "def f(w):\n    return w.new_ds.uri\n", "uses Lance member new_ds.uri"),
    ("lance_minhash_sql/index/x.py", "def f(ds):\n    return [x.fragment_id for x in ds.get_fragments()]\n",
     "uses Lance member ds.get_fragments"),
    ("lance_minhash_sql/index/x.py", "def f(frag):\n    return frag.deletion_file()\n",
     "uses Lance member frag.deletion_file"),
    ("lance_minhash_sql/selfjoin/x.py", "def f():\n    import duckdb\n", "only duck/ and faces/ speak DuckDB"),
    ("lance_minhash_sql/kernels/x.py", "from duckdb import connect\n", "only duck/ and faces/ speak DuckDB"),
    ("lance_minhash_sql/selfjoin/x.py", "def f(a, b):\n    yield \"links\", a, b\n", "yields a tuple tagged 'links'"),
    ("lance_minhash_sql/selfjoin/x.py", "def f(a):\n    yield ('links', *a)\n", "yields a tuple tagged 'links'"),
    ("lance_minhash_sql/index/x.py", "from .build import _bar\n", "imports private _bar"),
    ("lance_minhash_sql/duck/x.py", "from .tables import _scalars, search_sql\n", "imports private _scalars"),
    ("lance_minhash_sql/index/x.py", "from . import opened\n\ndef f():\n    return opened._the_cache()\n",
     "uses private lance_minhash_sql.index.opened._the_cache"),
    ("lance_minhash_sql/index/x.py", "import lance_minhash_sql.index.opened as o\nx = o._runs\n",
     "uses private lance_minhash_sql.index.opened._runs"),
    ("lance_minhash_sql/helpers.py", "x = 1\n", "a module outside every layer"),
    ("lance_minhash_sql/faces/x.py", "def f():\n    from lance_minhash_sql import connect\n", "imports the package root"),
    ("lance_minhash_sql/index/x.py", "def f(store):\n    store._ensure(3)\n", "uses private member _ensure"),
    ("lance_minhash_sql/lifecycle/x.py", "def f(frags):\n    return sum(f.count_rows() for f in frags)\n",
     "calls Lance's count_rows"),
    ("lance_minhash_sql/faces/x.py", "def f(o):\n    return o(1).to_table(columns=['a'])\n",
     "calls Lance's to_table"),
    ("lance_minhash_sql/kernels/x.py", "from lance_minhash_sql.runtime.threads import run_chunks\n",
     "layer runtime above kernels"),
])
def test_checker_finds_each_violation(rel, source, expected):
    found = violations(source, rel)
    assert any(expected in v for v in found), found


def test_checker_accepts_what_the_rules_allow():
    ok = [
        ("lance_minhash_sql/io/x.py", "import lance\nfrom lance.file import LanceFileReader\n"
                                      "def f(ds, i):\n    return ds._take_rows(i, ['a'])\n"),
        ("lance_minhash_sql/io/x.py", "def f(ds):\n    return ds.count_rows(), ds.schema, int(ds.version)\n"),
        ("lance_minhash_sql/index/x.py", "from ..io.scan import row_count\n\ndef f(ds, t):\n"
                                         "    return row_count(ds), t.schema, t.num_rows\n"),
        ("lance_minhash_sql/duck/x.py", "from ..index.search import search\nfrom ..io.scan import open_dataset\n"),
        ("lance_minhash_sql/index/x.py", "from .cache import ByteCache\n\nclass A:\n    def _own(self):\n"
                                         "        return self._x\n"),
        ("lance_minhash_sql/faces/bench.py", "import lance\n"),
        ("lance_minhash_sql/duck/x.py", "import duckdb\n"),
        ("lance_minhash_sql/selfjoin/x.py", "def f(a, b):\n    yield a, b\n    yield Links(a, b)\n"),
        ("lance_minhash_sql/faces/x.py", "def f():\n    import duckdb\n"),
    ]
    for rel, source in ok:
        assert violations(source, rel) == [], rel


def test_no_sub_package_hides_a_public_name():
    # importing lance_minhash_sql.<sub> sets the attribute <sub> of the package root, which
    # would replace a public function of that name (lms.search was once hidden this way)
    import lance_minhash_sql

    subs = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    assert subs & set(lance_minhash_sql.__all__) == set()
    assert set(LAYER_ORDER) == subs


def import_graph() -> dict[str, set[str]]:
    """``{module: package modules it imports}``, function-level (lazy) imports included."""
    def name_of(path: pathlib.Path) -> str:
        return path.relative_to(PKG.parent).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")

    mods = {name_of(p): p for p in modules()}
    graph = {}
    for mod, path in mods.items():
        targets = set()
        for imported in imports_of(ast.parse(path.read_text()), _rel(path)):
            if imported in mods and imported != mod:
                targets.add(imported)
        graph[mod] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_lazy_imports_included():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the checker finds one
    graph = import_graph()
    assert len(graph) > 90 and graph["lance_minhash_sql.faces.warmup"]  # its imports are inside functions
    assert cycles(graph) == []


def long_definitions(source: str, rel: str) -> dict[str, int]:
    """``{"rel:name": lines}`` of the functions over MAX_FUNCTION_LINES and the classes over
    MAX_CLASS_LINES of one module."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        limit = (MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else
                 MAX_FUNCTION_LINES if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
        if limit is not None and node.end_lineno - node.lineno + 1 > limit:
            found[f"{rel}:{node.name}"] = node.end_lineno - node.lineno + 1
    return found


def test_long_definitions_are_the_listed_ones(capsys):
    """A new long definition fails (split it, or list it with why its length is the
    clearest form); one that got shorter fails until it leaves LONG_DEFINITIONS."""
    assert long_definitions("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES, "m.py") == {"m.py:f": MAX_FUNCTION_LINES + 1}
    assert long_definitions("def f():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1), "m.py") == {}
    found = {}
    for path in modules():
        found.update(long_definitions(path.read_text(), _rel(path)))
    with capsys.disabled():
        print("\nlong definitions (functions > %d, classes > %d lines):" % (MAX_FUNCTION_LINES, MAX_CLASS_LINES))
        for name, lines in sorted(found.items()):
            print(f"  {name}: {lines} lines")
    assert not set(found) - LONG_DEFINITIONS, f"new long definitions: {sorted(set(found) - LONG_DEFINITIONS)}"
    assert not LONG_DEFINITIONS - set(found), f"no longer long, drop from LONG_DEFINITIONS: {sorted(LONG_DEFINITIONS - set(found))}"


def test_long_modules_are_a_warning(capsys):
    """Modules over MAX_LINES lines are printed for review; the length is not a gate."""
    assert module_lines("x = 1\n" * (MAX_LINES + 1)) == MAX_LINES + 1 and module_lines("x = 1") == 1
    long = {_rel(p): n for p in modules() if (n := module_lines(p.read_text())) > MAX_LINES}
    with capsys.disabled():
        print(f"\nmodules over {MAX_LINES} lines (a warning): " + (", ".join(f"{k} ({v})" for k, v in sorted(long.items()))
                                                             or "none"))


def test_every_memo_is_registered_where_clear_cache_sees_it():
    # functools' caches are made through runtime/cache.py:memoized; the kernels' layer (below
    # runtime) keeps one documented lru_cache of constants
    allowed = {"runtime/cache.py", "kernels/minhash.py"}
    found = [p.relative_to(PKG).as_posix() for p in modules()
             if re.search(r"\blru_cache\b|functools\.cache\b|@cache\b", p.read_text())]
    assert sorted(found) == sorted(allowed)


def test_clear_cache_empties_memoized_functions():
    from lance_minhash_sql.core.params import MinHashParams
    from lance_minhash_sql.index.sign import signer_for
    from lance_minhash_sql.runtime.cache import clear_cache, process_caches, segment_cache

    segment_cache()
    first = signer_for(MinHashParams(8, 2, 2))
    assert signer_for(MinHashParams(8, 2, 2)) is first
    names = {name for name, *_ in process_caches()}
    assert "lance_minhash_sql.index.sign.signer_for" in names and "segments" in names
    clear_cache()
    assert signer_for(MinHashParams(8, 2, 2)) is not first
