"""``warmup()`` fills numba's cache: a later process compiles nothing (numba's own compile
events and dispatcher statistics say so, not a timing); a cold compile is announced once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lance_minhash_sql.faces import cli
from lance_minhash_sql.kernels import config as kconfig

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# A user's first session: every public operation, in SQL and in Python, on a corpus of
# another size than warmup's; prints numba's counts for this package's kernels.
_SESSION = r"""
import gc, json, os, sys, warnings
warnings.simplefilter("ignore")
import lance_minhash_sql as lms
from lance_minhash_sql.faces.corpus import write_corpus
from lance_minhash_sql.kernels.config import COMPILES
uri = os.path.join(sys.argv[1], "session.lance")
write_corpus(uri, 9000, with_truth=True)
q = "'" + uri + "'"
con = lms.connect()
con.sql("SELECT minhash_signature('a b c d'), shingle_jaccard('a b c', 'a b d'), "
        "minhash_similarity(minhash_signature('x y z'), minhash_signature('x y w'))").fetchall()
con.sql(f"SELECT * FROM minhash_build({q}, 'text')").fetchall()
con.sql(f"SELECT * FROM minhash_search({q}, 'text', 'the quick brown fox', 5)").fetchall()
con.sql(f"SELECT count(*) FROM (SELECT text FROM minhash_search({q}, 'text', 'abc', 3)) q, "
        f"LATERAL minhash_search_ids({q}, 'text', q.text, 3)").fetchall()
con.sql(f"SELECT count(*) FROM minhash_pairs({q}, 'text', exact := true)").fetchall()
con.sql(f"SELECT count(*) FROM minhash_clusters({q}, 'text')").fetchall()
con.sql(f"SELECT count(*) FROM minhash_dedup({q}, 'text')").fetchall()
lms.search_ids(uri, "text", ["one two three", "four five six"], 3)
con.sql(f"SELECT count(*) FROM minhash_search_ids({q}, 'text', 'one two three four', k := NULL, threshold := 0.3, "
        "exact := true)").fetchall()
left = os.path.join(sys.argv[1], "left.lance")
write_corpus(left, 700, start=4000)
con.sql(f"SELECT count(*) FROM minhash_join('{left}', {q}, 'text', exact := true)").fetchall()
write_corpus(uri, 300, mode="append", start=9000)
con.sql(f"SELECT * FROM minhash_optimize({q}, 'text')").fetchall()
lms.dedup(uri, "text", keep="longest")
from lance_minhash_sql.diagnostics.report import report
report(uri, "text", sample=100)
from numba.core.registry import CPUDispatcher
hits = misses = 0
for obj in gc.get_objects():
    if isinstance(obj, CPUDispatcher) and obj.py_func.__module__.startswith("lance_minhash_sql."):
        hits += sum(obj.stats.cache_hits.values())
        misses += sum(obj.stats.cache_misses.values())
print(json.dumps({"compiled": COMPILES.count, "kernels": COMPILES.kernels, "cache_hits": hits,
                  "cache_misses": misses}))
"""

# a text long enough (3 MB) that signing it by numpy would cost more than loading numba
# (index/sign.py: sign_by_cost), so the first call compiles the kernels
_FIRST = r"""
import lance_minhash_sql as lms
con = lms.connect()
con.sql("SELECT minhash_signature(repeat('The quick brown fox ', 150000))").fetchall()
con.sql("SELECT minhash_signature('jumps over the lazy dog')").fetchall()
print(lms.warmup().format())
"""


def _run(code: str, cache: str | None, *args: str) -> subprocess.CompletedProcess:
    """``code`` in a new Python process with ``NUMBA_CACHE_DIR=cache`` (None: this process's cache)."""
    env = dict(os.environ) if cache is None else dict(os.environ, NUMBA_CACHE_DIR=cache)
    env.pop("LANCE_MINHASH_COMPILE_NOTICE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_process_after_warmup_compiles_nothing(tmp_path):
    cache = str(tmp_path / "numba-cache")  # empty: a fresh install
    first = _run(_FIRST, cache)
    # the first compilation of the process is announced, once, on stderr
    assert first.stderr.count("lance-minhash: compiling the numba kernels") == 1, first.stderr
    assert kconfig.HELPER_NOTE in first.stderr  # a helper compiled the next calls' kernels meanwhile
    assert "warmup: compiled" in first.stdout and cache in first.stdout
    session = _run(_SESSION, cache, str(tmp_path))
    got = json.loads(session.stdout.strip().splitlines()[-1])
    assert got["compiled"] == 0, got["kernels"]  # numba:compile events of the package's kernels
    assert got["cache_misses"] == 0 and got["cache_hits"] > 20  # every kernel came from the cache
    assert "compiling the numba kernels" not in session.stderr
    again = _run("import lance_minhash_sql as lms; print(lms.warmup().format())", cache)
    assert "nothing compiled" in again.stdout


def test_compile_notice_is_printed_once_per_process(capsys, monkeypatch):
    from numba.core import event

    from lance_minhash_sql.runtime import compile_ahead as ahead

    monkeypatch.setenv(ahead.ENV, "0")  # no helper process from this one

    class Fake:
        class _cache:  # noqa: N801
            _cache_path = "/somewhere"

        def py_func(self):
            pass

    fake = Fake()
    fake.py_func.__func__.__module__ = "lance_minhash_sql.kernels.fake"
    log = kconfig.CompileLog()
    log.notice = True
    for _ in range(2):
        log.on_start(event.Event("numba:compile", event.EventStatus.START, data={"dispatcher": fake}))
        log.on_end(event.Event("numba:compile", event.EventStatus.END, data={"dispatcher": fake}))
    err = capsys.readouterr().err
    assert err.count("compiling the numba kernels") == 1 and "/somewhere" in err and "lance-minhash warmup" in err
    assert kconfig.HELPER_NOTE not in err  # said only when a helper started
    assert log.count == 2 and log.seconds >= 0


def test_cli_timings_say_they_include_compilation(capsys, monkeypatch, tmp_path):
    from lance_minhash_sql.faces.corpus import write_corpus

    uri = str(tmp_path / "c.lance")
    write_corpus(uri, 300)
    clock = iter([10.0, 12.5])
    monkeypatch.setattr(cli, "_compile_seconds", lambda: next(clock))
    assert cli.main(["build", uri, "text", "--quiet"]) == 0
    assert "(including 2.5s compiling numba kernels, once per machine)" in capsys.readouterr().out
    monkeypatch.setattr(cli, "_compile_seconds", lambda: 3.0)
    assert cli.main(["build", uri, "text", "--quiet"]) == 0
    assert "compiling" not in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "1"])
def test_compile_notice_can_be_silenced(monkeypatch, value):
    monkeypatch.setenv("LANCE_MINHASH_COMPILE_NOTICE", value)
    assert kconfig.CompileLog().notice is (value == "1")


_IN_CACHE = r"""
import json
from lance_minhash_sql.kernels import order
from lance_minhash_sql.kernels.config import in_cache
import numpy as np
before = in_cache(order.sort_values)
order.sort_values(np.array([3, 1, 2], dtype=np.uint64))
print(json.dumps([before, in_cache(order.sort_values)]))
"""


def test_in_cache_says_whether_a_first_call_loads_or_compiles(tmp_path):
    cache = str(tmp_path / "numba-cache")
    assert json.loads(_run(_IN_CACHE, cache).stdout.splitlines()[-1]) == [False, True]
    assert json.loads(_run(_IN_CACHE, cache).stdout.splitlines()[-1]) == [True, True]  # a later process


# The demo's PREPARE_SQL gives the kernels of its first queries exactly the argument types
# those queries use: once it has run, they load or compile no further specialization.
_PREPARED = r"""
import gc, json, os, sys
from lance_minhash_sql import connect
from lance_minhash_sql.faces.corpus import write_corpus
from lance_minhash_sql.faces.demo import DEMO_QUERIES, PREPARE_SQL
from lance_minhash_sql.io.scan import open_dataset
uri = os.path.join(sys.argv[1], "corpus.lance")
write_corpus(uri, 500, with_truth=True)
con = connect()
con.sql(PREPARE_SQL).fetchall()
from numba.core.registry import CPUDispatcher
def specializations():
    return {f"{d.py_func.__module__}.{d.py_func.__name__}": len(d.signatures) for d in gc.get_objects()
            if isinstance(d, CPUDispatcher) and d.py_func.__module__.startswith("lance_minhash_sql.")}
before = specializations()
con.register("corpus", open_dataset(uri))
for _, sql in DEMO_QUERIES:
    con.sql(sql).fetchall()
after = specializations()
print(json.dumps({"prepared": sorted(k for k, v in before.items() if v), "added": sorted(
    k for k, v in after.items() if v != before.get(k, 0) and not k.startswith("lance_minhash_sql.faces.corpus_kernels."))}))
"""


def test_demo_prepare_sql_covers_the_first_queries_kernels(tmp_path):
    got = json.loads(_run(_PREPARED, None, str(tmp_path)).stdout.splitlines()[-1])
    assert "lance_minhash_sql.kernels.minhash.sign_ascii_range" in got["prepared"]
    assert "lance_minhash_sql.kernels.minhash.shingle_sets_ascii_range" in got["prepared"]
    assert got["added"] == []


def test_demo_corpus_written_by_a_second_process_equals_one_written_here(tmp_path):
    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.faces.demo import write_demo_corpus
    from lance_minhash_sql.io.scan import open_dataset

    calls = []
    beside = str(tmp_path / "beside.lance")
    written = write_demo_corpus(beside, 2500, "create", False, lambda: calls.append(os.getpid()), beside=True)
    here = str(tmp_path / "here.lance")
    write_corpus(here, 2500, with_truth=True)
    assert calls == [os.getpid()]  # prepare ran in this process, once
    assert open_dataset(beside).to_table().equals(open_dataset(here).to_table())
    assert written.beside and written.seconds > 0
    assert " by a second process" in written.describe() and "SQL functions' kernels" in written.describe()
    assert "second process" not in write_demo_corpus(str(tmp_path / "third.lance"), 10, "create", False, lambda: None,
                                                    beside=False).describe()


# --------------------------------------------------------------------------- compiling ahead

_FIRST_USE = r"""
import gc, json, sys
from lance_minhash_sql.duck.install import connect
from lance_minhash_sql.faces.warmup import run_first_calls
run_first_calls(connect(), sys.argv[1])
from numba.core.registry import CPUDispatcher
print(json.dumps(sorted(f"{d.py_func.__module__}.{d.py_func.__name__}\t{tuple(s)!r}" for d in gc.get_objects()
                        if isinstance(d, CPUDispatcher) and d.py_func.__module__.startswith("lance_minhash_sql.kernels.")
                        for s in d.signatures)))
"""


def test_the_compile_ahead_plan_names_the_first_calls_specializations(tmp_path, monkeypatch):
    """runtime/compile_ahead.py's plan is what the first calls use: every specialization of the
    package's kernels a new process holds after them is in it, and each other line is a
    kernel called only from kernels (a caller loaded from the cache holds its callees'
    code, so with a warm cache they get no specialization of their own)."""
    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.faces.warmup import FIRST_CALLS_ROWS
    from lance_minhash_sql.runtime import compile_ahead as ahead

    uri = str(tmp_path / "c.lance")
    write_corpus(uri, FIRST_CALLS_ROWS)
    monkeypatch.setenv(ahead.ENV, "0")
    got = json.loads(_run(_FIRST_USE, None, uri).stdout.strip().splitlines()[-1])
    plan = ["\t".join(entry) for entry in ahead.plan_entries()]
    assert len(plan) == len(set(plan)) and len(got) > 20
    assert set(got) <= set(plan)
    called = {line.split("\t")[0] for line in got}
    assert not {line.split("\t")[0] for line in set(plan) - set(got)} & called


_HELPER = r"""
import os, sys
from lance_minhash_sql.runtime.compile_helper import helper_main
helper_main(str(os.getppid()), sys.argv[2], sys.argv[1])
print(os.nice(0))  # the helper's priority
"""

_CACHED = r"""
import json
from lance_minhash_sql.kernels import components, order, similarity
from lance_minhash_sql.kernels.config import in_cache
print(json.dumps([in_cache(k) for k in (components.flatten_roots, order.sort_values, similarity.band_keys_serial)]))
"""

_PLAN = ("# a plan\n"
         "lance_minhash_sql.kernels.components.flatten_roots\t(Array(int32, 1, 'C', False, aligned=True),)\n"
         "lance_minhash_sql.kernels.order.sort_values\t(Array(uint64, 1, 'C', False, aligned=True),)\n"
         "lance_minhash_sql.kernels.similarity._band_keys_serial\t(Array(uint8, 2, 'C', False, aligned=True), int64)\n"
         "lance_minhash_sql.kernels.gone.kernel\t(int64,)\n"
         "lance_minhash_sql.kernels.order.sort_values\t(NoSuchType,)\n")


def test_the_helper_compiles_the_plan_after_the_parents_kernel_into_the_cache(tmp_path, monkeypatch):
    from lance_minhash_sql.runtime import compile_ahead as ahead

    monkeypatch.setenv(ahead.ENV, "0")
    plan = tmp_path / "plan.txt"
    plan.write_text(_PLAN)
    assert len(ahead.plan_entries(str(plan))) == 5
    cache = str(tmp_path / "numba-cache")
    helper = _run(_HELPER, cache, str(plan), "lance_minhash_sql.kernels.order.sort_values")  # the parent's kernel
    assert helper.stdout.split() == ["19"]  # the lowest priority: it takes only time its parent leaves
    # stale lines are skipped; only the kernels after the parent's were compiled
    assert json.loads(_run(_CACHED, cache).stdout.splitlines()[-1]) == [False, False, True]


_HELD = r"""
import fcntl, os, sys
from lance_minhash_sql.runtime.compile_helper import LOCK_NAME, helper_main
with open(os.path.join(sys.argv[1], LOCK_NAME), "a") as f:  # a helper of this cache folder runs
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    helper_main(str(os.getppid()), "no kernel of the plan", sys.argv[2])
"""


def test_one_helper_per_cache_folder_and_its_lock_lives_there(tmp_path, monkeypatch):
    import tempfile

    from lance_minhash_sql.runtime import compile_ahead as ahead

    monkeypatch.setenv(ahead.ENV, "0")
    plan = tmp_path / "plan.txt"
    plan.write_text(_PLAN)
    cache = tmp_path / "numba-cache"
    cache.mkdir()
    before = set(os.listdir(tempfile.gettempdir()))
    _run(_HELD, str(cache), str(cache), str(plan))  # the lock is held: the second helper leaves at once
    assert not list(cache.rglob("*.nbi"))  # it compiled nothing
    _run(_HELPER, str(cache), str(plan), "no kernel of the plan")  # released: this one compiles the plan
    assert json.loads(_run(_CACHED, str(cache)).stdout.splitlines()[-1]) == [True, True, True]
    from lance_minhash_sql.runtime.compile_helper import LOCK_NAME

    assert (cache / LOCK_NAME).exists()  # removed with the folder it guards
    assert not {n for n in set(os.listdir(tempfile.gettempdir())) - before if "lance-minhash-ahead" in n}


def test_the_helper_stops_where_it_meets_what_the_parent_compiled(tmp_path, monkeypatch):
    from lance_minhash_sql.runtime import compile_ahead as ahead

    monkeypatch.setenv(ahead.ENV, "0")
    plan = tmp_path / "plan.txt"
    plan.write_text(_PLAN)
    cache = str(tmp_path / "numba-cache")
    assert json.loads(_run(_IN_CACHE, cache).stdout.splitlines()[-1]) == [False, True]  # sort_values, compiled
    _run(_HELPER, cache, str(plan), "no kernel of the plan")
    assert json.loads(_run(_CACHED, cache).stdout.splitlines()[-1]) == [False, True, True]


_STARTS = r"""
import json, os
import numpy as np
from lance_minhash_sql.kernels import order
from lance_minhash_sql.runtime import compile_ahead as ahead
order.sort_values(np.array([3, 1, 2], dtype=np.uint64))  # the process's first compilation
p = ahead.helper_process()
print(json.dumps(None if p is None else p.pid))
"""


@pytest.mark.parametrize("enabled", ["1", "0"])
def test_a_first_compilation_starts_one_helper_that_ends_with_its_parent(tmp_path, monkeypatch, enabled):
    from lance_minhash_sql.runtime import compile_ahead as ahead

    monkeypatch.setenv(ahead.ENV, enabled)
    pid = json.loads(_run(_STARTS, str(tmp_path / "numba-cache")).stdout.splitlines()[-1])
    assert (pid is not None) is (enabled == "1")
    if pid is not None:  # ended (and reaped) before its parent exited
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
