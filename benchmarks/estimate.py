"""The dry run (``estimate``) against the full self-join it projects, at 1M and 10M rows.

    nice -n 5 python benchmarks/estimate.py --rows 1000000 --data-dir /tmp/bench
    nice -n 5 python benchmarks/estimate.py --rows 1000000 10000000 --data-dir /tmp/bench

For each size, on the synthetic corpus (``corpus-<rows>.lance`` under ``--data-dir``, written
and indexed (k=128, b=16) once and then reused), each in its own child process (so each
peak RSS, ``VmHWM``, is its own):

* *estimate*: ``lms.estimate(uri, "text", thresholds=[0.7, 0.8, 0.9], sample_rows=2000)`` as
  a user calls it, in a process that has just imported the package (numba's cache warm: a
  throwaway child loads the kernels first); its wall time, and the same call again in the
  same child (the calibration is then cached: what a second call costs);
* *full*: ``lms.pairs(uri, "text", t)`` consumed to the end, one child per threshold: its
  wall time, peak RSS (a bit set of the rows seen in a pair included: a byte a row), and
  the share of live rows in a pair.

Printed side by side per threshold: the projected seconds and peak memory of the full run
against the measured ones (ratio projected / measured), and the estimated share of rows in
a pair with its 95 % interval against the measured share. The machine is shared: the load
average is printed; wall times vary about 50 % between runs.
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
uri = sys.argv[1]
t0 = time.perf_counter(); tab = lms.estimate(uri, "text", thresholds=[0.7, 0.8, 0.9], sample_rows=2000)
first = time.perf_counter() - t0
t0 = time.perf_counter(); lms.estimate(uri, "text", thresholds=[0.7, 0.8, 0.9], sample_rows=2000, seed=1)
second = time.perf_counter() - t0
print(json.dumps({"first": first, "second": second, "table": tab.to_pydict()}))
"""

_CHILD_FULL = r"""
import json, sys, time
import numpy as np
import lance
import lance_minhash_sql as lms
from lance_minhash_sql.core.usage import peak_rss_mb
uri, t = sys.argv[1], float(sys.argv[2])
seen = {}  # fragment id -> rows of it in a pair (row ids are row addresses: fragment << 32 | offset)
def mark(rowids):
    frag, off = rowids >> 32, (rowids & 0xFFFFFFFF).astype(np.int64)
    for f in np.unique(frag).tolist():
        o = off[frag == f]
        have = seen.get(f)
        if have is None or have.size <= o.max():
            grown = np.zeros(max(int(o.max()) + 1, 1 << 20), dtype=bool)
            if have is not None:
                grown[:have.size] = have
            seen[f] = have = grown
        have[o] = True
t0 = time.perf_counter()
pairs = 0
for b in lms.pairs(uri, "text", t):
    mark(b.column(0).to_numpy()); mark(b.column(1).to_numpy()); pairs += b.num_rows
seconds = time.perf_counter() - t0
rows = sum(int(v.sum()) for v in seen.values())
print(json.dumps({"seconds": seconds, "peak": peak_rss_mb() * 2**20, "pairs": pairs,
                  "fraction": rows / lance.dataset(uri).count_rows()}))
"""

_WARM = r"""
import lance_minhash_sql as lms
lms.warmup()
"""


def _child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _corpus(data_dir: str, rows: int) -> str:
    import lance_minhash_sql as lms

    uri = os.path.join(data_dir, f"corpus-{rows}.lance")
    if not os.path.exists(uri):
        lms.write_corpus(uri, rows, progress=True)
    from lance_minhash_sql.index.info import index_segments

    if not index_segments(uri):
        lms.build_index(uri, "text", progress=True)
    return uri


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--data-dir", default="/tmp/bench")
    args = ap.parse_args()
    os.makedirs(args.data_dir, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.2f}; {_cpu()}", flush=True)
    subprocess.run([sys.executable, "-c", _WARM], check=True, capture_output=True)
    for rows in args.rows:
        uri = _corpus(args.data_dir, rows)
        est = _child(_CHILD_ESTIMATE, uri)
        table = est["table"]
        print(f"\n{rows:,} rows: estimate {est['first']:.2f} s (first call), "
              f"{est['second']:.2f} s (second call); busy factor {table['busy_factor'][0]:.2f}; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        print("threshold | fraction est [95% interval] | full | seconds proj / full (ratio) | "
              "peak MB proj / full (ratio) | pairs est / full")
        for i, t in enumerate(table["threshold"]):
            full = _child(_CHILD_FULL, uri, str(t))
            ps, pm = table["seconds"][i], table["peak_memory"][i]
            inside = table["duplicate_fraction_low"][i] <= full["fraction"] <= table["duplicate_fraction_high"][i]
            print(f"{t:.2f} | {table['duplicate_fraction'][i]:.4f} [{table['duplicate_fraction_low'][i]:.4f}, "
                  f"{table['duplicate_fraction_high'][i]:.4f}] | {full['fraction']:.4f} {'in' if inside else 'OUT'} | "
                  f"{ps:.2f} / {full['seconds']:.2f} ({ps / full['seconds']:.2f}x) | "
                  f"{pm / 2**20:.0f} / {full['peak'] / 2**20:.0f} ({pm / full['peak']:.2f}x) | "
                  f"{table['pairs'][i]:,.0f} / {full['pairs']:,}", flush=True)


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
