"""The dry run (``estimate``) against the full self-join it projects, at 1M and 10M rows.

    nice -n 5 python benchmarks/estimate.py --rows 1000000 --data-dir /tmp/bench
    nice -n 5 python benchmarks/estimate.py --rows 1000000 10000000 --data-dir /tmp/bench
    nice -n 5 python benchmarks/estimate.py --rows 1000000 --thresholds 0.8 --data-dir /tmp/bench

For each size, on the synthetic corpus (``corpus-<rows>.lance`` under ``--data-dir``, written
and indexed (k=128, b=16) once and then reused; ``--corpus few``: ``few-<rows>.lance``, no
boilerplate and sources drawn uniformly, whose near-duplicates do not grow with the rows), and each threshold (0.7, 0.8, 0.9), each
in its own child process (so each peak RSS, ``VmHWM``, is its own), one right after the
other so that both see the same load:

* *estimate*: ``lms.estimate(uri, "text", thresholds=[t], sample_rows=2000,
  memory_limit=...)`` as a user calls it, in a process that has just imported the package
  (numba's cache warm: a throwaway child loads the kernels first): its wall time, and
  the same call again with another seed in the same child (what a second call costs);
* *full*, three runs, each in its own process whose self-join kernels are loaded (the
  pairs and clusters of a 2,000-row corpus first, as after a dry run in the same
  session): ``lms.pairs(uri, "text", t, memory_limit=...)`` consumed to the end,
  ``lms.clusters(...)`` (components) and ``lms.dedup(...)`` without an output (it counts
  the rows it would remove): their wall and CPU time, peak RSS, and for pairs the pairs
  and the bytes of the temporary files (exact verification's shingle sets).

Printed side by side, for pairs, clusters and dedup: the projected seconds, CPU seconds
and peak memory (the dry run's ``seconds``, ``clusters_seconds``, ``dedup_seconds``, and
their ``peak_memory``) against the measured ones (ratio projected / measured); for pairs
also the temporary disk and the estimated pairs against the full run's, for dedup the
estimated rows dropped (components) against those it removes. Last, the dry run's own
wall and CPU seconds at each size (its first call in a process, which loads numba's
cached kernels, and a second one). The machine is shared: the load average and the cores the
projection gives the engine's threads (``parallel``, from the load average) are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

_CHILD_ESTIMATE = r"""
import json, sys, time
import lance_minhash_sql as lms
from lance_minhash_sql.diagnostics import calibration, costs
import lance_minhash_sql.diagnostics.estimate as E
uri, t, limit, verify = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
seen = {}
calibrate, project = calibration.calibrate, costs.project
def spy_calibrate(*a, **k):
    seen["rates"] = r = calibrate(*a, **k)
    return r
def spy_project(*a, **k):
    seen.setdefault("projections", []).append(p := project(*a, **k))
    return p
E.calibrate, E.project = spy_calibrate, spy_project
kw = dict(thresholds=[t], sample_rows=2000, memory_limit=limit, verify=verify)
t0, c0 = time.perf_counter(), time.process_time(); tab = lms.estimate(uri, "text", **kw)
first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
out = {"first": first, "table": tab.to_pydict(), "parallel": seen["rates"].parallel,
       "cpu": [p.cpu_seconds for p in seen["projections"]]}  # pairs, clusters, dedup
t0, c0 = time.perf_counter(), time.process_time(); lms.estimate(uri, "text", seed=1, **kw)
out.update(second=time.perf_counter() - t0, second_cpu=time.process_time() - c0, first_cpu=first_cpu)
print(json.dumps(out))
"""

_CHILD_FULL = r"""
import json, os, resource, sys, time
import lance_minhash_sql as lms
from lance_minhash_sql.core.usage import peak_rss_mb
uri, t, limit, verify, tiny, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
for b in lms.pairs(tiny, "text", t, verify=verify):  # the self-join's kernels loaded
    pass
lms.clusters(tiny, "text", t, verify=verify)
from lance_minhash_sql.selfjoin import shingles
files = []  # the temporary files of exact verification's shingle sets
class Recorded(shingles.AppendedValues):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        files.append(self)
shingles.AppendedValues = Recorded
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c0, t0 = cpu(), time.perf_counter()
count = 0
if kind == "pairs":
    for b in lms.pairs(uri, "text", t, memory_limit=limit, verify=verify):
        count += b.num_rows
elif kind == "clusters":
    count = lms.clusters(uri, "text", t, memory_limit=limit, verify=verify).num_rows
else:  # a dedup that counts what it would remove (no output)
    count = lms.dedup(uri, "text", t, memory_limit=limit, verify=verify).removed
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": cpu() - c0, "peak": peak_rss_mb() * 2**20,
                  "count": count, "temp": sum(f.size * f.dtype.itemsize for f in files)}))
"""

_WARM = r"""
import lance_minhash_sql as lms
lms.warmup()
"""


def _child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _corpus(data_dir: str, rows: int, kind: str = "synthetic") -> str:
    import lance_minhash_sql as lms
    from lance_minhash_sql.faces.corpus import CorpusSpec
    from lance_minhash_sql.index.info import index_segments

    name = "corpus" if kind == "synthetic" else kind
    uri = os.path.join(data_dir, f"{name}-{rows}.lance")
    if not os.path.exists(uri):
        spec = CorpusSpec() if kind == "synthetic" else CorpusSpec(source_skew=1.0, boilerplate_fraction=0.0)
        lms.write_corpus(uri, rows, spec, progress=rows > 100_000)
    if not index_segments(uri):
        lms.build_index(uri, "text", progress=rows > 100_000)
    return uri


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.7, 0.8, 0.9])
    ap.add_argument("--memory-limit", default="256MiB")
    ap.add_argument("--verify", default="estimate", choices=["estimate", "exact"])
    ap.add_argument("--data-dir", default="/tmp/bench")
    ap.add_argument("--corpus", default="synthetic", choices=["synthetic", "few"],
                    help="synthetic: the generator's defaults (boilerplate and clusters that grow with the rows); "
                         "few: no boilerplate, sources drawn uniformly (near-duplicates that do not grow with the rows)")
    args = ap.parse_args()
    os.makedirs(args.data_dir, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.2f}; {_cpu()}; memory_limit {args.memory_limit}; "
          f"verify {args.verify}", flush=True)
    subprocess.run([sys.executable, "-c", _WARM], check=True, capture_output=True)
    tiny = _corpus(args.data_dir, 2000)
    own = []  # the dry run's own seconds per size
    for rows in args.rows:
        uri = _corpus(args.data_dir, rows, args.corpus)
        print(f"\n{rows:,} rows", flush=True)
        lines = {k: [] for k in KINDS}
        for t in args.thresholds:
            common = (uri, str(t), args.memory_limit, args.verify)
            est = _child(_CHILD_ESTIMATE, *common)
            own.append((rows, t, est["first"], est["second"], est["first_cpu"], est["second_cpu"], est["parallel"]))
            table = est["table"]
            for i, kind in enumerate(KINDS):
                full = _child(_CHILD_FULL, *common, tiny, kind)
                prefix = "" if kind == "pairs" else f"{kind}_"
                ps, pm, pc = table[f"{prefix}seconds"][0], table[f"{prefix}peak_memory"][0], est["cpu"][i]
                line = (f"{t:.2f} | {os.getloadavg()[0]:.1f} | {ps:.2f} / {full['seconds']:.2f} "
                        f"({ps / full['seconds']:.2f}x) | {pc:.2f} / {full['cpu']:.2f} ({pc / full['cpu']:.2f}x) | "
                        f"{pm / 2**20:.0f} / {full['peak'] / 2**20:.0f} ({pm / full['peak']:.2f}x)")
                if kind == "pairs":
                    line += (f" | {table['temp_disk'][0] / 2**20:.1f} / {full['temp'] / 2**20:.1f} | "
                             f"{table['pairs'][0]:,.0f} / {full['count']:,}")
                elif kind == "dedup":
                    line += f" | {table['rows_dropped_components'][0]:,.0f} / {full['count']:,}"
                lines[kind].append(line)
                print(f"  {kind} {line}", flush=True)
        for kind in KINDS:
            print(f"\n{rows:,} rows, {kind}: threshold | load | seconds proj / full (ratio) | "
                  "CPU s proj / full (ratio) | peak MB proj / full (ratio)"
                  + {"pairs": " | temp disk MB proj / full | pairs est / full",
                     "dedup": " | rows dropped est / full", "clusters": ""}[kind])
            for line in lines[kind]:
                print(line)
    print("\nthe dry run itself (2,000 rows): rows | threshold | seconds first call / second call | "
          "CPU seconds first / second | parallel")
    for rows, t, first, second, first_cpu, second_cpu, par in own:
        print(f"{rows:,} | {t:.2f} | {first:.2f} / {second:.2f} | {first_cpu:.2f} / {second_cpu:.2f} | {par:.2f}")


KINDS = ("pairs", "clusters", "dedup")


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU unknown"


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"\ntotal {time.time() - t0:.0f} s")
