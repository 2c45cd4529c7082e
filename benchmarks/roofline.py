"""The build's and the pair kernel's stages, each in CPU time per row (per pair visit),
against the limit the machine's arithmetic sets for it.

    python benchmarks/roofline.py                  # 200k rows, build and pairs
    python benchmarks/roofline.py --rows 1000000 --data-dir /tmp/bench

Build stages, measured one at a time on the synthetic corpus (``faces/corpus.py``), each
on one thread unless Lance runs it on its own threads (scan, write: process CPU time, all
threads counted):

* **scan + Arrow**: ``io/scan.scan_text`` over a Lance dataset of the corpus.
* **tokenize**, **shingle hash**, **permutations + min**: three kernels of increasing
  reach over the same Arrow buffers: tokenizing only (``kernels/tokenize.tokenize_row``),
  tokenizing and hashing every shingle (``kernels/minhash.shingle_hashes_into``), and
  signing as the build does (``index/sign.Signer.sign``: for the default tokenizer
  ``kernels/minhash.sign_ascii_range``); each stage is the difference to the one before.
* **band keys**: ``kernels/similarity.band_keys_serial``.
* **spill + sort**: ``index/band_sorter.BandSorter`` (in memory, as a 1M build with the default
  budget), keys added in scan batches, then every sorted chunk read.
* **write**: ``signatures.lance`` and ``bands.lance`` through ``io/segment_writers.py``.

Pair stages, on the pools the self-join builds (``kernels/bucket_pairs.py``), over every bucket
of a ``build_index`` of the corpus at threshold 0.8:

* **bucket walk**: the pair loop with the signatures never read (every pair counted).
* **signature gather**: ``gather_rows`` of each window's pool.
* **compare**: ``pair_chunk`` minus the walk, per pair visit.

Limits (stated, from the clock a core runs at, measured by a chain of dependent 4-cycle
steps): tokenizing one
byte per cycle; an XXH64 of a short shingle 20 cycles (its ~10 dependent-free multiplies
and rotates at 2 per cycle, plus the loop); the permutations ``k`` multiply-add-min
steps per shingle at ``VECTOR_LANES`` 64-bit lanes per 1.5 cycles (the 64-bit multiply
``vpmullq``, 3 micro-ops, is the bottleneck on Intel; one on AMD Zen 4); band keys one
XXH64 of 16 bytes per band (20 cycles); a pair visit's compare ``k`` 16-bit values at 32
per cycle plus one cache miss when the partner's row is cold. The scan, the sort and the
writes are memory-bound: their limit is the bytes they move at 5 GB/s per core.

No hardware counters are read (many virtual machines hide them); instruction counts of
the inner loops come from the kernels' assembly (``--asm`` prints the vector
instructions of the signing kernel's minima loop).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # after PYTHONPATH: another checkout of the package can be measured

from lance_minhash_sql.core.params import MinHashParams  # noqa: E402
from lance_minhash_sql.kernels.config import njit  # noqa: E402
from lance_minhash_sql.kernels import minhash, tokenize  # noqa: E402
from lance_minhash_sql.kernels.tokenize import new_buffers  # noqa: E402
from lance_minhash_sql.kernels.xxh64 import xxh64  # noqa: E402

SEED = np.uint64(42)
# not cached: numba keys a cached kernel by its own file, and these call the package's kernels
JIT = dict(nogil=True)
# what the signing kernels call per row (tokenize_doc in checkouts without tokenize_row)
tokenize_row = getattr(tokenize, "tokenize_row", tokenize.tokenize_doc)
VECTOR_LANES = 8  # 64-bit lanes of a 512-bit vector


@njit(**JIT)
def _each_shingle_xxh64(out, tok_start, tok_end, ntok, shingle, dest, pos):
    """The shingle hashes of checkouts without ``minhash.shingle_hashes_into``."""
    w = min(shingle, ntok)
    for s in range(ntok - w + 1):
        st = tok_start[s]
        dest[pos] = xxh64(out, st, tok_end[s + w - 1] - st, SEED)
        pos += 1
    return pos


# what the signing kernels hash the shingles of a row with
shingle_hashes_into = getattr(minhash, "shingle_hashes_into", _each_shingle_xxh64)


@njit(**JIT)
def tokens_only(offsets, data, cfg, tables, lo, hi):
    out, tok_start, tok_end, raw = new_buffers()
    total = 0
    for r in range(lo, hi):
        ntok, out, tok_start, tok_end, raw = tokenize_row(data, offsets[r], offsets[r + 1], cfg, tables,
                                                          out, tok_start, tok_end, raw)
        total += ntok
    return total


@njit(**JIT)
def tokens_and_hashes(offsets, data, cfg, tables, shingle, lo, hi):
    out, tok_start, tok_end, raw = new_buffers()
    xs = np.empty(1 << 16, dtype=np.uint64)
    acc = np.uint64(0)
    shingles = 0
    for r in range(lo, hi):
        ntok, out, tok_start, tok_end, raw = tokenize_row(data, offsets[r], offsets[r + 1], cfg, tables,
                                                          out, tok_start, tok_end, raw)
        if ntok > xs.size:
            xs = np.empty(2 * ntok, dtype=np.uint64)
        if ntok > 0:
            n = shingle_hashes_into(out, tok_start, tok_end, ntok, shingle, xs, np.int64(0))
            for s in range(n):
                acc ^= xs[s]
            shingles += n
    return shingles, acc


@njit(**JIT)
def walk_only(docs, starts, ends, rowids):
    """The pair loop of ``kernels/bucket_pairs.pair_chunk`` reading only each partner's row id."""
    visits = 0
    acc = np.uint64(0)
    for bi in range(starts.size):
        s = starts[bi]
        m = ends[bi] - s
        for i in range(m - 1):
            ida = rowids[np.int64(docs[s + i])]
            for t in range(i + 1, m):
                acc ^= ida + rowids[np.int64(docs[s + t])]
            visits += m - 1 - i
    return visits, acc


@njit(**JIT)
def _chain(n):
    x = np.uint64(88172645463325252)
    for _ in range(n):
        x = x * (x | np.uint64(1))  # a multiply (3 cycles) after an or (1 cycle), each on the last
    return x


def cpu_hz() -> float:
    """The clock a core runs at now: a chain of dependent 4-cycle steps, timed."""
    _chain(10)
    n = 50_000_000
    t, _ = best(lambda: _chain(n), 3)
    return 4 * n / t


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        m = re.search(r"model name\s*:\s*(.+)", f.read())
    return m.group(1).strip() if m else "unknown"


def best(fn, repeat: int) -> tuple[float, object]:
    """Least process CPU time of ``repeat`` calls (all threads), and the last result."""
    t_best, res = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        res = fn()
        t_best = min(t_best, time.process_time() - t0)
    return t_best, res


def corpus(rows: int, data_dir: str) -> str:
    from lance_minhash_sql.faces.corpus import write_corpus

    uri = os.path.join(data_dir, f"corpus-{rows}.lance")
    if not os.path.exists(uri):
        os.makedirs(data_dir, exist_ok=True)
        write_corpus(uri, rows)
    return uri


def build_rows(uri: str, rows: int, repeat: int, hz: float) -> tuple[list, dict]:
    import lance
    import pyarrow as pa

    from lance_minhash_sql.index.sign import signer_for
    from lance_minhash_sql.index.band_sorter import BandSorter, plan_sort
    from lance_minhash_sql.io.arrow import string_buffers
    from lance_minhash_sql.io.scan import scan_text
    from lance_minhash_sql.io.segment_writers import BandsWriter, SignaturesWriter
    from lance_minhash_sql.kernels import similarity

    params = MinHashParams()
    k, nb = params.num_hashes, params.num_bands
    ds = lance.dataset(uri)

    def scan():
        return [(ids, t) for ids, t in scan_text(ds, "text")]

    t_scan, batches = best(scan, repeat)
    texts = pa.chunked_array([t for _, t in batches]).combine_chunks()
    buf = string_buffers(texts)
    signer = signer_for(params)
    cfg, tables = signer.cfg, signer.tables
    n = len(texts)
    t_tok, ntok = best(lambda: tokens_only(buf.offsets, buf.data, cfg, tables, 0, n), repeat)
    t_hash, (nsh, _) = best(lambda: tokens_and_hashes(buf.offsets, buf.data, cfg, tables,
                                                      params.shingle_size, 0, n), repeat)

    def sign():  # as the build signs: the ASCII kernel first for the simple tokenizer (index/sign.py)
        return signer.sign(texts)[0]

    t_sign, sigs = best(sign, repeat)
    sig_bytes = sigs.view(np.uint8).reshape(n, -1)
    t_keys, keys = best(lambda: similarity.band_keys_serial(sig_bytes, nb), repeat)
    plan = plan_sort(n, nb)
    step = plan.scan_rows

    def sort():
        sorter = BandSorter(plan)
        try:
            for lo in range(0, n, step):
                sorter.add(keys[lo:lo + step])
            sorter.finish()
            return sum(len(c[0]) for c in sorter.sorted_chunks())
        finally:
            sorter.close()

    t_sort, _ = best(sort, repeat)
    rowids = np.arange(n, dtype=np.uint64)
    flat = keys.reshape(-1)
    order = np.lexsort((np.repeat(np.arange(n, dtype=np.uint32), nb), flat))
    skeys, sdocs = flat[order], np.repeat(np.arange(n, dtype=np.uint32), nb)[order]

    def write():
        d = tempfile.mkdtemp(dir=os.path.dirname(uri))
        try:
            w = SignaturesWriter(d, params)
            for lo in range(0, n, step):
                w.write(rowids[lo:lo + step], sigs[lo:lo + step])
            w.close()
            b = BandsWriter(d, params, num_docs=n)
            for lo in range(0, len(skeys), 1 << 20):
                b.write(skeys[lo:lo + (1 << 20)], sdocs[lo:lo + (1 << 20)])
            b.close()
        finally:
            shutil.rmtree(d)

    t_write, _ = best(write, repeat)
    text_bytes = int(buf.offsets[-1] - buf.offsets[0])
    per = {"bytes": text_bytes / n, "tokens": ntok / n, "shingles": nsh / n, "sigs": sigs, "keys": keys}
    gbs = 5e9
    sig_b, band_b = 2 * k + 8, nb * 12
    stages = [
        ("scan + Arrow", t_scan, (text_bytes + 8 * n) / gbs, "text bytes at 5 GB/s"),
        ("tokenize", t_tok, text_bytes / hz, "1 byte per cycle"),
        ("shingle hash", t_hash - t_tok, 20 * nsh / hz, "20 cycles per shingle"),
        ("permutations + min", t_sign - t_hash, 1.5 * k * nsh / VECTOR_LANES / hz,
         f"{k} x shingles 64-bit mul-add-min, {VECTOR_LANES} lanes / 1.5 cycles"),
        ("band keys", t_keys, 20 * nb * n / hz, f"{nb} XXH64 of 16 bytes, 20 cycles each"),
        ("spill + sort", t_sort, 4 * n * band_b / gbs, "band rows moved 4 times at 5 GB/s"),
        ("write", t_write, n * (sig_b + band_b) / gbs, "signature + band bytes at 5 GB/s"),
    ]
    return [(name, 1e6 * t / n, 1e6 * lim / n, why) for name, t, lim, why in stages], per


def pair_rows(sigs: np.ndarray, keys: np.ndarray, repeat: int, hz: float, threshold: float) -> tuple[list, dict]:
    """Pair stages over every bucket of the band keys ``keys`` of signatures ``sigs``, one
    window of at most ``BUCKET_WINDOW_ROWS`` rows at a time, as the self-join runs them."""
    from lance_minhash_sql.core.tuning import BUCKET_WINDOW_ROWS
    from lance_minhash_sql.kernels import bucket_pairs as pairs

    n, k = sigs.shape
    nb = keys.shape[1]
    flat = keys.reshape(-1)
    docs_all = np.repeat(np.arange(n, dtype=np.uint32), nb)
    order = np.lexsort((docs_all, flat))
    mk, md = pairs.multi_rows(flat[order], docs_all[order])
    starts, ends = pairs.bucket_bounds(mk)
    rowids = np.arange(n, dtype=np.uint64)
    for a in (mk, md, starts, ends, rowids, sigs):
        a.setflags(write=False)
    spans = pairs.windows(starts, ends, BUCKET_WINDOW_ROWS)
    kp = pairs.padded_hashes(k)
    rows_max = int((ends[spans[:, 1] - 1] - starts[spans[:, 0]]).max())
    buf = np.zeros((rows_max, kp), dtype=np.uint16)
    buf_ids = np.empty(rows_max, dtype=np.uint64)
    ident = np.arange(rows_max, dtype=np.uint32)
    ident.setflags(write=False)
    no_slot = np.empty(0, dtype=np.int32)
    no_slot.setflags(write=False)
    min_eq = pairs.min_matches(threshold, k)
    cap = 1 << 20
    out_l, out_r, out_e = np.empty(cap, np.uint64), np.empty(cap, np.uint64), np.empty(cap, np.int32)

    def gather():
        for b0, b1 in spans:
            r0, r1 = int(starts[b0]), int(ends[b1 - 1])
            pairs.gather_rows(md, r0, r1, sigs, no_slot, rowids, buf, buf_ids)

    def walk():
        return walk_only(md, starts, ends, rowids)

    def compare():
        found = 0
        for b0, b1 in spans:
            r0, r1 = int(starts[b0]), int(ends[b1 - 1])
            pairs.gather_rows(md, r0, r1, sigs, no_slot, rowids, buf, buf_ids)
            st, en = starts[b0:b1] - r0, ends[b0:b1] - r0
            halves = buf[:r1 - r0]
            cursor = pairs.new_bucket_cursor()
            done = False
            while not done:
                c, done = pairs.pair_chunk(mk[r0:r1], ident[:r1 - r0], st, en, halves.view(np.uint64), halves,
                                           no_slot, buf_ids[:r1 - r0], k, nb, min_eq, cursor, out_l, out_r, out_e,
                                           1 << 62, *pairs.no_sets(), 0.0)
                found += c
        return found

    t_walk, (visits, _) = best(walk, repeat)
    t_gather, _ = best(gather, repeat)
    t_all, found = best(compare, repeat)
    rows = int(ends[-1] - starts[0]) if starts.size else 0
    v = max(visits, 1)
    stages = [
        ("bucket walk", t_walk, 2 * visits / hz, "2 cycles per visit (two row ids, in order)"),
        ("signature gather", t_gather, rows * 2 * kp / 5e9, f"{rows:,} band rows x {2 * kp} bytes at 5 GB/s"),
        ("compare", t_all - t_gather - t_walk, visits * k / 32 / hz, f"{k} u16 values at 32 per cycle"),
    ]
    return [(name, 1e9 * t / v, 1e9 * lim / v, why) for name, t, lim, why in stages], \
        {"visits": visits, "pairs": found, "band_rows": rows}


def print_table(title: str, unit: str, rows: list) -> None:
    print(f"\n{title}")
    print(f"| stage | {unit} | limit | x limit | limit from |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, v, lim, why in rows:
        print(f"| {name} | {v:.3f} | {lim:.3f} | {v / lim:.1f} | {why} |")
    tot, tl = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"| **total** | {tot:.3f} | {tl:.3f} | {tot / tl:.1f} | |")


def vector_ops(disp, pattern: str) -> str:
    """The vector instructions matching ``pattern`` in a kernel's compiled code (every
    signature it was called with), counted by mnemonic and register width."""
    import numba

    fresh = numba.njit(nogil=True)(disp.py_func)  # compiled here: numba shows no code it loaded from its cache
    for sig in disp.signatures:
        fresh.compile(sig)
    asm = "\n".join(fresh.inspect_asm(sig) for sig in fresh.signatures)
    counts: dict[str, int] = {}
    for m in re.finditer(rf"^\s+({pattern})\s+[^\n]*?%([xyz])mm", asm, re.M):
        key = f"{m.group(1)} {m.group(2)}mm"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per stage, least CPU time kept (the first run of a kernel may compile: keep 2 or more)")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--asm", action="store_true", help="count the signing kernel's vector instructions")
    args = ap.parse_args()
    hz = cpu_hz()
    uri = corpus(args.rows, args.data_dir)
    print(f"CPU: {cpu_model()}, {hz / 1e9:.2f} GHz; load average {os.getloadavg()[0]:.2f}; {args.rows:,} rows")
    stages, per = build_rows(uri, args.rows, args.repeat, hz)
    print(f"per row: {per['bytes']:.0f} bytes, {per['tokens']:.1f} tokens, {per['shingles']:.1f} shingles")
    print_table("Build, CPU us per row", "us/row", stages)
    sigs, keys = per.pop("sigs"), per.pop("keys")
    pstages, pp = pair_rows(sigs, keys, args.repeat, hz, args.threshold)
    print(f"\npairs at threshold {args.threshold}: {pp['visits']:,} visits, {pp['pairs']:,} pairs, "
          f"{pp['band_rows']:,} band rows in buckets")
    print_table("Pairs, CPU ns per pair visit", "ns/visit", pstages)
    if args.asm:
        from lance_minhash_sql.kernels import minhash, pairs

        # the kernel the build signs ASCII rows with (sign_range where a checkout has no other)
        kernel = getattr(minhash, "sign_ascii_range", minhash.sign_range)
        sign_ops = vector_ops(kernel, r"vpmul\w*|vpadd\w*|vpmin\w*|vpcmpgtq|vpshufb|vpcompressb")
        pair_ops = vector_ops(pairs.pair_chunk, r"vpcmp\w*|vpsub\w*|vpadd\w*")
        print(f"\n{kernel.__name__}, vector multiply / add / min / compare / byte shuffle: {sign_ops}")
        print(f"pair_chunk, vector compare / add: {pair_ops}")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
