"""Compile every numba kernel into numba's on-disk cache, ahead of the first real call.

A fresh install has an empty cache, so each kernel compiles on its first call (seconds
each). :func:`warmup` runs every public operation once on a small synthetic corpus in a
temporary folder — the corpus generator, the SQL scalar functions, a build in memory and
one that spills, search (single, filtered, by threshold with exact scores, and a batch
large enough for the parallel drivers), the join of two datasets, an ingest plan, an
ingest and a cleanup, optimize, prewarm, pairs, clusters (components and star, each with
the estimate and exact verification), dedup and the report — so every kernel
compiles with exactly the argument types real calls use. A container image or a CI cache
that runs ``lance-minhash warmup`` (or ``lms.warmup()``) once then starts every later
process with nothing to compile. The cache goes where numba puts it: beside the package
sources, or under ``NUMBA_CACHE_DIR`` (see the README, "Cold start and the numba cache").
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from dataclasses import dataclass

__all__ = ["WarmupResult", "warmup"]

_ROWS = 6_000  # above core.tuning.PARALLEL_MIN_ROWS: the multi-threaded signing path runs too
_BATCH = 4_096  # index.search's parallel drivers start at kernels.lsh.PARALLEL_MIN_QUERIES queries


@dataclass(frozen=True)
class WarmupResult:
    """``compiled``: kernel specializations numba compiled (0: the cache already held
    them all); ``compile_seconds`` of ``seconds`` in all; ``cache_dir``: where they are."""

    compiled: int
    compile_seconds: float
    seconds: float
    cache_dir: str

    def format(self) -> str:
        if self.compiled == 0:
            return (f"warmup: every kernel was already in numba's cache ({self.cache_dir}); "
                    f"nothing compiled, {self.seconds:.1f}s")
        return (f"warmup: compiled {self.compiled} kernel specializations in {self.compile_seconds:.1f}s "
                f"({self.seconds:.1f}s in all) into numba's cache ({self.cache_dir})")


def cache_dir() -> str:
    """Where numba keeps this package's compiled kernels."""
    from numba.core import config

    from lance_minhash_sql.kernels import config as kconfig

    if not kconfig.CACHE:
        return "nowhere: LANCE_MINHASH_NUMBA_CACHE=0 disables the cache"
    if config.CACHE_DIR:
        return config.CACHE_DIR
    from lance_minhash_sql.kernels import minhash

    try:
        return minhash.sign_range._cache._cache_path
    except AttributeError:
        return os.path.join(os.path.dirname(minhash.__file__), "__pycache__")


def _run_all(tmp: str) -> None:
    import pyarrow as pa

    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.duck.install import connect
    from lance_minhash_sql.duck.sqltext import literal
    from lance_minhash_sql.faces.corpus import generate_texts, write_corpus
    from lance_minhash_sql.query.topk import search_ids
    from lance_minhash_sql.runtime.cache import clear_cache

    uri = os.path.join(tmp, "corpus.lance")
    write_corpus(uri, _ROWS, with_truth=True)
    q = literal(uri)
    con = connect()
    con.execute("SET enable_progress_bar = false")
    con.sql("""SELECT minhash_similarity(minhash_signature(a.text), minhash_signature(b.text)),
                       minhash_band_keys(minhash_signature(a.text)), shingle_jaccard(a.text, b.text),
                       lsh_probability(0.5, 16, 8)
                FROM (SELECT * FROM (VALUES ('the quick brown fox'), ('Grüße aus Köln'), (NULL)) t(text)) a,
                     (SELECT 'the quick brown dog' AS text) b""").fetchall()
    build_index(uri, "text", memory_limit="256KiB", temp_dir=tmp)  # the spilling sort
    con.sql(f"SELECT * FROM minhash_build({q}, 'text')").fetchall()  # the in-memory sort
    texts = generate_texts(0, _BATCH).to_pylist()
    con.sql(f"SELECT * FROM minhash_search({q}, 'text', ?, 5)", params=[texts[1]]).fetchall()
    con.sql(f"SELECT * FROM minhash_search({q}, 'text', ?, 5, filter := 'id > 10')", params=[texts[2]]).fetchall()
    con.sql(f"SELECT * FROM minhash_search_ids({q}, 'text', ?, 5)", params=[texts[3]]).fetchall()
    con.sql(f"SELECT * FROM minhash_search_ids({q}, 'text', ?, k := NULL, threshold := 0.5, verify := 'exact')",
            params=[texts[5]]).fetchall()
    con.sql(f"SELECT * FROM minhash_search({q}, 'text', ?, 5, verify := 'exact')", params=[texts[6]]).fetchall()
    left = os.path.join(tmp, "left.lance")
    write_corpus(left, 1000, with_truth=True, start=_ROWS // 2)  # half of it overlaps the corpus
    ql = literal(left)
    con.sql(f"SELECT count(*) FROM minhash_join({ql}, {q}, 'text')").fetchall()
    con.sql(f"SELECT count(*) FROM minhash_join({ql}, {q}, 'text', verify := 'exact')").fetchall()
    con.sql(f"SELECT count(*) FROM minhash_ingest_plan({q}, {ql}, 'text', verify := 'exact')").fetchall()
    con.sql(f"SELECT * FROM minhash_ingest({q}, {ql}, 'text')").fetchall()  # the walk, the append, a delta
    con.sql(f"SELECT * FROM minhash_cleanup({q}, older_than := INTERVAL '0 seconds')").fetchall()
    search_ids(uri, "text", pa.array(texts, pa.large_string()), 3)  # the parallel drivers
    write_corpus(uri, 500, mode="append", with_truth=True, start=_ROWS)
    con.sql(f"SELECT * FROM minhash_search({q}, 'text', ?, 5)", params=[texts[4]]).fetchall()  # unindexed rows
    con.sql(f"SELECT * FROM minhash_optimize({q}, 'text')").fetchall()
    con.sql(f"SELECT * FROM minhash_optimize({q}, 'text', \"merge\" := 'all')").fetchall()
    con.sql(f"SELECT * FROM minhash_prewarm({q}, 'text')").fetchall()
    con.sql(f"SELECT count(*) FROM minhash_pairs({q}, 'text', verify := 'exact')").fetchall()
    clear_cache()  # as a new process meets the index: band rows read from the mapped files
    con.sql(f"SELECT count(*) FROM minhash_pairs({q}, 'text')").fetchall()
    con.sql(f"SELECT count(*) FROM minhash_clusters({q}, 'text', threshold := 0.7)").fetchall()
    con.sql(f"SELECT count(*) FROM minhash_dedup({q}, 'text', keep := 'longest')").fetchall()
    con.sql(f"SELECT count(*) FROM minhash_clusters({q}, 'text', verify := 'exact')").fetchall()
    con.sql(f"SELECT count(*) FROM minhash_dedup({q}, 'text', clustering := 'star')").fetchall()
    con.sql(f"SELECT count(*) FROM minhash_dedup({q}, 'text', clustering := 'star', verify := 'exact')").fetchall()
    con.sql(f"SELECT * FROM minhash_report({q}, 'text', sample := 200)").fetchall()
    con.sql(f"SELECT * FROM minhash_buckets({q}, 'text')").fetchall()
    con.close()


WARMING = "compiling every numba kernel into numba's cache (a minute or two on a fresh install)"


def warmup(progress: bool | None = None) -> WarmupResult:
    """Compile every kernel into numba's on-disk cache (see the module doc); a second
    call, or a later process, compiles nothing. Returns what was compiled and where.
    ``progress``: a status line on stderr with the seconds spent (``core/status.py``);
    default: when stderr is a terminal. The one-line compile notice stays off: the
    status line says what runs."""
    from lance_minhash_sql.core.checks import check_bool
    from lance_minhash_sql.core.errors import EmptySearchWarning
    from lance_minhash_sql.core.status import StatusLine, on_terminal
    from lance_minhash_sql.kernels.config import COMPILES
    from lance_minhash_sql.core.errors import LowRecallWarning

    progress = on_terminal() if progress is None else check_bool("progress", progress)
    t0 = time.perf_counter()
    count0, seconds0 = COMPILES.count, COMPILES.seconds
    notice = COMPILES.notice
    COMPILES.notice = False
    try:
        with tempfile.TemporaryDirectory(prefix="lance-minhash-warmup-") as tmp, warnings.catch_warnings(), \
                StatusLine(WARMING, progress):
            # its own calls' warnings (a low threshold, a query without a match) are not the user's
            warnings.simplefilter("ignore", EmptySearchWarning)
            warnings.simplefilter("ignore", LowRecallWarning)
            _run_all(tmp)
    finally:
        COMPILES.notice = notice
    return WarmupResult(COMPILES.count - count0, COMPILES.seconds - seconds0, time.perf_counter() - t0, cache_dir())


# The first calls of a session, as benchmarks/cold_start.py times them ({q}: the dataset
# as a SQL literal); the kernels they compile are the plan of runtime/compile_ahead.py.
FIRST_CALLS = (
    "SELECT minhash_signature('The quick brown fox jumps over the lazy dog')",
    "SELECT * FROM minhash_build({q}, 'text')",
    "SELECT count(*) FROM minhash_search({q}, 'text', 'the quick brown fox jumps', 10)",
    "SELECT count(*) FROM minhash_pairs({q}, 'text')",
    "SELECT count(*) FROM minhash_clusters({q}, 'text')",
)
FIRST_CALLS_ROWS = 39_000  # the benchmark's corpus (faces/corpus.py: write_corpus)


def run_first_calls(con, uri: str) -> None:
    """:data:`FIRST_CALLS` on the dataset at ``uri``, in order, on ``con``."""
    from lance_minhash_sql.duck.sqltext import literal

    con.execute("SET enable_progress_bar = false")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a query without a match is not the point here
        for sql in FIRST_CALLS:
            con.sql(sql.format(q=literal(uri))).fetchall()


_RECORD = r"""
import json, sys
from lance_minhash_sql.duck.install import connect
from lance_minhash_sql.faces.warmup import run_first_calls
from lance_minhash_sql.kernels.config import load_numba
load_numba()
from numba.core import event
lines = []
class Record(event.Listener):
    def on_start(self, ev):
        pass
    def on_end(self, ev):
        f = getattr(ev.data["dispatcher"], "py_func", None)
        if f is not None and f.__module__.startswith("lance_minhash_sql.kernels."):
            line = f"{f.__module__}.{f.__name__}\t{tuple(ev.data['args'])!r}"
            if line not in lines:
                lines.append(line)
event.register("numba:compile", Record())
run_first_calls(connect(), sys.argv[1])
print(json.dumps(lines))
"""


def first_use_plan() -> list[str]:
    """The lines of ``runtime/compile_ahead.py``'s plan: the kernel specializations
    :data:`FIRST_CALLS` compile on an empty numba cache, in the order they finish
    compiling (callees first), recorded in a new process without the helper. About a
    minute (the corpus is written here, as the benchmark writes it in its own process)."""
    import json
    import subprocess
    import sys

    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.runtime.compile_ahead import ENV

    with tempfile.TemporaryDirectory(prefix="lance-minhash-plan-") as tmp:
        uri = os.path.join(tmp, "corpus.lance")
        write_corpus(uri, FIRST_CALLS_ROWS)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "numba-cache"), LANCE_MINHASH_COMPILE_NOTICE="0",
                   **{ENV: "0"})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        proc = subprocess.run([sys.executable, "-c", _RECORD, uri], capture_output=True, text=True, env=env,
                              cwd=tmp, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_first_use_plan(path: str | None = None) -> str:
    """Record :func:`first_use_plan` into ``runtime/compile_ahead.py``'s plan file (or ``path``)."""
    from lance_minhash_sql.runtime.compile_ahead import PLAN

    path = path or PLAN
    lines = first_use_plan()
    with open(path, "w", encoding="utf-8") as f:
        f.write("# written by lance_minhash_sql/faces/warmup.py: write_first_use_plan (see runtime/compile_ahead.py)\n")
        f.writelines(line + "\n" for line in lines)
    return path
