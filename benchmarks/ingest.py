"""What a day of a growing corpus costs: a batch ingested into an indexed corpus, beside a
full build and dedup of the same corpus; and the ingest killed at random moments.

    python benchmarks/ingest.py --rows 10000000 --batch 100000 --data-dir DIR
    python benchmarks/ingest.py --rows 1000000 --batch 100000 --data-dir DIR --kill 3

The corpus (``--rows``, the synthetic generator of ``lance-minhash demo``, fragments of
1M rows) is written and indexed once under ``--data-dir``; the batch is the generator's
next ``--batch`` rows (near-duplicates of corpus rows and of each other among them). Each
measurement runs in its own child process after the kernels are loaded on a tiny dataset,
and reports its wall and CPU seconds and the peak of its anonymous memory (``RssAnon``,
sampled every 10 ms) above that baseline, and what the process's segment cache holds at the
end (index data kept for later calls, bounded by its own capacity, ``docs/architecture.md``):

* ``ingest``: ``lms.ingest(corpus, batch, 'text', 0.8, memory_limit=...)`` on a copy of
  the corpus (its data files hard-linked: the corpus is never changed);
* ``build + dedup``: ``lms.build_index`` of the corpus (``threshold=0.8``) then
  ``lms.keep_flags`` (components, the estimate) under the same ``memory_limit``: what a
  pipeline that rebuilt and deduplicated the whole corpus every day would pay.

``--kill N``: ``lance-minhash ingest`` on a copy of the corpus, SIGKILLed at a moment
drawn uniformly over the duration of an uninterrupted run (kernels cached), until N runs
were killed (a run that ended first is not counted). After each kill the corpus must open
at its version before or the one after with an index covering every fragment, a rerun
must complete, and the ``id`` column must hold each row once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
import lance_minhash_sql as lms
from lance_minhash_sql.core.usage import PeakSampler
from lance_minhash_sql.faces.corpus import write_corpus
tiny = {tiny!r}
lms.build_index(tiny, "text", threshold=0.8)
lms.ingest_plan(tiny, tiny, "text", 0.8)
lms.keep_flags(tiny, "text", 0.8)
cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
t0 = time.perf_counter()
with PeakSampler("RssAnon") as peak:
{body}
out["seconds"] = round(time.perf_counter() - t0, 2)
out["cpu_seconds"] = round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu0, 2)
out["anon_mb"] = round(peak.rise("RssAnon"), 1)
out["cache_mb"] = round(lms.cache_info().usage / 2**20, 1)
print(json.dumps(out))
"""

INGEST = """    r = lms.ingest({corpus!r}, {batch!r}, "text", 0.8, memory_limit={limit!r})
    out = dict(appended=r.rows_appended, dropped=r.rows_dropped, action=r.index_action)"""
REBUILD = """    b = lms.build_index({corpus!r}, "text", threshold=0.8, memory_limit={limit!r})
    f = lms.keep_flags({corpus!r}, "text", 0.8, memory_limit={limit!r})
    out = dict(indexed=b.rows_indexed, clustered=f.num_rows)"""


def copy_corpus(src: str, dst: str) -> str:
    """A copy whose data files and index segments are hard links (they are never rewritten)."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=os.link)
    for d in ("_versions", "_transactions"):  # manifests are rewritten: real copies
        shutil.rmtree(os.path.join(dst, d), ignore_errors=True)
        shutil.copytree(os.path.join(src, d), os.path.join(dst, d))
    return dst


def child(body: str, tiny: str) -> dict:
    code = CHILD.format(root=ROOT, tiny=tiny, body=body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def covered(uri: str) -> bool:
    import lance
    import lance_minhash_sql as lms

    frags = {f.fragment_id for f in lance.dataset(uri).get_fragments()}
    segs = lms.connect().sql("SELECT fragment_ids FROM minhash_indexes(?)", params=[uri]).fetchall()
    return frags <= set().union(*(set(s[0]) for s in segs))


def kill_runs(corpus: str, batch: str, work: str, times: int, seed: int) -> None:
    import lance
    import numpy as np

    cli = [sys.executable, "-m", "lance_minhash_sql.faces.cli", "ingest"]
    for _ in range(2):  # the first run may compile kernels: the second one's duration is the run's
        full = copy_corpus(corpus, os.path.join(work, "kill-full.lance"))
        t0 = time.perf_counter()
        subprocess.run(cli + [full, batch, "text", "--quiet"], check=True, capture_output=True)
        duration = time.perf_counter() - t0
    expected = lance.dataset(full).count_rows()
    print(f"uninterrupted ingest: {duration:.1f} s, {expected:,} rows after it")
    rng = np.random.default_rng(seed)
    killed = 0
    while killed < times:
        target = copy_corpus(corpus, os.path.join(work, "kill.lance"))
        before = lance.dataset(target).version
        at = float(rng.uniform(0, 0.95 * duration))
        proc = subprocess.Popen(cli + [target, batch, "text", "--quiet"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(at)
        proc.send_signal(signal.SIGKILL)
        code = proc.wait()
        ds = lance.dataset(target)
        state = "before" if ds.version == before else "after" if ds.version == before + 1 else f"v{ds.version}"
        ok = state in ("before", "after") and covered(target)
        rerun = subprocess.run(cli + [target, batch, "text", "--quiet"], capture_output=True, text=True)
        ids = lance.dataset(target).to_table(columns=["id"]).column("id").to_numpy()
        whole = rerun.returncode == 0 and ids.size == np.unique(ids).size == expected and covered(target)
        killed += code == -signal.SIGKILL  # a run that ended before its moment is not counted
        what = f"kill {killed}" if code == -signal.SIGKILL else "ended first"
        print(f"{what}: SIGKILL at {at:.2f} s (exit {code}): the corpus opened at the version {state} the "
              f"ingest, index covering it: {ok}; rerun completed with every id once ({ids.size:,} rows): {whole}")
        shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(full, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--memory-limit", default="256MiB")
    ap.add_argument("--kill", type=int, default=0, help="kill runs instead of the timing")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import lance_minhash_sql as lms
    from lance_minhash_sql.faces.corpus import write_corpus

    os.makedirs(args.data_dir, exist_ok=True)
    corpus = os.path.join(args.data_dir, f"ingest-corpus-{args.rows}.lance")
    if not os.path.exists(corpus):
        write_corpus(corpus, args.rows, rows_per_fragment=1_000_000)
        lms.build_index(corpus, "text", threshold=0.8)
    batch = os.path.join(args.data_dir, f"ingest-batch-{args.rows}-{args.batch}.lance")
    if not os.path.exists(batch):
        write_corpus(batch, args.batch, start=args.rows)
    tiny = os.path.join(args.data_dir, "ingest-tiny.lance")
    if not os.path.exists(tiny):
        write_corpus(tiny, 2000)
    work = os.path.join(args.data_dir, "ingest-work")
    os.makedirs(work, exist_ok=True)
    print(f"load: {os.getloadavg()[0]:.2f}; corpus {args.rows:,} rows, batch {args.batch:,} rows, "
          f"memory_limit {args.memory_limit}")
    if args.kill:
        kill_runs(corpus, batch, work, args.kill, args.seed)
        return
    target = copy_corpus(corpus, os.path.join(work, "copy.lance"))
    ingest = child(INGEST.format(corpus=target, batch=batch, limit=args.memory_limit), tiny)
    shutil.rmtree(target, ignore_errors=True)
    target = copy_corpus(corpus, os.path.join(work, "copy.lance"))
    rebuild = child(REBUILD.format(corpus=target, limit=args.memory_limit), tiny)
    shutil.rmtree(target, ignore_errors=True)
    for name, r in (("ingest", ingest), ("build + dedup", rebuild)):
        print(f"{name:>14}: {r['seconds']:8.2f} s wall, {r['cpu_seconds']:8.2f} s CPU, {r['anon_mb']:7.1f} MB "
              f"anonymous peak, of which {r['cache_mb']:.1f} MB the segment cache holds after  "
              f"{json.dumps({k: v for k, v in r.items() if k not in ('seconds', 'cpu_seconds', 'anon_mb', 'cache_mb')})}")
    print(f"ingest / (build + dedup): {ingest['seconds'] / rebuild['seconds']:.1%} of the wall time, "
          f"{ingest['cpu_seconds'] / rebuild['cpu_seconds']:.1%} of the CPU (at most 5% asked)")


if __name__ == "__main__":
    main()
