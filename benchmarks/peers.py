"""Dedup end to end against its peers, each in a process of its own as its README runs it,
tokenization included, with the precision of what each puts in one group.

    python benchmarks/peers.py --source DIR/real.lance --data-dir DIR
    python benchmarks/peers.py --source DIR/real.lance --data-dir DIR --datatrove DIR/dtvenv
    python benchmarks/peers.py --source DIR/real.lance --data-dir DIR --long-rows 3000 --short-rows 20000

Two corpora: the first ``--long-rows`` rows (default 40,000) of ``--source``, the real text
``benchmarks/real_text.py`` writes (long rows: docstrings, licences, README paragraphs);
and ``--short-rows`` rows (default 1,000,000) of the generated corpus (``write_corpus``,
short rows). Each is written once under ``--data-dir`` as a Lance dataset with a ``text``
column and no index; every peer that writes into the dataset gets a fresh copy of it
(copied before its timing starts).

Peers, each a new Python process started by ``quality.in_process`` (wall; CPU of the
process and its descendants; peak RSS of the process tree), threshold 0.8, 128 hashes,
16 bands, 3-word shingles:

* ``ours, components``: ``import lance_minhash_sql as lms``, ``lms.build_index(uri,
  "text", threshold=0.8)`` (16 bands x 8 rows at k=128), ``lms.keep_flags(uri, "text",
  0.8)`` (connected components, the MinHash estimate), as the README's Python tour;
* ``ours, star, exact``: the same build, then ``keep_flags(..., clustering="star",
  verify="exact")``;
* ``rensa``: rensa 0.5.0's README ("Keep unique documents"): ``RMinHashDeduplicator(
  threshold=0.8, num_perm=128, use_lsh=True, num_bands=16)`` and ``add_pairs`` of
  ``(str(i), tokens)``, the rows read with ``lance.dataset(uri).to_table``, the tokens the
  3-word shingles ``faces/bench.py``'s ``python_shingles`` makes (its source is the
  child's own code: the child imports neither this package nor numba);
* ``datatrove`` (``--datatrove VENV``, opt-in): MinhashDedup's signature, bucket and
  cluster stages (``benchmarks/datatrove_minhash.py``, ``quality.run_datatrove``: the rows
  written to parquet before its timing starts, the virtual environment created from the
  package index if missing);
* ``Lance MINHASHLSH``: ``lance.dataset(uri).create_scalar_index("text", "MINHASHLSH")``
  with Lance's defaults: an index build only, no dedup groups (Lance has no self-join).

The numba cache is warm for ours (``lms.warmup()`` in a process of its own first, then
both of our runs, untimed, on the corpus's first 20,000 rows: ``warmup`` runs no star
clustering);
``--cold`` gives each of our processes an empty ``NUMBA_CACHE_DIR`` instead, so its
figures include compiling every kernel it calls.

**Precision of same-group pairs**: among the pairs of rows a peer puts in one group (ours:
a component, or a star: the center and its twins; rensa: a kept row and the dropped rows
whose duplicate candidates (``get_duplicate_sets``, recomputed after the timing) name it
first among the rows before them; datatrove: a cluster), every pair when there are at most
``--max-pairs`` (200,000), else that many drawn uniformly (with replacement, seeded), the
share whose exact shingle Jaccard is at least 0.7 (``quality.exact_jaccard``: the package's
shingle sets and ``kernels.similarity.pair_jaccard``, one rule for every peer). Rows
dropped: the rows each peer does not keep.
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import types

import numpy as np
import pyarrow as pa

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from quality import exact_jaccard, in_process, run_datatrove  # noqa: E402

THRESHOLD, NUM_HASHES, NUM_BANDS, SHINGLE = 0.8, 128, 16, 3
PRECISION_J = 0.7
RENSA_SEED = 42  # RMinHashDeduplicator's default seed
WARM_ROWS = 20_000  # the warm-up's rows: above core.tuning.PARALLEL_MIN_ROWS, as faces/warmup.py's

_OURS = r"""
import sys
import pyarrow.feather as feather
import lance_minhash_sql as lms
uri, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
lms.build_index(uri, "text", threshold=0.8)
kw = {} if mode == "components" else {"clustering": "star", "verify": "exact"}
feather.write_feather(lms.keep_flags(uri, "text", 0.8, **kw), out)
"""

_RENSA = r"""
import sys
import numpy as np
import lance
from rensa import RMinHashDeduplicator
uri, out = sys.argv[1], sys.argv[2]
texts = lance.dataset(uri).to_table(columns=["text"]).column("text").to_pylist()
dedup = RMinHashDeduplicator(threshold=0.8, num_perm=128, use_lsh=True, num_bands=16)
keep = dedup.add_pairs((str(i), python_shingles(text)) for i, text in enumerate(texts))
np.save(out, np.array(keep, dtype=bool))
"""

_LANCE = r"""
import sys
import lance
lance.dataset(sys.argv[1]).create_scalar_index("text", "MINHASHLSH")
"""

_WARMUP = "import lance_minhash_sql as lms; print(lms.warmup().format())"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _shingles_source() -> str:
    """``python_shingles`` and the compiled patterns it reads, as source for the rensa child."""
    import re

    from lance_minhash_sql.faces.bench import python_shingles

    names = inspect.getclosurevars(python_shingles).globals
    assert all(isinstance(v, re.Pattern) for v in names.values()), names
    patterns = "".join(f"{k} = re.compile({v.pattern!r}, {int(v.flags)})\n" for k, v in names.items())
    return "import re\n" + patterns + inspect.getsource(python_shingles)


def long_corpus(source: str, rows: int, data_dir: str) -> str:
    import lance

    uri = os.path.join(data_dir, f"long-{rows}.lance")
    if not os.path.exists(uri):
        table = lance.dataset(source).to_table(columns=["text"], limit=rows)
        if table.num_rows < rows:
            raise SystemExit(f"--long-rows {rows}: {source} has only {table.num_rows:,} rows")
        _log(f"writing {uri}")
        lance.write_dataset(table, uri)
    return uri


def short_corpus(rows: int, data_dir: str) -> str:
    from lance_minhash_sql.faces.corpus import write_corpus

    uri = os.path.join(data_dir, f"short-{rows}.lance")
    if not os.path.exists(uri):
        _log(f"writing {uri}")
        write_corpus(uri, rows)
    return uri


class Rows:
    """The corpus's texts and row ids in scan order, which is row-id order (a position is
    an index into them)."""

    def __init__(self, uri: str):
        import lance

        from lance_minhash_sql.core.params import MinHashParams
        from lance_minhash_sql.index.sign import signer_for

        t = lance.dataset(uri).to_table(columns=["text"], with_row_id=True)
        self.rowids = t.column("_rowid").to_numpy()
        # rensa's and datatrove's keys are scan positions: scan order must be row-id order
        assert (np.diff(self.rowids.astype(np.int64)) > 0).all(), "a corpus scanned in row-id order"
        self.texts = t.column("text").combine_chunks()
        self.signer = signer_for(MinHashParams(num_hashes=NUM_HASHES, num_bands=NUM_BANDS, shingle_size=SHINGLE))

    def pos(self, rowids) -> np.ndarray:
        return np.searchsorted(self.rowids, np.asarray(rowids, dtype=np.uint64))


def group_pairs(group: np.ndarray, cap: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Pairs of positions with one group label (``-1``: in no group): all of them when
    there are at most ``cap``, else ``cap`` drawn uniformly over all such pairs (with
    replacement). Returns ``(a, b, number of same-group pairs)``."""
    members = np.flatnonzero(group >= 0)
    members = members[np.argsort(group[members], kind="stable")]
    labels = group[members]
    if members.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), 0
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    sizes = np.diff(np.r_[starts, labels.size])
    counts = sizes * (sizes - 1) // 2
    total = int(counts.sum())
    if total <= cap:
        a, b = [], []
        for s in np.unique(sizes[sizes > 1]):
            i, j = np.triu_indices(int(s), 1)
            first = starts[sizes == s][:, None]
            a.append(members[(first + i).ravel()])
            b.append(members[(first + j).ravel()])
        if not a:
            return np.empty(0, np.int64), np.empty(0, np.int64), 0
        return np.concatenate(a), np.concatenate(b), total
    rng = np.random.default_rng(seed)
    g = np.searchsorted(np.cumsum(counts), rng.integers(0, total, cap), side="right")
    i = rng.integers(0, sizes[g])
    j = rng.integers(0, sizes[g] - 1)
    j += j >= i
    return members[starts[g] + i], members[starts[g] + j], total


def precision(rows: Rows, group: np.ndarray, cap: int, seed: int) -> tuple[float | None, int, int]:
    """(share of same-group pairs with exact Jaccard >= PRECISION_J, pairs scored, same-group pairs)."""
    a, b, total = group_pairs(group, cap, seed)
    if a.size == 0:
        return None, 0, 0
    j = exact_jaccard(rows.signer, rows.texts, a, b)
    return float((j >= PRECISION_J).mean()), int(a.size), total


def _copy(base: str, work: str) -> str:
    uri = os.path.join(work, "run.lance")
    shutil.rmtree(uri, ignore_errors=True)
    shutil.copytree(base, uri)
    return uri


def run_ours(base: str, rows: Rows, mode: str, work: str, cold: bool) -> dict:
    import pyarrow.feather as feather

    uri, out = _copy(base, work), os.path.join(work, f"ours-{mode}.arrow")
    saved = os.environ.get("NUMBA_CACHE_DIR")
    cache = tempfile.mkdtemp(prefix="numba-cold-", dir=work) if cold else None
    if cache:
        os.environ["NUMBA_CACHE_DIR"] = cache
    try:
        cost = in_process([sys.executable, "-c", _OURS, uri, out, mode], os.path.join(work, f"ours-{mode}.log"))
    finally:
        if cache:
            os.environ.pop("NUMBA_CACHE_DIR")
            if saved is not None:
                os.environ["NUMBA_CACHE_DIR"] = saved
            shutil.rmtree(cache, ignore_errors=True)
    d = feather.read_table(out).to_pydict()
    os.remove(out)
    shutil.rmtree(uri)
    pos = rows.pos(d["_rowid"])
    keep = np.array(d["keep"], dtype=bool)
    group = np.full(rows.rowids.size, -1, dtype=np.int64)
    if mode == "components":
        group[pos] = np.array(d["cluster_id"], dtype=np.int64)
    else:
        twin = rows.pos([t if t is not None else 0 for t in d["twin_rowid"]])
        group[pos] = np.where(keep, pos, twin)
    return dict(cost, dropped=int((~keep).sum()), group=group)


def run_rensa(base: str, rows: Rows, work: str) -> dict:
    """rensa's deduplicator, timed; then, untimed, each dropped row's group: the kept row
    its duplicate candidates name first among the rows before it (an index of the kept
    rows alone, queried with the dropped rows' shingles)."""
    from rensa import RMinHashDeduplicator

    from lance_minhash_sql.faces.bench import python_shingles

    out = os.path.join(work, "rensa-keep.npy")
    cost = in_process([sys.executable, "-c", _shingles_source() + _RENSA, base, out], os.path.join(work, "rensa.log"))
    keep = np.load(out)
    os.remove(out)
    texts = rows.texts.to_pylist()
    kept, dropped = np.flatnonzero(keep), np.flatnonzero(~keep)
    index = RMinHashDeduplicator(threshold=THRESHOLD, num_perm=NUM_HASHES, use_lsh=True, num_bands=NUM_BANDS,
                                 seed=RENSA_SEED)
    again = index.add_pairs((str(i), python_shingles(texts[i])) for i in kept.tolist())
    assert all(again), "the kept rows, added again in their order, are all kept"
    sets = index.get_duplicate_sets([python_shingles(texts[i]) for i in dropped.tolist()])
    group = np.full(keep.size, -1, dtype=np.int64)
    unmatched = 0
    for i, s in zip(dropped.tolist(), sets):
        keys = sorted(int(k) for k in s)
        before = [k for k in keys if k < i]
        if not keys:
            unmatched += 1
            continue
        g = (before or keys)[0]
        group[i] = group[g] = g
    return dict(cost, dropped=int(dropped.size), group=group, unmatched=unmatched)


def run_lance(base: str, work: str) -> dict:
    uri = _copy(base, work)
    cost = in_process([sys.executable, "-c", _LANCE, uri], os.path.join(work, "lance.log"))
    shutil.rmtree(uri)
    return cost


def warm(base: str, work: str) -> None:
    """Both of our runs, untimed, on the first WARM_ROWS rows of the corpus: the kernels
    they call that ``lms.warmup()`` does not (star clustering's) land in numba's cache."""
    import lance

    uri = os.path.join(work, "warm.lance")
    lance.write_dataset(lance.dataset(base).to_table(columns=["text"], limit=WARM_ROWS), uri)
    for mode in ("components", "star"):
        subprocess.run([sys.executable, "-c", _OURS, uri, os.path.join(work, "warm.arrow"), mode], check=True)
    shutil.rmtree(uri)
    os.remove(os.path.join(work, "warm.arrow"))


def run_size(name: str, base: str, args, work: str) -> None:
    import pyarrow.compute as pc

    if not args.cold:
        _log(f"{name}: warming the numba cache for star clustering ({WARM_ROWS:,} rows)")
        warm(base, work)
    load = os.getloadavg()[0]
    rows = Rows(base)
    n = rows.rowids.size
    avg = pc.sum(pc.binary_length(rows.texts)).as_py() / max(n, 1)
    results = []
    for mode, label in (("components", "ours, components (build_index + keep_flags)"),
                        ("star", "ours, star, verify='exact'")):
        _log(f"{name}: {label}")
        results.append((label, run_ours(base, rows, mode, work, args.cold)))
    _log(f"{name}: rensa")
    r = run_rensa(base, rows, work)
    results.append((f"rensa 0.5.0 RMinHashDeduplicator ({r['unmatched']:,} dropped rows with no candidate)", r))
    if args.datatrove:
        _log(f"{name}: datatrove")
        dt = run_datatrove(types.SimpleNamespace(rowids=np.arange(n), texts=rows.texts), args.datatrove, work)
        results.append(("datatrove 0.10.1 MinhashDedup", dict(dt, dropped=int((dt["twin"] >= 0).sum()))))
    _log(f"{name}: Lance")
    results.append(("Lance MINHASHLSH create_scalar_index (build only: no dedup groups)", run_lance(base, work)))
    ours_wall = results[0][1]["wall"]
    print(f"\n## {name}: {n:,} rows, {avg:,.0f} bytes a row on average ({base})")
    cache = "cold (an empty NUMBA_CACHE_DIR per process)" if args.cold else "warm"
    print(f"threshold {THRESHOLD}, k={NUM_HASHES}, {NUM_BANDS} bands, {SHINGLE}-word shingles; numba cache {cache}; "
          f"load average {load:.1f} at the start" + ("" if args.datatrove else "; datatrove not run (--datatrove VENV)"))
    print(f"\n| peer | wall s | CPU s | peak RSS MB | rows dropped | precision: same-group pairs with exact J >= "
          f"{PRECISION_J} (scored / in groups) | wall / ours |")
    print("|---|---|---|---|---|---|---|")
    for i, (label, res) in enumerate(results):
        if "group" in res:
            p, scored, total = precision(rows, res["group"], args.max_pairs, args.seed + i)
            prec = "no pairs" if p is None else f"{p:.4f} ({scored:,} / {total:,})"
            dropped = f"{res['dropped']:,}"
        else:
            prec = dropped = "-"
        ratio = "1.00x" if i == 0 else f"{res['wall'] / ours_wall:.2f}x"
        print(f"| {label} | {res['wall']:.2f} | {res['cpu']:.2f} | {res['rss']:,.0f} | {dropped} | {prec} | {ratio} |")
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", help="real text, as benchmarks/real_text.py writes it (DIR/real.lance); "
                    "without it the long-row table is skipped")
    ap.add_argument("--long-rows", type=int, default=40_000)
    ap.add_argument("--short-rows", type=int, default=1_000_000, help="rows of the generated corpus (0: skip)")
    ap.add_argument("--data-dir", default="/tmp/bench")
    ap.add_argument("--datatrove", metavar="VENV", help="also run datatrove in this virtual environment "
                    "(created with quality.DATATROVE_REQUIREMENTS if missing)")
    ap.add_argument("--cold", action="store_true", help="an empty numba cache for each of our processes")
    ap.add_argument("--max-pairs", type=int, default=200_000, help="same-group pairs scored per peer at most")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.data_dir, exist_ok=True)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    work = tempfile.mkdtemp(prefix="peers-", dir=args.data_dir)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "?")
    print(f"# Dedup end to end against its peers; {model}, {os.cpu_count()} CPUs")
    if not args.datatrove:
        print("datatrove: not run (opt-in: --datatrove VENV)")
    if not args.cold:
        _log("warming the numba cache (lms.warmup() in a process of its own)")
        subprocess.run([sys.executable, "-c", _WARMUP], check=True, stdout=subprocess.DEVNULL)
    try:
        if args.source:
            run_size("long real text", long_corpus(args.source, args.long_rows, args.data_dir), args, work)
        else:
            print("long real text: not run (--source DIR/real.lance, written by benchmarks/real_text.py)")
        if args.short_rows:
            run_size("short generated rows", short_corpus(args.short_rows, args.data_dir), args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
