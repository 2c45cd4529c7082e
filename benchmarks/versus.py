"""This checkout against another one (``--old``), operation by operation, in the same rounds.

    git worktree add --detach /path/to/old <commit>
    python benchmarks/versus.py --old /path/to/old --rows 1000000 --repeat 3 --data-dir DIR

One generated corpus (``lance_minhash_sql.faces.corpus.write_corpus``, ``--rows`` rows) is
written once under ``--data-dir``; each checkout gets its own copy, on which it builds its
own index. Every timed operation is a new child process importing that checkout's package
(``PYTHONPATH=<checkout>``, its own ``NUMBA_CACHE_DIR`` under ``--data-dir``), timed inside
the child around the operation alone (wall, and CPU seconds of the process and of any
process it waits for):

* ``build``: ``build_index(uri, "text", threshold=0.8)`` on a fresh copy of the corpus
  (copied untimed before each run);
* ``search p50``: ``--queries`` distinct queries (the first three quarters of the words of
  random rows, the same for both checkouts in a round, other rows in each round) through
  SQL ``minhash_search(uri, 'text', ?, 10)`` on one ``connect()``, the query bound as
  ``?``, after 10 warm-up queries (``benchmarks/sql_search.py``'s protocol); p50 of the
  queries' wall and CPU seconds (the mean CPU, numba's load in the loop included, logged);
* ``search p50, warm``: the same in a process that first answered those 10 and the round's
  other ``--queries`` queries (its kernels loaded), on distinct queries again;
* ``search, first queries``: what a new process pays in all for the queries ``search p50``
  answers (the 10 warm-up queries and the ``--queries`` timed ones, from the first, after
  ``connect()``): wall and CPU seconds of the whole loop, a kernel load in it included. A
  checkout that answers a process's first queries with another engine than its later ones
  shows it here, where the p50 of the queries after the 10th does not;
* ``pairs``: ``pairs(uri, "text", 0.8)``, every batch consumed;
* ``clusters``: ``clusters(uri, "text", 0.8)`` (components, the estimate);
* ``star + exact dedup``: ``keep_flags(uri, "text", 0.8, clustering="star", verify="exact")``.

A first round, untimed, builds each checkout's index and fills its numba cache. Then
``--repeat`` rounds run each operation for both checkouts back to back, the old one first
in even rounds and the new one first in odd ones. Printed: the medians per checkout,
new / old of the medians and the median of each round's new / old (the load drifts from
round to round, the pair of one round shares it; below 1: the new checkout is faster),
the outputs' row counts (they must agree) and the load average before and after.
``--ops`` runs a subset of the operations.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = ("build", "search p50", "search p50, warm", "search, first queries", "pairs", "clusters", "star + exact dedup")
THRESHOLD = 0.8


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def child(op: str, uri: str, queries: str | None) -> dict:
    import lance_minhash_sql as lms

    if op.startswith("search"):
        with open(queries) as f:
            qs = json.load(f)
        con = lms.connect()
        sql = "SELECT * FROM minhash_search('" + uri.replace("'", "''") + "', 'text', ?, 10)"
        if op == "search, first queries":  # the queries "search p50" answers, from the first
            t0, c0 = time.perf_counter(), _cpu()
            hits = sum(len(con.execute(sql, [q]).fetchall()) for q in qs[:10 + (len(qs) - 10) // 2])
            return {"wall": time.perf_counter() - t0, "cpu": _cpu() - c0, "out": hits, "package": lms.__file__}
        skip = 10 if op == "search p50" else (len(qs) + 10) // 2  # 10 warm-up queries, or those and the 1st half
        for q in qs[:skip]:
            con.execute(sql, [q]).fetchall()
        times, cpus, hits = [], [], 0
        for q in qs[skip:skip + (len(qs) - 10) // 2]:
            t0, c0 = time.perf_counter(), _cpu()
            hits += len(con.execute(sql, [q]).fetchall())
            times.append(time.perf_counter() - t0)
            cpus.append(_cpu() - c0)
        return {"wall": statistics.median(times), "cpu": statistics.median(cpus), "cpu_mean": statistics.mean(cpus),
                "out": hits, "package": lms.__file__}
    t0, c0 = time.perf_counter(), _cpu()
    if op == "build":
        lms.build_index(uri, "text", threshold=THRESHOLD)
        out = 0
    elif op == "pairs":
        out = sum(b.num_rows for b in lms.pairs(uri, "text", THRESHOLD))
    elif op == "clusters":
        out = lms.clusters(uri, "text", THRESHOLD).num_rows
    else:
        t = lms.keep_flags(uri, "text", THRESHOLD, clustering="star", verify="exact")
        out = t.num_rows - sum(t.column("keep").to_pylist())
    return {"wall": time.perf_counter() - t0, "cpu": _cpu() - c0, "out": out, "package": lms.__file__}


def run(checkout: str, op: str, uri: str, data_dir: str, label: str, queries: str | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=checkout, NUMBA_CACHE_DIR=os.path.join(data_dir, f"numba-{label}"))
    cmd = [sys.executable, os.path.abspath(__file__), "--child", op, "--uri", uri]
    if queries:
        cmd += ["--queries-file", queries]
    got = subprocess.run(cmd, env=env, cwd=data_dir, capture_output=True, text=True)
    if got.returncode:
        raise SystemExit(f"{label} {op} failed:\n{got.stderr[-3000:]}")
    r = json.loads(got.stdout.strip().splitlines()[-1])
    if not r["package"].startswith(os.path.join(checkout, "")):
        raise SystemExit(f"{label} imported {r['package']}, not {checkout}")
    return r


def write_queries(uri: str, n: int, seed: int, path: str) -> str:
    import lance
    import numpy as np

    ds = lance.dataset(uri)
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(ds.count_rows(), size=n, replace=False))
    qs = [" ".join(t.split()[: max(1, 3 * len(t.split()) // 4)])
          for t in ds.take(ids.tolist(), columns=["text"]).column("text").to_pylist()]
    rng.shuffle(qs)
    with open(path, "w") as f:
        json.dump(qs, f)
    return path


def fresh_copy(src: str, dst: str) -> str:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", help="the other checkout (imported as PYTHONPATH=<old>)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS), metavar="OP", help=f"a subset of {OPS}")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--child", choices=OPS, help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    ap.add_argument("--queries-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.uri, args.queries_file)))
        return
    if not args.old:
        ap.error("--old DIR is required")
    data = os.path.abspath(args.data_dir)
    os.makedirs(data, exist_ok=True)
    base = os.path.join(data, f"versus-{args.rows}.lance")
    if not os.path.exists(base):
        from lance_minhash_sql.faces.corpus import write_corpus

        write_corpus(base + ".tmp", args.rows)
        os.rename(base + ".tmp", base)
    peers = {"old": os.path.abspath(args.old), "new": ROOT}
    indexed = {label: fresh_copy(base, os.path.join(data, f"versus-{args.rows}-{label}.lance")) for label in peers}
    load = [os.getloadavg()]
    got: dict = {}
    for rnd in range(-1, args.repeat):  # round -1: untimed, builds the indexes and fills the numba caches
        queries = write_queries(base, 2 * args.queries + 10, 11 + rnd, os.path.join(data, "versus-queries.json"))
        for op in (args.ops if rnd >= 0 else [o for o in OPS if o == "build" or o in args.ops]):
            for label in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
                uri = indexed[label]
                if op == "build" and rnd >= 0:
                    uri = fresh_copy(base, os.path.join(data, f"versus-{args.rows}-{label}-build.lance"))
                r = run(peers[label], op, uri, data, label, queries if op.startswith("search") else None)
                if rnd >= 0:
                    got.setdefault((op, label), []).append(r)
                    print(f"round {rnd} {label} {op}: {r['wall']:.4f} s, cpu {r['cpu']:.4f} s "
                          f"(mean {r.get('cpu_mean', r['cpu']):.4f}), out {r['out']}", file=sys.stderr)
    for label in peers:
        shutil.rmtree(os.path.join(data, f"versus-{args.rows}-{label}-build.lance"), ignore_errors=True)
    load.append(os.getloadavg())
    print(f"{args.rows:,} rows, medians of {args.repeat} rounds; old {peers['old']}, new {peers['new']}; "
          f"load average {load[0][0]:.2f} / {load[0][1]:.2f} before, {load[1][0]:.2f} / {load[1][1]:.2f} after")
    print(f"{'op':20} {'old wall':>10} {'new wall':>10} {'new/old':>8} {'old cpu':>10} {'new cpu':>10} "
          f"{'new/old':>8}  {'per round: wall':>15} {'cpu':>5}  output rows (old, new)")
    for op in args.ops:
        m = {label: {f: statistics.median(r[f] for r in got[(op, label)]) for f in ("wall", "cpu")} for label in peers}
        paired = {f: statistics.median(n[f] / o[f] for o, n in zip(got[(op, "old")], got[(op, "new")]))
                  for f in ("wall", "cpu")}
        unit, scale = ("ms", 1000) if op.startswith("search p50") else ("s", 1)
        outs = [sorted({r["out"] for r in got[(op, label)]}) for label in peers]
        print(f"{op:20} {m['old']['wall'] * scale:>8.2f}{unit:2} {m['new']['wall'] * scale:>8.2f}{unit:2} "
              f"{m['new']['wall'] / m['old']['wall']:>7.2f}x {m['old']['cpu'] * scale:>8.2f}{unit:2} "
              f"{m['new']['cpu'] * scale:>8.2f}{unit:2} {m['new']['cpu'] / m['old']['cpu']:>7.2f}x  "
              f"{paired['wall']:>14.2f}x {paired['cpu']:>4.2f}x  {outs[0]}, {outs[1]}")


if __name__ == "__main__":
    main()
