"""Small data in a new process: ``import`` + ``connect()`` + ``minhash_build`` against
``import lance`` + ``create_scalar_index(column, "MINHASHLSH")``, then the first search and
the first dedup of that process.

    python benchmarks/new_process.py                       # 1,000 and 10,000 rows, 3 rounds
    python benchmarks/new_process.py --rows 1000 --rounds 5 --data-dir DIR
    python benchmarks/new_process.py --compare /path/to/other/checkout   # that checkout too, same rounds
    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=... NUMBA_CACHE_DIR=DIR python benchmarks/new_process.py

Rows: real English text from files installed on this machine, in the order
``benchmarks/real_text.py`` reads them (docstrings, licences and README paragraphs of the
site-packages, then ``/usr/share/doc/*/copyright``), shuffled with a fixed seed and cut to
``--rows``; the dataset has only the ``text`` column and is written once under
``--data-dir``. Each timed process builds on its own fresh copy of it (copied untimed), so
both peers always build a first index on the same rows.

Every figure is one new process, as a notebook cell or a dbt run meets it:

* ours: ``import lance_minhash_sql`` + ``connect()`` + ``SELECT * FROM minhash_build(uri,
  'text')``; then in the same process the first ``minhash_search`` (top 10 of a row's
  text) and the first ``minhash_dedup`` (``count(*)``);
* Lance: ``import lance`` + ``lance.dataset(uri)`` + ``create_scalar_index('text',
  'MINHASHLSH')``; then the first ``to_table(nearest=MinHashQuery)`` top 10 of the same
  text (Lance has no dedup);
* the floor: ``import lance_minhash_sql`` + ``connect()`` + ``import lance``, no build: what
  ours pays before any work (DuckDB, pyarrow and Lance imported, the SQL installed);
* ``--compare CHECKOUT``: ours from that checkout as well (its own numba cache, warmed the
  same way), in the same rounds.

The numba cache is warmed first (one untimed process of ours per size: the on-disk cache
under ``NUMBA_CACHE_DIR``, or beside the sources). Then ``--rounds`` rounds alternate the
peers (ours first in even rounds, Lance first in odd ones); medians per peer, and the ratio
of the medians. The machine's load is printed with the figures. The children write and load
``.pyc`` files as a user's Python does, even where the environment sets
``PYTHONDONTWRITEBYTECODE``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

_OURS = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import lance_minhash_sql as lms
con = lms.connect()
con.execute("SET enable_progress_bar = false")
uri, query = sys.argv[1], sys.argv[2]
con.sql(f"SELECT * FROM minhash_build('{uri}', 'text')").fetchall()
t1, c1 = time.perf_counter(), time.process_time()
from lance_minhash_sql.kernels.config import COMPILES, numba_loaded
numba = [numba_loaded()]
hits = con.execute(f"SELECT _rowid FROM minhash_search('{uri}', 'text', ?, 10)", [query]).fetchall()
t2 = time.perf_counter()
numba.append(numba_loaded())
dedup = con.sql(f"SELECT count(*) FROM minhash_dedup('{uri}', 'text')").fetchall()[0][0]
t3 = time.perf_counter()
print(json.dumps({"build": t1 - t0, "build_cpu": c1 - c0, "search": t2 - t1, "dedup": t3 - t2, "hits": len(hits),
                  "dedup_rows": dedup, "compiled": COMPILES.count, "numba": numba, "package": lms.__file__}))
"""

_LANCE = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import lance
uri, query = sys.argv[1], sys.argv[2]
ds = lance.dataset(uri)
ds.create_scalar_index("text", "MINHASHLSH")
t1, c1 = time.perf_counter(), time.process_time()
from lance.query import MinHashQuery
hits = lance.dataset(uri).to_table(nearest=MinHashQuery(query, "text"), limit=10, columns=["_distance"],
                                   with_row_id=True)
t2 = time.perf_counter()
print(json.dumps({"build": t1 - t0, "build_cpu": c1 - c0, "search": t2 - t1, "hits": hits.num_rows}))
"""


def texts(count: int, seed: int = 7) -> list[str]:
    """``count`` real-text rows (``benchmarks/real_text.py``'s, shuffled with ``seed``)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from real_text import MIN_WORDS, rows

    got = [t for t, _, _ in rows([sysconfig.get_paths()["purelib"]]) if len(t.split()) >= MIN_WORDS]
    if len(got) < count:
        raise SystemExit(f"--rows {count}: only {len(got)} real-text rows on this machine")
    random.Random(seed).shuffle(got)
    return got[:count]


def dataset(rows: int, data_dir: str) -> str:
    """The ``rows``-row text dataset under ``data_dir`` (written once, without an index)."""
    uri = os.path.join(data_dir, f"new-process-{rows}.lance")
    if not os.path.exists(uri):
        import lance
        import pyarrow as pa

        lance.write_dataset(pa.table({"text": pa.array(texts(rows), pa.string())}), uri)
    return uri


_FLOOR = r"""
import json, time
t0, c0 = time.perf_counter(), time.process_time()
import lance_minhash_sql as lms
con = lms.connect()
import lance
print(json.dumps({"build": time.perf_counter() - t0, "build_cpu": time.process_time() - c0}))
"""


def _env(root: str) -> dict:
    env = dict(os.environ, LANCE_MINHASH_COMPILE_NOTICE="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = root  # this checkout wins over any installed copy
    if root != ROOT and "NUMBA_CACHE_DIR" in env:  # each checkout its own cache (it keys kernels by source file)
        env["NUMBA_CACHE_DIR"] = os.path.join(env["NUMBA_CACHE_DIR"], "compare")
    return env


def _child(code: str, source: str, query: str, work: str, root: str = ROOT) -> dict:
    uri = os.path.join(work, "copy.lance")
    shutil.rmtree(uri, ignore_errors=True)
    shutil.copytree(source, uri)
    proc = subprocess.run([sys.executable, "-c", code, uri, query], capture_output=True, text=True, env=_env(root),
                          cwd=work)
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _load() -> str:
    return "load average %.2f %.2f %.2f (%d cores)" % (*os.getloadavg(), os.cpu_count())


def run(rows: int, rounds: int, data_dir: str, work: str, compare: str | None = None) -> None:
    source = dataset(rows, data_dir)
    import lance

    query = lance.dataset(source).take([rows // 2], columns=["text"]).column(0)[0].as_py()
    ours = [("ours: import, connect(), minhash_build", _OURS, ROOT)]
    if compare:
        ours.append((f"baseline {os.path.basename(compare.rstrip(os.sep))}: the same", _OURS, compare))
    peers = ours + [("Lance: import, create_scalar_index", _LANCE, ROOT),
                    ("floor: import, connect(), import lance", _FLOOR, ROOT)]
    for _, code, root in ours:  # fills each checkout's numba cache for these calls (untimed)
        warm = _child(code, source, query, work, root)
        assert warm["package"].startswith(root + os.sep), warm["package"]
    got: dict = {label: [] for label, _, _ in peers}
    for r in range(rounds):
        for label, code, root in peers if r % 2 == 0 else peers[::-1]:
            got[label].append(_child(code, source, query, work, root))

    def med(runs, key):
        return statistics.median(x[key] for x in runs) if key in runs[0] else float("nan")

    print(f"\n{rows:,} rows of real text, new process each, numba cache warm, {rounds} rounds alternating "
          f"({_load()})")
    print(f"{'':<44} {'import+build':>12} {'(CPU s)':>8} {'1st search':>11} {'1st dedup':>10}")
    for label, runs in got.items():
        print(f"{label:<44} {med(runs, 'build'):>10.2f} s {med(runs, 'build_cpu'):>8.2f} "
              f"{med(runs, 'search') * 1e3:>8.0f} ms {med(runs, 'dedup') * 1e3:>7.0f} ms")
    lance_runs = got[peers[len(ours)][0]]
    for label, _, _ in ours:
        runs = got[label]
        ratio = med(runs, "build") / med(lance_runs, "build")
        print(f"{label.split(':')[0]} / Lance (medians): import + build {ratio:.2f}x "
              f"(CPU {med(runs, 'build_cpu') / med(lance_runs, 'build_cpu'):.2f}x), first search "
              f"{med(runs, 'search') / med(lance_runs, 'search'):.2f}x; rounds (ours/Lance s): "
              + ", ".join(f"{a['build']:.2f}/{b['build']:.2f}" for a, b in zip(runs, lance_runs))
              + f"; kernels compiled: {sum(x['compiled'] for x in runs)}; numba loaded after the build in "
                f"{sum(x['numba'][0] for x in runs)}/{len(runs)} processes, after the search in "
                f"{sum(x['numba'][1] for x in runs)}/{len(runs)}; dedup rows {runs[0]['dedup_rows']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000, 10_000])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--compare", default=None, metavar="CHECKOUT", help="another checkout of the package to run "
                    "beside this one, in the same rounds")
    args = ap.parse_args()
    os.makedirs(args.data_dir, exist_ok=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}; NUMBA_CPU_NAME={os.environ.get('NUMBA_CPU_NAME', '(native)')}")
    work = tempfile.mkdtemp(prefix="lms-new-process-")
    try:
        for rows in args.rows:
            run(rows, args.rounds, args.data_dir, work, os.path.abspath(args.compare) if args.compare else None)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
