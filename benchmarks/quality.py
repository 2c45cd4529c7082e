"""Dedup quality of the three choices (``docs/dedup-quality.md``): the MinHash estimate,
exact verification (``verify="exact"``) and star clustering (``clustering="star"``), on
the generated corpus, scored by exact shingle Jaccard, with the time of each mode.

    python benchmarks/quality.py --rows 1000000 --data-dir /tmp/bench
    python benchmarks/quality.py --rows 1000000 --data-dir /tmp/bench --datatrove /tmp/dtvenv

``--datatrove VENV`` (opt-in) also runs datatrove's MinhashDedup stages side by side
(``benchmarks/datatrove_minhash.py``: 3-word shingles, 16 bands x 8 rows, 128 hashes) on
the same rows written to parquet, in the virtual environment VENV, which it creates with
``DATATROVE_REQUIREMENTS`` if missing (pip, from the package index). Each side runs in a
process of its own (ours: components and star dedup, and pairs with ``verify="exact"``,
after the numba cache is warm), timed by ``in_process``: wall, CPU seconds of the process
and its children, peak RSS of the process tree. Both are scored on the same reference:
recall of the positive pairs by Jaccard band (a pair counts when both rows end in one
group: a datatrove cluster, one of our components, one of our stars (a center with its
twins), or a reported pair), and precision of what dedup drops: the share of dropped rows
whose kept row (the cluster's kept row, or the twin) has exact Jaccard >= threshold.

The corpus is ``write_corpus(rows, with_truth=True)`` with our index (k=128, b=16,
shingle 3), or ``--uri``: an indexed dataset with a ``text`` column, such as the real text
of ``benchmarks/real_text.py``.

**The reference** (what recall is measured against): every pair of rows of the whole
corpus whose exact shingle Jaccard reaches the threshold (``benchmarks/allpairs.py``: a
prefix-filtered all-pairs join, exact, not from LSH), plus every pair any mode reports;
a reference pair is *positive* when its exact Jaccard reaches the threshold. Exact
Jaccard is the package's own (``Signer.shingle_sets`` and ``kernels.similarity.pair_jaccard``),
which tests/test_verify.py checks against ``lance.tokenize`` and Python sets; the join's
count of positives is checked against it.

**Candidates** (the ceiling of any verification): a positive pair is a candidate when its
two signatures share a band key; the figure is the share of positives that are.

Modes, each timed once in this process after the kernels are compiled (wall and CPU
seconds): ``pairs`` with the estimate and with ``verify="exact"``; ``keep_flags`` with
components and star, each with the estimate and with ``verify="exact"``. For each pairs mode: pairs reported, precision (share with exact
Jaccard >= threshold), recall of positives by Jaccard band. For each clustering: rows
dropped, the share of dropped rows whose kept row (components: the cluster's kept row;
star: the twin) is similar to it, by the estimate and by exact Jaccard, and the recall of
the positives in ``[t, t + 0.1)``: both rows in one group (a component, or a star: a
center with its twins), and at least one of the two rows dropped.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from lance_minhash_sql.core.arrays import readonly  # noqa: E402
from lance_minhash_sql.core.banding import exact_candidate_floor  # noqa: E402
from lance_minhash_sql.core.params import MinHashParams  # noqa: E402
from lance_minhash_sql.core.usage import cpu_seconds  # noqa: E402

EXACT_CHUNK = 1 << 16
DATATROVE_REQUIREMENTS = ["datatrove==0.10.1", "xxhash<4", "regex", "tokenizers", "nltk", "spacy", "pyarrow"]
DATATROVE_PARTS = 2  # parquet files = signature tasks; datatrove's document ids count within a file


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def corpus(rows: int, data_dir: str) -> str:
    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.faces.corpus import write_corpus

    uri = os.path.join(data_dir, f"quality-{rows}.lance")
    if not os.path.exists(os.path.join(uri, "_indices")):
        _log(f"writing {uri}")
        write_corpus(uri, rows, with_truth=True)
        build_index(uri, "text")
    return uri


def exact_jaccard(signer, texts: pa.Array, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact shingle Jaccard of the pairs ``(texts[a[i]], texts[b[i]])``, by the signer's
    shingle sets (``Signer.shingle_sets``, ``kernels.similarity.pair_jaccard``)."""
    from lance_minhash_sql.core.arrays import sorted_unique
    from lance_minhash_sql.kernels.similarity import pair_jaccard

    out = np.empty(a.size, dtype=np.float64)
    for s in range(0, a.size, EXACT_CHUNK):
        pa_, pb = a[s:s + EXACT_CHUNK], b[s:s + EXACT_CHUNK]
        ids = sorted_unique(np.concatenate((pa_, pb)).astype(np.uint64)).astype(np.int64)
        offsets, hashes = signer.shingle_sets(texts.take(pa.array(ids)))
        ia, ib = np.searchsorted(ids, pa_), np.searchsorted(ids, pb)
        out[s:s + pa_.size] = pair_jaccard(readonly(offsets), readonly(hashes), readonly(ia), readonly(ib))
    return out


class Texts:
    """Every row's text and signature, addressed by row id."""

    def __init__(self, uri: str, params: MinHashParams):
        import lance

        from lance_minhash_sql.index.sign import signer_for

        t = lance.dataset(uri).to_table(columns=["text"], with_row_id=True)
        order = np.argsort(t.column("_rowid").to_numpy())
        self.rowids = t.column("_rowid").to_numpy()[order]
        self.texts = t.column("text").combine_chunks().take(pa.array(order))
        self.signer = signer_for(params)
        self.sigs, _ = self.signer.sign(self.texts)
        self.keys = self.signer.band_keys(self.sigs)
        self.k = params.num_hashes

    def pos(self, rowids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.rowids, rowids)

    def jaccard(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Exact shingle Jaccard of position pairs."""
        return exact_jaccard(self.signer, self.texts, a, b)

    def estimate(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        eq = (self.sigs[a] == self.sigs[b]).sum(axis=1)
        return (eq.astype(np.float32) / np.float32(self.k)).astype(np.float64)

    def candidate(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (self.keys[a] == self.keys[b]).any(axis=1)


def reference_pairs(texts: Texts, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, b, jaccard)`` of every pair of positions whose exact Jaccard reaches ``t``,
    over the whole corpus (``benchmarks/allpairs.py``)."""
    from allpairs import all_pairs

    offsets, hashes = texts.signer.shingle_sets(texts.texts)
    return all_pairs(offsets, hashes, t)


def key_of(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lo, hi = np.minimum(a, b).astype(np.uint64), np.maximum(a, b).astype(np.uint64)
    return (lo << np.uint64(32)) | hi


def timed(fn):
    t0, c0 = time.perf_counter(), cpu_seconds()
    out = fn()
    return out, time.perf_counter() - t0, cpu_seconds() - c0


def run_pairs(uri: str, texts: Texts, threshold: float, **kw):
    from lance_minhash_sql.selfjoin.pairs import pairs

    table, wall, cpu = timed(lambda: pa.Table.from_batches(list(pairs(uri, "text", threshold, **kw))))
    a = texts.pos(table.column("left_rowid").to_numpy())
    b = texts.pos(table.column("right_rowid").to_numpy())
    return a, b, wall, cpu


def run_dedup(uri: str, texts: Texts, threshold: float, clustering: str, verify: str):
    from lance_minhash_sql.selfjoin.dedup import keep_flags

    table, wall, cpu = timed(lambda: keep_flags(uri, "text", threshold, clustering=clustering, verify=verify))
    d = table.to_pydict()
    rowid = np.array(d["_rowid"], dtype=np.uint64)
    keep = np.array(d["keep"])
    if clustering == "star":
        twin = np.array([t if t is not None else 0 for t in d["twin_rowid"]], dtype=np.uint64)
    else:
        cluster = np.array(d["cluster_id"], dtype=np.uint64)
        kept = dict(zip(cluster[keep].tolist(), rowid[keep].tolist()))
        twin = np.array([kept[c] for c in cluster.tolist()], dtype=np.uint64)
    drop = ~keep
    a, b = texts.pos(rowid[drop]), texts.pos(twin[drop])
    pos = texts.pos(rowid)
    group = np.full(texts.rowids.size, -1, dtype=np.int64)  # the kept row (star: the center) of each position
    group[pos] = np.where(keep, pos, texts.pos(twin))
    dropped = np.zeros(texts.rowids.size, dtype=bool)
    dropped[pos[drop]] = True
    clustered = rowid.size
    if clustering == "star":  # the rows of the components walked (the stars list fewer: docs/dedup-quality.md)
        from lance_minhash_sql.core.budget import Budget
        from lance_minhash_sql.selfjoin.clusters import linked_components

        clustered = linked_components(uri, "text", threshold, verify, Budget.parse(None), None, "star").num_rows
    return dict(wall=wall, cpu=cpu, clustered=clustered, dropped=int(drop.sum()), group=group, dropped_at=dropped,
                est_ok=float((texts.estimate(a, b) >= threshold).mean()) if a.size else 1.0,
                jac=texts.jaccard(a, b))


def _proc_tree(root: int) -> dict[int, tuple[float, int]]:
    """(CPU s, RSS bytes) of root and its live descendants, from /proc."""
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    stat = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    f_ = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stat[int(d)] = (int(f_[1]), (int(f_[11]) + int(f_[12])) / tick, int(f_[21]) * page)
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stat:
            tree[pid] = stat[pid][1:]
            todo += [c for c, v in stat.items() if v[0] == pid]
    return tree


def in_process(cmd: list[str], log: str) -> dict:
    """Run cmd in a child process: wall s; CPU s of the child and every descendant (the
    larger of wait4's figure and the sum of each process's last CPU time sampled from /proc
    every 0.2 s); peak RSS MB, the largest sum over the process tree of a sample (not
    wait4's ru_maxrss: a child forked from this large process inherits its high-water mark)."""
    t0 = time.perf_counter()
    seen, peak = {}, 0
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            tree = _proc_tree(proc.pid)
            seen.update({p: c for p, (c, _) in tree.items()})
            peak = max(peak, sum(r for _, r in tree.values()))
            time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{cmd[:3]} failed ({proc.returncode}); see {log}")
    cpu = max(ru.ru_utime + ru.ru_stime, sum(seen.values()))
    return dict(wall=time.perf_counter() - t0, cpu=cpu, rss=peak / 2**20)


def datatrove_venv(venv: str) -> str:
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        _log(f"creating {venv} with {' '.join(DATATROVE_REQUIREMENTS)}")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", *DATATROVE_REQUIREMENTS], check=True)
    return python


def run_datatrove(texts: Texts, venv: str, data_dir: str) -> dict:
    """datatrove's stages on our rows; returns its cost and each row position's group and
    kept row (-1: not clustered / not dropped)."""
    import shutil

    import pyarrow.parquet as pq

    python = datatrove_venv(venv)
    src, work = os.path.join(data_dir, "datatrove-in"), os.path.join(data_dir, "datatrove-work")
    for d in (src, work):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(src)
    n = texts.rowids.size
    cuts = np.linspace(0, n, DATATROVE_PARTS + 1).astype(np.int64)
    for r in range(DATATROVE_PARTS):
        part = pa.table({"text": texts.texts.slice(cuts[r], cuts[r + 1] - cuts[r]),
                         "id": pa.array(texts.rowids[cuts[r]:cuts[r + 1]])})
        pq.write_table(part, os.path.join(src, f"part{r}.parquet"))
    script = os.path.join(ROOT, "benchmarks", "datatrove_minhash.py")
    cost = in_process([python, script, src, work, "--tasks", str(DATATROVE_PARTS), "--workers", "2"],
                      os.path.join(data_dir, "datatrove.log"))
    group = np.full(n, -1, dtype=np.int64)
    dropped = np.zeros(n, dtype=bool)
    for r in range(DATATROVE_PARTS):
        c = np.fromfile(os.path.join(work, "remove_ids", f"{r:06d}.clusters"), dtype="<u4").reshape(-1, 2)
        group[cuts[r] + c[:, 0].astype(np.int64)] = c[:, 1]
        rm = os.path.join(work, "remove_ids", f"{r:06d}.remove")
        if os.path.exists(rm):
            dropped[cuts[r] + np.fromfile(rm, dtype="<u4").astype(np.int64)] = True
    kept_of = np.full(int(group.max()) + 1 if (group >= 0).any() else 0, -1, dtype=np.int64)
    members = np.flatnonzero((group >= 0) & ~dropped)
    kept_of[group[members]] = members
    twin = np.full(n, -1, dtype=np.int64)
    twin[dropped] = kept_of[group[dropped]]
    shutil.rmtree(work, ignore_errors=True)
    return dict(cost, group=group, twin=twin)


def ours_child(uri: str, threshold: float) -> None:
    """Our side of the datatrove comparison, in a process of its own: writes the dedup and
    pairs results as arrow files next to the dataset."""
    import pyarrow.feather as feather

    from lance_minhash_sql.selfjoin.dedup import keep_flags
    from lance_minhash_sql.selfjoin.pairs import pairs

    base = uri.rstrip("/") + ".ours"
    feather.write_feather(keep_flags(uri, "text", threshold), base + ".components.arrow")
    feather.write_feather(keep_flags(uri, "text", threshold, clustering="star", verify="exact"), base + ".star.arrow")
    feather.write_feather(pa.Table.from_batches(list(pairs(uri, "text", threshold, verify="exact"))), base + ".pairs.arrow")


def run_ours(uri: str, texts: Texts, threshold: float, data_dir: str) -> dict:
    import pyarrow.feather as feather

    cost = in_process([sys.executable, os.path.abspath(__file__), "--ours-child", uri, "--threshold", str(threshold)],
                      os.path.join(data_dir, "ours.log"))
    base = uri.rstrip("/") + ".ours"
    n = texts.rowids.size
    out = {}
    for name in ("components", "star"):
        d = feather.read_table(base + f".{name}.arrow").to_pydict()
        pos = texts.pos(np.array(d["_rowid"], dtype=np.uint64))
        keep = np.array(d["keep"])
        group, twin = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        if name == "star":
            t = texts.pos(np.array([x if x is not None else 0 for x in d["twin_rowid"]], dtype=np.uint64))
            twin[pos[~keep]] = t[~keep]
            group[pos] = np.where(keep, pos, t)
        else:
            group[pos] = np.array(d["cluster_id"], dtype=np.int64)
            kept = dict(zip(group[pos[keep]].tolist(), pos[keep].tolist()))
            twin[pos[~keep]] = [kept[g] for g in group[pos[~keep]].tolist()]
        out[name] = dict(group=group, twin=twin)
    p = feather.read_table(base + ".pairs.arrow")
    out["pairs"] = key_of(texts.pos(p.column("left_rowid").to_numpy()), texts.pos(p.column("right_rowid").to_numpy()))
    for f in glob.glob(base + ".*.arrow"):
        os.remove(f)
    return dict(cost, **out)


def side_by_side(uri: str, texts: Texts, t: float, venv: str, data_dir: str, ref_keys, ra, rb, jac, bands) -> None:
    ours = run_ours(uri, texts, t, data_dir)
    _log(f"ours: {ours['wall']:.1f} s")
    dt = run_datatrove(texts, venv, data_dir)
    _log(f"datatrove: {dt['wall']:.1f} s")
    in_band = [(jac >= lo) & (jac < hi) for lo, hi in bands]

    def grouped(g):
        return (g[ra] >= 0) & (g[ra] == g[rb])

    def drop_precision(twin):
        d = np.flatnonzero(twin >= 0)
        j = texts.jaccard(d, twin[d])
        return d.size, (j >= t).mean() if d.size else 1.0, (j >= 0.7).mean() if d.size else 1.0

    print("\n## Side by side with datatrove 0.10.1 (MinhashDedup, 3-word shingles, 16 bands x 8 rows)")
    print(f"\n| tool | wall s | CPU s | peak RSS MB | " + " | ".join(
        f"recall J in [{lo:.1f}, {min(hi, 1.0):.1f}{')' if hi <= 1 else ']'}" for lo, hi in bands)
        + " | positives in [t, t+0.1) with a row dropped | dropped rows | dropped rows whose kept row has J >= t "
        "| ... J >= 0.7 |")
    print("|---|---|---|---|" + "---|" * len(bands) + "---|---|---|---|")
    rows = [("datatrove", dt, dt), ("ours, components (one process: all three)", ours, ours["components"]),
            ("ours, star, verify='exact' (recall: same star)", None, ours["star"])]
    for name, cost, res in rows:
        c = [f"{cost['wall']:.1f}", f"{cost['cpu']:.1f}", f"{cost['rss']:,.0f}"] if cost else ["", "", ""]
        found = grouped(res["group"])
        nd, p_t, p_7 = drop_precision(res["twin"])
        cells = [name, *c] + [f"{(found & m).sum():,} / {m.sum():,} = {found[m].mean():.4f}" for m in in_band]
        one = ((res["twin"][ra] >= 0) | (res["twin"][rb] >= 0)) & in_band[0]
        cells += [f"{one.sum():,} / {in_band[0].sum():,} = {one.sum() / max(in_band[0].sum(), 1):.4f}"]
        cells += [f"{nd:,}", f"{p_t:.4f}", f"{p_7:.4f}"]
        print("| " + " | ".join(cells) + " |")
    found = np.isin(ref_keys, ours["pairs"])
    cells = ["ours, pairs, verify='exact'", "", "", ""]
    cells += [f"{(found & m).sum():,} / {m.sum():,} = {found[m].mean():.4f}" for m in in_band] + ["", "", "", ""]
    print("| " + " | ".join(cells) + " |")
    print(f"\nours (all three runs in one process) / datatrove: wall {dt['wall'] / ours['wall']:.1f}x, "
          f"CPU {dt['cpu'] / ours['cpu']:.1f}x, peak RSS {dt['rss'] / ours['rss']:.2f}x")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--ours-child":
        return ours_child(sys.argv[2], float(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--data-dir", default="/tmp/bench")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--uri", help="an indexed Lance dataset with a 'text' column (e.g. benchmarks/real_text.py's) "
                    "instead of the generated corpus")
    ap.add_argument("--datatrove", metavar="VENV", help="also run datatrove in this virtual environment "
                    "(created with DATATROVE_REQUIREMENTS if missing)")
    args = ap.parse_args()
    os.makedirs(args.data_dir, exist_ok=True)
    t = args.threshold
    load = os.getloadavg()[0]
    uri = args.uri or corpus(args.rows, args.data_dir)
    small = corpus(2000, args.data_dir)
    from lance_minhash_sql.selfjoin.dedup import keep_flags
    from lance_minhash_sql.selfjoin.pairs import pairs

    for kw in ({}, {"verify": "exact"}):  # compile and load the kernels
        list(pairs(small, "text", t, **kw))
    keep_flags(small, "text", t, clustering="star")
    keep_flags(small, "text", t, clustering="star", verify="exact")
    keep_flags(small, "text", t, verify="exact")
    params = MinHashParams()
    texts = Texts(uri, params)

    modes = {"estimate": {}, "exact verification (verify='exact')": {"verify": "exact"}}
    got = {}
    for name, kw in modes.items():
        a, b, wall, cpu = run_pairs(uri, texts, t, **kw)
        got[name] = (key_of(a, b), wall, cpu, a, b)
        _log(f"{name}: {a.size:,} pairs, {wall:.2f} s")
    r0, rc0 = time.perf_counter(), cpu_seconds()
    pa_, pb_, _ = reference_pairs(texts, t)
    ref_wall, ref_cpu = time.perf_counter() - r0, cpu_seconds() - rc0
    _log(f"reference: {pa_.size:,} pairs at exact Jaccard >= {t}, {ref_wall:.1f} s")
    ref_keys = np.unique(np.concatenate([key_of(pa_, pb_)] + [g[0] for g in got.values()]))
    ra = (ref_keys >> np.uint64(32)).astype(np.int64)
    rb = (ref_keys & np.uint64(0xFFFFFFFF)).astype(np.int64)
    jac = texts.jaccard(ra, rb)
    assert (jac >= t).sum() == pa_.size, "the all-pairs join and the pairs' exact Jaccard agree"
    positive = jac >= t
    cand = texts.candidate(ra, rb)
    bands = [(t, t + 0.1), (t + 0.1, 1.01)]
    print(f"# {texts.rowids.size:,} rows, threshold {t}, k={params.num_hashes}, b={params.num_bands}; load average "
          f"{load:.1f} at the start; estimate floor of verify='exact': {exact_candidate_floor(t, params.num_hashes):.3f}")
    print(f"corpus: {uri}")
    print(f"reference: every pair of the corpus with exact Jaccard >= {t} (prefix-filtered all-pairs join, "
          f"{ref_wall:.1f} s, {ref_cpu:.1f} CPU s): {int(positive.sum()):,}; with the pairs the modes report: "
          f"{ref_keys.size:,}")
    heads = [f"recall J in [{lo:.1f}, {min(hi, 1.0):.1f}{')' if hi <= 1 else ']'}" for lo, hi in bands]
    print("\n| mode | wall s | CPU s | pairs | precision (J >= t) | " + " | ".join(heads) + " |")
    print("|---|---|---|---|---|" + "---|" * len(bands))
    in_band = [(jac >= lo) & (jac < hi) for lo, hi in bands]
    row = ["LSH candidates (ceiling)", "", "", "", ""]
    row += [f"{cand[m].sum():,} / {m.sum():,} = {cand[m].mean():.4f}" for m in in_band]
    print("| " + " | ".join(row) + " |")
    for name, (keys, wall, cpu, _, _) in got.items():
        found = np.isin(ref_keys, keys)
        prec = positive[found].mean() if found.any() else 1.0
        cells = [name, f"{wall:.2f}", f"{cpu:.2f}", f"{keys.size:,}", f"{prec:.4f}"]
        cells += [f"{(found & m).sum():,} / {m.sum():,} = {found[m].mean():.4f}" for m in in_band]
        print("| " + " | ".join(cells) + " |")
    print("\n| clustering | wall s | CPU s | clustered rows (star: rows of the components walked) | dropped "
          "| dropped rows whose kept row has estimate >= t | ... exact J >= t | ... exact J < 0.6 | pairs in [t, t+0.1) in one group | ... with a row dropped |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    m = in_band[0]
    for clustering, verify in (("components", "estimate"), ("components", "exact"), ("star", "estimate"),
                               ("star", "exact")):
        r = run_dedup(uri, texts, t, clustering, verify)
        j = r["jac"]
        g = r["group"]
        same = (g[ra] >= 0) & (g[ra] == g[rb]) & m
        one = (r["dropped_at"][ra] | r["dropped_at"][rb]) & m
        print(f"| {clustering}, verify={verify} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['clustered']:,} | {r['dropped']:,} | "
              f"{r['est_ok']:.4f} | {(j >= t).mean() if j.size else 1.0:.4f} | {int((j < 0.6).sum()):,} | "
              f"{same.sum():,} / {m.sum():,} = {same.sum() / max(m.sum(), 1):.4f} | "
              f"{one.sum():,} / {m.sum():,} = {one.sum() / max(m.sum(), 1):.4f} |")
    if args.datatrove:
        side_by_side(uri, texts, t, args.datatrove, args.data_dir, ref_keys, ra, rb, jac, bands)


if __name__ == "__main__":
    main()
