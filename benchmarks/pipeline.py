"""A daily ingestion pipeline on real text, checked day by day against brute force.

    python benchmarks/real_text.py DIR/real.lance
    python benchmarks/pipeline.py --source DIR/real.lance --data-dir DIR

The rows of ``--source`` (``benchmarks/real_text.py``: docstrings, licences, README
paragraphs) are shuffled; the first ``--base`` share (60%) becomes the corpus, indexed
with ``threshold := 0.8``, and ``--days`` batches of ``--batch`` share (5%) each follow.
Each day, from SQL as a user runs it: ``minhash_ingest_plan``, ``minhash_ingest`` and
``minhash_cleanup(..., older_than := INTERVAL '0 seconds')``, all with ``verify :=
'exact'``. Checked and printed each day:

* ``rows_appended + rows_dropped`` equals the batch's rows, and the rows appended are the
  plan's kept rows (by ``id``);
* the plan against the rule over exact shingle Jaccard, brute force: every pair of rows of
  the whole source reaching the threshold (``benchmarks/allpairs.py``, prefix filtering,
  no LSH), the batch walked by row id, a row dropped when it has such a pair with a corpus
  row or an earlier kept batch row; the share of batch rows whose decision differs;
* every dropped row's exact Jaccard to its twin (recomputed here) reaches the threshold;
* ``index_action`` is never ``build``.

After the last day: ``minhash_pairs`` (exact) of the corpus against those of a fresh copy
of its rows with a fresh index, and the corpus folder's size against that copy's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

import lance
import numpy as np
import pyarrow as pa

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(__file__))

import lance_minhash_sql as lms  # noqa: E402
from allpairs import all_pairs  # noqa: E402
from lance_minhash_sql.index.opened import open_index  # noqa: E402
from lance_minhash_sql.index.sign import signer_for  # noqa: E402

T = 0.8


def folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def pair_ids(con, uri: str) -> set:
    ids = {r["_rowid"]: r["id"] for r in lance.dataset(uri).to_table(columns=["id"], with_row_id=True).to_pylist()}
    rows = con.sql("SELECT left_rowid, right_rowid FROM minhash_pairs(?, 'text', threshold := 0.8, verify := 'exact')",
                   params=[uri]).fetchall()
    return {tuple(sorted((ids[a], ids[b]))) for a, b in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, help="a Lance dataset with a text column (benchmarks/real_text.py)")
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--base", type=float, default=0.6)
    ap.add_argument("--batch", type=float, default=0.05)
    ap.add_argument("--days", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    src = lance.dataset(args.source).to_table(columns=["text"])
    n = src.num_rows
    order = np.random.default_rng(args.seed).permutation(n)
    table = pa.table({"id": pa.array(np.arange(n)), "text": src.column("text").take(pa.array(order))})
    work = os.path.join(args.data_dir, "pipeline")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    corpus = os.path.join(work, "corpus.lance")
    base = int(n * args.base)
    size = int(n * args.batch)
    lance.write_dataset(table.slice(0, base), corpus)
    con = lms.connect()
    con.sql("SELECT * FROM minhash_build(?, 'text', threshold := 0.8)", params=[corpus]).fetchall()
    print(f"{n:,} rows of {args.source}: a corpus of {base:,} rows, {args.days} batches of {size:,}")

    # the brute-force reference: every pair of the whole source at exact J >= T
    signer = signer_for(open_index(corpus, "text").params)
    offsets, hashes = signer.shingle_sets(table.column("text").combine_chunks())
    t0 = time.perf_counter()
    pa_, pb, _ = all_pairs(offsets, hashes, T)
    print(f"all pairs of the source at J >= {T}: {pa_.size:,} ({time.perf_counter() - t0:.1f} s, no LSH)")
    partners: dict[int, set] = {}
    for a, b in zip(pa_.tolist(), pb.tolist()):
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)

    def jaccard(a: int, b: int) -> float:
        x = hashes[offsets[a]:offsets[a + 1]]
        y = hashes[offsets[b]:offsets[b + 1]]
        if x.size == 0 or y.size == 0:
            return float("nan")
        common = np.intersect1d(x, y, assume_unique=True).size
        return common / (x.size + y.size - common)

    in_corpus = set(range(base))
    worst = 0.0
    print("day  offered  appended  dropped  differ  share    plan s  ingest s  cleanup s  action  versions  MiB")
    for day in range(args.days):
        lo = base + day * size
        batch = os.path.join(work, f"batch{day + 1}.lance")
        lance.write_dataset(table.slice(lo, size), batch)
        rid_to_id = {r["_rowid"]: r["id"] for r in lance.dataset(batch).to_table(columns=["id"], with_row_id=True)
                     .to_pylist()}
        c_rid_to_id = {r["_rowid"]: r["id"] for r in lance.dataset(corpus).to_table(columns=["id"], with_row_id=True)
                       .to_pylist()}
        t0 = time.perf_counter()
        plan = con.sql("SELECT * FROM minhash_ingest_plan(?, ?, 'text', threshold := 0.8, verify := 'exact') "
                       "ORDER BY _rowid", params=[corpus, batch]).arrow().read_all().to_pylist()
        t1 = time.perf_counter()
        (offered, appended, dropped, version, action, _) = con.sql(
            "SELECT * FROM minhash_ingest(?, ?, 'text', threshold := 0.8, verify := 'exact')",
            params=[corpus, batch]).fetchall()[0]
        t2 = time.perf_counter()
        versions, _ = con.sql("SELECT * FROM minhash_cleanup(?, older_than := INTERVAL '0 seconds')",
                              params=[corpus]).fetchall()[0]
        t3 = time.perf_counter()

        kept_ids = {rid_to_id[r["_rowid"]] for r in plan if r["keep"]}
        assert offered == size == appended + dropped, (offered, appended, dropped)
        assert appended == len(kept_ids) and action != "build", (appended, len(kept_ids), action)
        now = set(lance.dataset(corpus).to_table(columns=["id"]).column("id").to_pylist())
        assert now == in_corpus | kept_ids, "the rows appended are not the plan's kept rows"
        # the rule, brute force: batch rows walked by row id (= id order here)
        kept_ref: set = set()
        differ = 0
        for r in plan:
            i = rid_to_id[r["_rowid"]]
            p = partners.get(i, set())
            keep_ref = not (p & in_corpus or p & kept_ref)
            if keep_ref:
                kept_ref.add(i)
            differ += keep_ref != r["keep"]
            if not r["keep"]:
                twin = (c_rid_to_id if r["twin_in"] == "corpus" else rid_to_id)[r["twin_rowid"]]
                assert jaccard(i, twin) >= T - 1e-12 and abs(jaccard(i, twin) - r["jaccard"]) < 1e-9, (i, twin)
        share = differ / size
        worst = max(worst, share)
        in_corpus = now
        print(f"{day + 1:>3}  {offered:>7,}  {appended:>8,}  {dropped:>7,}  {differ:>6}  {share:6.2%}  {t1 - t0:>7.2f}  "
              f"{t2 - t1:>8.2f}  {t3 - t2:>9.2f}  {action:>6}  {versions:>8}  {folder_bytes(corpus) / 2**20:6.1f}")

    fresh = os.path.join(work, "fresh.lance")
    lance.write_dataset(lance.dataset(corpus).to_table(columns=["id", "text"]), fresh)
    con.sql("SELECT * FROM minhash_build(?, 'text', threshold := 0.8)", params=[fresh]).fetchall()
    same = pair_ids(con, corpus) == pair_ids(con, fresh)
    ratio = folder_bytes(corpus) / folder_bytes(fresh)
    print(f"worst day: {worst:.2%} of the batch rows decided otherwise than brute force (at most 1% asked)")
    print(f"after {args.days} days: pairs of the corpus {'equal' if same else 'DIFFER from'} a fresh index's; "
          f"corpus folder {folder_bytes(corpus) / 2**20:.1f} MiB, fresh copy {folder_bytes(fresh) / 2**20:.1f} MiB "
          f"({ratio:.2f}x, at most 1.3x asked)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
