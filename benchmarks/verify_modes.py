"""What the trustworthy modes cost: exact verification and star clustering against the
estimate, side by side in one run, on each executor.

    python benchmarks/verify_modes.py --rows 1000000 --memory-limit 128MiB --repeat 3
    python benchmarks/verify_modes.py --rows 1000000 --ray-address 127.0.0.1:6379   # + the Ray executor
    python benchmarks/verify_modes.py --rows 1000000 --sql   # + each mode through DuckDB SQL
    python benchmarks/verify_modes.py --rows 10000000 --modes pairs --repeat 1   # the pairs modes alone
    python benchmarks/verify_modes.py --rows 10000000 --modes dedup --repeat 1 --trace   # + each step's memory

Uses the dataset of ``benchmarks/pairs.py`` (``bench-data/pairs-<rows>.lance``, written and
indexed if missing). Every measurement runs in its own child process after the kernels
are loaded on a tiny dataset (the "baseline"), so each reports its own:

* ``seconds`` (wall) and ``cpu_seconds`` of the process (with the Ray executor: the
  driver's, and ``task_cpu_seconds``, the sum over the shuffle's tasks);
* ``anon_mb``: the peak of the process's anonymous memory (``RssAnon``, sampled every
  5 ms) above the baseline, against ``memory_limit`` (file pages of memory-mapped
  segments are not anonymous memory: the OS can drop them).

Modes: ``pairs`` with ``verify := 'estimate'`` and ``'exact'``; ``dedup`` (the keep flags
of ``minhash_dedup``) with components and the estimate, and with star and exact
verification; with ``--sql`` each mode also through DuckDB (``minhash_pairs`` and
``minhash_dedup`` with bound parameters, counted in SQL), against its Python twin. Runs
are interleaved (estimate, exact, estimate, ...) and medians compared; the printed ratios
are exact / estimate of the same run. State the machine's load (printed) with the figures.
``result MB`` is the returned keep-flags table's (the caller's, beside the budget:
``core/budget.py``); ``--trace`` prints, for the last run of each mode, the anonymous
memory at entry and the peak of each step of :data:`TRACED` (the rest of the call as
``rest``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from pairs import corpus_dataset, warm_kernels  # noqa: E402

MODES = ("pairs-estimate", "pairs-exact", "dedup-components-estimate", "dedup-star-exact")
SQL_MODES = tuple(f"sql-{m}" for m in MODES)  # the same through DuckDB: what a SQL user runs
PAIRS_SQL = ("SELECT count(*) FROM minhash_pairs(?, 'text', ?, verify := ?, memory_limit := ?, executor := ?, "
             "ray_address := ?)")
DEDUP_SQL = ("SELECT count(*) FILTER (WHERE NOT keep) FROM minhash_dedup(?, 'text', ?, clustering := ?, verify := ?, "
             "memory_limit := ?, executor := ?, ray_address := ?)")
THRESHOLD = 0.8


# the steps --trace labels, as (module, function): what a phase's anonymous memory is held by
TRACED = (("lance_minhash_sql.selfjoin.steps", "shards_for"), ("lance_minhash_sql.selfjoin.steps", "prepared"),
          ("lance_minhash_sql.selfjoin.steps", "united"), ("lance_minhash_sql.selfjoin.steps", "row_ids"),
          ("lance_minhash_sql.selfjoin.steps", "clusters_table"), ("lance_minhash_sql.selfjoin.dedup", "keep_order"),
          ("lance_minhash_sql.selfjoin.dedup", "star_twins"), ("lance_minhash_sql.selfjoin.dedup", "star_members"))


class PhaseTrace:
    """``RssAnon`` sampled every ``every`` seconds on a thread, each reading filed under the
    innermost traced step running (:data:`TRACED`, wrapped in their callers' modules; the
    rest of the call is ``"rest"``): per phase its value at the first entry and its peak, in
    MB above the baseline ``start``."""

    def __init__(self, start: float, every: float = 0.005):
        import importlib
        import threading

        self.start, self.every, self.stack, self.phases = start, every, ["rest"], {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        for module, name in TRACED:
            mod = importlib.import_module(module)
            setattr(mod, name, self._wrap(name, getattr(mod, name)))

    def _wrap(self, name, fn):
        def traced(*args, **kwargs):
            self.stack.append(name)
            self._sample(entry=True)
            try:
                return fn(*args, **kwargs)
            finally:
                self._sample()
                self.stack.pop()
        return traced

    def _sample(self, entry: bool = False) -> None:
        from lance_minhash_sql.core.usage import status_mb

        mb = status_mb("RssAnon").get("RssAnon", 0.0) - self.start
        phase = self.phases.setdefault(self.stack[-1], {"entry_mb": mb, "peak_mb": mb})
        phase["peak_mb"] = max(phase["peak_mb"], mb)

    def _run(self) -> None:
        while not self._done.wait(self.every):
            self._sample()

    def __enter__(self) -> "PhaseTrace":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def child(mode: str, uri: str, memory_limit: str, executor: str, ray_address: str | None, trace: bool = False) -> dict:
    import contextlib

    import lance_minhash_sql as lms
    import pyarrow.compute as pc

    from lance_minhash_sql.core.usage import PeakSampler, cpu_seconds, status_mb

    warm_kernels()
    tracer = (PhaseTrace(status_mb("RssAnon").get("RssAnon", 0.0)) if trace and executor == "local"
              else contextlib.nullcontext())
    stats: dict = {}
    if executor == "ray":  # the engine's entries with a RayExecutor that records the shuffle's per-task figures
        from functools import partial

        from lance_minhash_sql.extras.ray_executor import RayExecutor
        from lance_minhash_sql.selfjoin.dedup import keep_flags
        from lance_minhash_sql.selfjoin.pairs import pairs

        ray_exec = RayExecutor(ray_address, stats=stats)
        pairs_fn, flags_fn = partial(pairs, executor=ray_exec), partial(keep_flags, executor=ray_exec)
    else:
        pairs_fn, flags_fn = lms.pairs, lms.keep_flags
    con = lms.connect() if mode.startswith("sql-") else None  # (a user's connection is open before the statement)
    result_mb = 0.0  # (the returned table's, held by the caller; the pairs' batches are dropped as counted)
    c0, t0 = cpu_seconds(), time.perf_counter()
    with PeakSampler("RssAnon", every=0.005) as anon, tracer:
        if con is not None:
            parts = mode.split("-")[1:]
            query, params = ((PAIRS_SQL, [parts[1]]) if parts[0] == "pairs" else (DEDUP_SQL, parts[1:]))
            n = con.sql(query, params=[uri, THRESHOLD, *params, memory_limit, executor, ray_address]).fetchall()[0][0]
        elif mode.startswith("pairs"):
            verify = mode.split("-")[1]
            n = sum(b.num_rows for b in pairs_fn(uri, "text", THRESHOLD, verify=verify, memory_limit=memory_limit))
        else:
            _, clustering, verify = mode.split("-")
            t = flags_fn(uri, "text", THRESHOLD, clustering=clustering, verify=verify, memory_limit=memory_limit)
            n = t.num_rows - int(pc.sum(t.column("keep")).as_py() or 0)
            result_mb = t.nbytes / 2**20
    out = {"mode": mode, "executor": executor, "rows_out": n, "seconds": time.perf_counter() - t0,
           "cpu_seconds": cpu_seconds() - c0, "anon_mb": anon.rise("RssAnon"), "result_mb": result_mb,
           "baseline_anon_mb": anon.start.get("RssAnon", 0.0)}
    if isinstance(tracer, PhaseTrace):
        out["phases"] = tracer.phases
    if stats.get("tasks"):
        out["task_cpu_seconds"] = sum(s["cpu_seconds"] for s in stats["tasks"].values())
        out["task_peak_mb"] = max(s["peak_mb"] for s in stats["tasks"].values())
        out["task_anon_mb"] = max(s.get("anon_mb", 0.0) for s in stats["tasks"].values())
    return out


def run_child(mode: str, uri: str, args, executor: str) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--uri", uri, "--memory-limit", args.memory_limit,
           "--executor", executor] + (["--ray-address", args.ray_address] if args.ray_address else []) + (
               ["--trace"] if args.trace else [])
    got = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(got.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--memory-limit", default="128MiB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ray-address", default=None, help="also run the Ray executor on this cluster")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--sql", action="store_true", help="also run each mode through DuckDB SQL")
    ap.add_argument("--modes", choices=("all", "pairs", "dedup"), default="all",
                    help="the pairs modes alone, the dedup modes alone, or all")
    ap.add_argument("--trace", action="store_true",
                    help="per step of the local executor, its anonymous memory at entry and its peak (MB)")
    ap.add_argument("--child", choices=MODES + SQL_MODES, help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    ap.add_argument("--executor", default="local", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.uri, args.memory_limit, args.executor, args.ray_address, args.trace)))
        return
    from lance_minhash_sql.core.sizes import parse_bytes

    budget_mb = parse_bytes(args.memory_limit, "memory_limit") / 2**20
    executors = ["local"] + (["ray"] if args.ray_address else [])
    modes = tuple(m for m in MODES + (SQL_MODES if args.sql else ())
                  if args.modes == "all" or m.removeprefix("sql-").startswith(args.modes))
    results = []
    print(f"load average {os.getloadavg()}, cpu {_cpu()}, memory_limit {args.memory_limit}")
    for rows in args.rows:
        uri = corpus_dataset(rows, args.data_dir)
        got: dict = {}
        for _ in range(args.repeat):
            for executor in executors:
                for mode in modes:
                    r = run_child(mode, uri, args, executor)
                    got.setdefault((executor, mode), []).append(r)
                    results.append({"rows": rows, **r})
        print(f"\n{rows:,} rows (medians of {args.repeat}; anon: peak above the baseline, budget {budget_mb:.0f} MB)")
        print(f"{'executor':8} {'mode':32} {'rows out':>10} {'wall s':>8} {'cpu s':>8} {'task cpu s':>10} "
              f"{'anon MB':>8} {'result MB':>9}")
        med = {key: {f: statistics.median(r[f] for r in rs) for f in ("seconds", "cpu_seconds", "anon_mb", "result_mb")}
               for key, rs in got.items()}
        for (executor, mode), rs in got.items():
            m = med[(executor, mode)]
            task = statistics.median(r.get("task_cpu_seconds", float("nan")) for r in rs)
            print(f"{executor:8} {mode:32} {rs[0]['rows_out']:>10,} {m['seconds']:>8.2f} {m['cpu_seconds']:>8.2f} "
                  f"{task:>10.2f} {m['anon_mb']:>8.0f} {m['result_mb']:>9.0f}")
            for phase, v in rs[-1].get("phases", {}).items():  # (the last run's)
                print(f"{'':8}   {phase:30} anon MB at entry {v['entry_mb']:>6.0f}, peak {v['peak_mb']:>6.0f}")
        for executor in executors:
            for prefix in ("", "sql-")[:1 + args.sql]:
                for slow, fast in (("pairs-exact", "pairs-estimate"), ("dedup-star-exact", "dedup-components-estimate")):
                    if (executor, prefix + slow) not in med:
                        continue
                    a, b = med[(executor, prefix + slow)], med[(executor, prefix + fast)]
                    print(f"{executor}: {prefix + slow} / {prefix + fast}: {a['seconds'] / b['seconds']:.2f}x wall, "
                          f"{a['cpu_seconds'] / b['cpu_seconds']:.2f}x cpu")
            if args.sql:
                for mode in (m for m in MODES if (executor, m) in med):
                    a, b = med[(executor, "sql-" + mode)], med[(executor, mode)]
                    print(f"{executor}: sql-{mode} / {mode}: {a['seconds'] / b['seconds']:.2f}x wall, "
                          f"{a['cpu_seconds'] / b['cpu_seconds']:.2f}x cpu")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    main()
