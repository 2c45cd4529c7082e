"""Cold start: the first call of each function in a new process, with an empty numba cache
and with a warm one, and the first queries of a new process against Lance's.

    python benchmarks/cold_start.py                 # table + new-process queries on 1M rows
    python benchmarks/cold_start.py --demo          # also `lance-minhash demo`, cold and warm
    python benchmarks/cold_start.py --demo --compare /path/to/other/checkout   # both checkouts, same load

Every figure comes from a fresh child process, as a user meets it:

* *first calls*: ``import`` + ``connect()``, then in order the first
  ``minhash_signature``, ``minhash_build`` (a 39,000-row corpus), ``minhash_search``,
  ``minhash_pairs`` count and ``minhash_clusters`` count — once with ``NUMBA_CACHE_DIR``
  pointing at an empty folder (a fresh install: every kernel compiles), then again in a
  new process with the cache that run filled. Each row gives wall seconds, the process's
  CPU seconds, and the kernel specializations numba compiled (from numba's
  ``numba:compile`` events: a cache load is not one).
* *new-process queries* on a 1M-row index (Lance-built ``MINHASHLSH``, reused from
  ``bench-data/search-1000000.lance``): ours = ``import`` + ``connect()`` then two
  distinct ``minhash_search_ids`` statements (dataset as a URI, query bound as ``?``);
  Lance = ``import lance`` + ``lance.dataset(uri)`` then two ``to_table(nearest=
  MinHashQuery)`` calls. Warm numba cache, OS page cache warm, ``--rounds`` new processes
  each, alternating.
* ``--demo``: ``lance-minhash demo --quiet`` in a new process, cold cache then warm.

The machine's load (``os.getloadavg``) is printed with the figures: on a shared machine
wall times move with it, CPU seconds much less. The children write and load ``.pyc``
files as a user's Python does, even where the environment sets ``PYTHONDONTWRITEBYTECODE``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

STEPS = ["connect()", "minhash_signature", "minhash_build (39k rows)", "minhash_search", "minhash_pairs count",
         "minhash_clusters count"]

_FIRST_CALLS = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import lance_minhash_sql as lms
con = lms.connect()
con.execute("SET enable_progress_bar = false")
try:
    from lance_minhash_sql.kernels.config import COMPILES
except ImportError:  # a checkout without the compile log (--compare): count numba's own events
    from numba.core import event
    class _Log(event.Listener):
        count, kernels = 0, {}
        def on_start(self, ev):
            f = ev.data["dispatcher"].py_func
            if f.__module__.startswith("lance_minhash_sql."):
                self.count += 1
                self.kernels[f.__module__ + "." + f.__name__] = self.kernels.get(f.__module__ + "." + f.__name__, 0) + 1
        def on_end(self, ev):
            pass
    COMPILES = _Log()
    event.register("numba:compile", COMPILES)
out = [("connect()", time.perf_counter() - t0, time.process_time() - c0, 0)]
uri = sys.argv[1]
q = "'" + uri + "'"
steps = [
    ("minhash_signature", "SELECT minhash_signature('The quick brown fox jumps over the lazy dog')"),
    ("minhash_build (39k rows)", f"SELECT * FROM minhash_build({q}, 'text')"),
    ("minhash_search", f"SELECT count(*) FROM minhash_search({q}, 'text', 'the quick brown fox jumps', 10)"),
    ("minhash_pairs count", f"SELECT count(*) FROM minhash_pairs({q}, 'text')"),
    ("minhash_clusters count", f"SELECT count(*) FROM minhash_clusters({q}, 'text')"),
]
for name, sql in steps:
    n0, t0, c0 = COMPILES.count, time.perf_counter(), time.process_time()
    con.sql(sql).fetchall()
    out.append((name, time.perf_counter() - t0, time.process_time() - c0, COMPILES.count - n0))
print(json.dumps({"steps": out, "kernels": COMPILES.kernels, "package": lms.__file__}))
"""

_OURS_QUERIES = r"""
import json, sys, time
t0 = time.perf_counter()
import lance_minhash_sql as lms
con = lms.connect()
t1 = time.perf_counter()
uri, a, b = sys.argv[1:4]
sql = f"SELECT _rowid, _distance FROM minhash_search_ids('{uri}', 'text', ?, 10)"
con.execute(sql, [a]).fetchall()
t2 = time.perf_counter()
con.execute(sql, [b]).fetchall()
t3 = time.perf_counter()
from lance_minhash_sql.kernels.config import COMPILES
print(json.dumps({"open": t1 - t0, "first": t2 - t1, "second": t3 - t2, "compiled": COMPILES.count}))
"""

_LANCE_QUERIES = r"""
import json, sys, time
t0 = time.perf_counter()
import lance
from lance.query import MinHashQuery
uri, a, b = sys.argv[1:4]
ds = lance.dataset(uri)
t1 = time.perf_counter()
ds.to_table(nearest=MinHashQuery(a, "text"), limit=10, columns=["_distance"], with_row_id=True)
t2 = time.perf_counter()
ds.to_table(nearest=MinHashQuery(b, "text"), limit=10, columns=["_distance"], with_row_id=True)
t3 = time.perf_counter()
print(json.dumps({"open": t1 - t0, "first": t2 - t1, "second": t3 - t2}))
"""


def _env(cache: str, root: str = ROOT) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, LANCE_MINHASH_COMPILE_NOTICE="0")
    # as a user's Python runs: it writes and then loads .pyc files (pip compiles an installed
    # package's at install); a machine that sets PYTHONDONTWRITEBYTECODE recompiles every
    # module of every process from source instead (tens of ms for this package alone)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = root  # this checkout (or --compare's) wins over any installed copy
    return env


def _child(code: str, args: list[str], cache: str, root: str = ROOT) -> dict:
    # cwd: a folder without the package, so PYTHONPATH decides which checkout is imported
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=_env(cache, root),
                          cwd=os.path.dirname(cache))
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _load() -> str:
    return "load average %.2f %.2f %.2f (2 cores)" % os.getloadavg()


def first_calls(work: str, root: str = ROOT, label: str = "ours") -> tuple[list, list, dict]:
    from lance_minhash_sql.faces.corpus import write_corpus

    uri = os.path.join(work, f"corpus-39k-{label}.lance")
    write_corpus(uri, 39_000)
    cache = os.path.join(work, f"numba-cache-{label}")
    os.makedirs(cache)
    cold = _child(_FIRST_CALLS, [uri], cache, root)
    warm = _child(_FIRST_CALLS, [uri], cache, root)
    assert cold["package"].startswith(root + os.sep), (cold["package"], root)
    return cold["steps"], warm["steps"], cold["kernels"]


def print_first_calls(cold: list, warm: list, label: str = "this checkout") -> None:
    print(f"\nFirst call of each function in a new process, {label} ({_load()})")
    print(f"{'first call':<26} {'cold s':>7} {'(CPU s)':>8} {'compiled':>9}   {'warm s':>7} {'(CPU s)':>8} "
          f"{'compiled':>9}")
    tot = [0.0, 0.0, 0, 0.0, 0.0, 0]
    for (name, w, c, n), (_, w2, c2, n2) in zip(cold, warm):
        print(f"{name:<26} {w:>7.2f} {c:>8.2f} {n:>9}   {w2:>7.2f} {c2:>8.2f} {n2:>9}")
        for i, v in enumerate((w, c, n, w2, c2, n2)):
            tot[i] += v
    print(f"{'all':<26} {tot[0]:>7.2f} {tot[1]:>8.2f} {tot[2]:>9}   {tot[3]:>7.2f} {tot[4]:>8.2f} {tot[5]:>9}")
    print("cold: NUMBA_CACHE_DIR empty (a fresh install); warm: a new process with the cache the cold run filled. "
          "compiled: kernel specializations numba compiled in that call")


def new_process_queries(data_dir: str, rounds: int, work: str, compare: str | None = None) -> None:
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from search import dataset, queries  # the search benchmark's 1M-row Lance-built index

    uri = dataset(1_000_000, data_dir)
    qs = queries(uri, 2 * rounds, seed=11)
    peers = [("ours: minhash_search_ids (SQL, ?)", ROOT)]
    if compare:
        peers.append((f"baseline {os.path.basename(compare.rstrip(os.sep))}: same SQL", compare))
    caches = {root: os.path.join(work, f"numba-cache-queries-{i}") for i, (_, root) in enumerate(peers)}
    for _, root in peers:  # fills each checkout's cache for the search path (not timed)
        _child(_OURS_QUERIES, [uri, qs[0], qs[1]], caches[root], root)
    got = {label: [] for label, _ in peers}
    theirs = []
    for r in range(rounds):
        a, b = qs[2 * r], qs[2 * r + 1]
        for label, root in peers:
            got[label].append(_child(_OURS_QUERIES, [uri, a, b], caches[root], root))
        theirs.append(_child(_LANCE_QUERIES, [uri, a, b], caches[ROOT]))
    print(f"\nFirst and second query of a new process, 1M-row index, warm numba cache, {rounds} processes each, "
          f"alternating ({_load()})")
    print(f"{'':<34} {'open (import+connect / dataset)':>32} {'first query':>12} {'second query':>13}")

    def med(rows, key):
        v = sorted(x[key] for x in rows)
        return v[len(v) // 2]

    rows = list(got.items()) + [("Lance: to_table(nearest=MinHashQuery)", theirs)]
    for label, runs in rows:
        print(f"{label:<34} {med(runs, 'open') * 1e3:>29.0f} ms {med(runs, 'first') * 1e3:>9.1f} ms "
              f"{med(runs, 'second') * 1e3:>10.1f} ms")
    ours = got[peers[0][0]]
    print(f"ratios ours/Lance (medians): first query {med(ours, 'first') / med(theirs, 'first'):.2f}x, second query "
          f"{med(ours, 'second') / med(theirs, 'second'):.2f}x, open {med(ours, 'open') / med(theirs, 'open'):.2f}x; "
          f"kernels compiled in the timed processes: {sum(x['compiled'] for x in ours)}")


def demo(work: str, root: str = ROOT, label: str = "this checkout") -> float:
    cache = os.path.join(work, f"demo-cache-{label}")
    os.makedirs(cache)
    out = {}
    for state in ("cold", "warm"):
        d = os.path.join(work, f"demo-{label}-{state}")
        t0, c0 = time.perf_counter(), os.times()
        proc = subprocess.run([sys.executable, "-m", "lance_minhash_sql.faces.cli", "demo", "--quiet", "--dir", d],
                              capture_output=True, text=True, env=_env(cache, root), cwd=work)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        c1 = os.times()
        out[state] = (time.perf_counter() - t0, c1.children_user + c1.children_system - c0.children_user
                      - c0.children_system)
    print(f"\nlance-minhash demo (20,000 rows, new process), {label}: cold cache {out['cold'][0]:.1f} s "
          f"({out['cold'][1]:.1f} CPU s), warm cache {out['warm'][0]:.1f} s ({out['warm'][1]:.1f} CPU s) "
          f"({_load()})")
    return out["cold"][0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "bench-data"), help="folder of the reused 1M-row index")
    ap.add_argument("--rounds", type=int, default=5, help="new processes per peer for the query figures")
    ap.add_argument("--demo", action="store_true", help="also time `lance-minhash demo`, cold and warm")
    ap.add_argument("--skip-queries", action="store_true", help="only the first-call table")
    ap.add_argument("--compare", default=None, metavar="CHECKOUT",
                    help="another checkout of the package (e.g. the main branch) to run the first calls, the "
                         "new-process queries and the demo of, beside this one's, for ratios under the same load")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="lms-cold-")
    try:
        cold, warm, kernels = first_calls(work)
        print_first_calls(cold, warm)
        if args.compare:
            bcold, bwarm, _ = first_calls(work, os.path.abspath(args.compare), "baseline")
            print_first_calls(bcold, bwarm, f"baseline {args.compare}")
            ours, base = sum(x[1] for x in cold), sum(x[1] for x in bcold)
            ours_c, base_c = sum(x[2] for x in cold), sum(x[2] for x in bcold)
            print(f"all first calls, cold: this checkout / baseline = {ours / base:.2f} wall, "
                  f"{ours_c / base_c:.2f} CPU")
        if not args.skip_queries:
            new_process_queries(args.data, args.rounds, work, os.path.abspath(args.compare) if args.compare else None)
        if args.demo:
            ours = demo(work)
            if args.compare:
                base = demo(work, os.path.abspath(args.compare), f"baseline {args.compare}")
                print(f"demo cold: this checkout / baseline = {ours / base:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
