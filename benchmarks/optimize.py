"""Merging index segments, side by side: Lance's ``optimize_indices`` against ``optimize``.

    python benchmarks/optimize.py --rows 1000000 --segments 4
    python benchmarks/optimize.py --rows 10000000 --segments 4 --memory-limit 512MiB

The synthetic corpus (``lance_minhash_sql.faces.corpus``) is written once under ``--data-dir``
as ``--segments`` fragments, indexed as one segment per fragment (a build on the first,
then a delta segment per appended fragment: ``optimize(merge=0)``), with 1% of the rows
deleted. That version is the starting point of both merges: Lance's
``ds.optimize.optimize_indices(num_indices_to_merge=<segments>)`` and our
``optimize(merge="all")``, each in its own child process (so each peak RSS, ``VmHWM``
of the child, is its own), the dataset restored to the starting version between them.
Both rebuild one segment from the stored signatures (no text is read) and drop the
deleted rows; each child prints a digest of the merged segment's decoded tables, and the
run checks that both merges wrote the same rows. Ours first loads its compiled kernels
with a tiny build ("kernel load", not part of the time). ``--memory-limit`` is passed to
ours as ``memory_limit`` and to Lance as ``LANCE_MEM_POOL_SIZE``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from lance_minhash_sql.core.usage import peak_rss_mb  # noqa: E402


def prepare(rows: int, segments: int, data_dir: str) -> tuple[str, int]:
    """The dataset with a ``segments``-segment index, and its starting version."""
    import lance

    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.lifecycle.optimize import optimize

    uri = os.path.join(data_dir, f"optimize-{rows}-{segments}.lance")
    marker = uri + ".ready"
    if os.path.exists(marker):
        with open(marker) as f:
            return uri, int(f.read())
    per = rows // segments
    t0 = time.perf_counter()
    for i in range(segments):
        write_corpus(uri, per, mode="create" if i == 0 else "append", start=i * per)
        if i == 0:
            build_index(uri, "text")
        else:
            optimize(uri, "text", merge=0)
    lance.dataset(uri).delete("id % 100 = 7")
    version = int(lance.dataset(uri).version)
    with open(marker, "w") as f:
        f.write(str(version))
    print(f"prepared {rows:,} rows in {segments} segments in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return uri, version


def digest(uri: str) -> tuple[str, int]:
    """sha256 of the only segment's decoded signatures and bands, and its doc count."""
    import lance
    import pyarrow as pa
    from lance.file import LanceFileReader

    ds = lance.dataset(uri)
    (desc,) = [d for d in ds.describe_indices() if d.name == "text_idx"]
    (seg,) = desc.segments
    path = os.path.join(uri, "_indices", str(seg.uuid))
    h = hashlib.sha256()
    docs = 0
    for name in ("signatures.lance", "bands.lance"):
        for batch in LanceFileReader(os.path.join(path, name)).read_all(batch_size=1 << 16).to_batches():
            for col in batch.columns:
                arr = col.flatten() if pa.types.is_fixed_size_list(col.type) else col
                h.update(arr.to_numpy(zero_copy_only=False).tobytes())
            if name == "signatures.lance":
                docs += batch.num_rows
    return h.hexdigest(), docs


def child(peer: str, uri: str, segments: int, memory_limit: str | None = None) -> dict:
    import lance

    out: dict = {"peer": peer}
    if peer == "lance":
        ds = lance.dataset(uri)
        out["baseline_rss_mb"] = peak_rss_mb()
        t0 = time.perf_counter()
        ds.optimize.optimize_indices(num_indices_to_merge=segments)
        out["seconds"] = time.perf_counter() - t0
    else:
        import tempfile

        import pyarrow as pa

        from lance_minhash_sql.indexer.builder import build_index
        from lance_minhash_sql.lifecycle.optimize import optimize

        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:  # load the compiled kernels
            small = os.path.join(tmp, "w.lance")
            lance.write_dataset(pa.table({"text": ["warm up the kernels", "and the sort"] * 50}), small)
            build_index(small, "text")
            lance.dataset(small).insert(pa.table({"text": ["one more fragment"] * 10}))
            optimize(small, "text", merge="all")
        out["kernel_load_s"] = time.perf_counter() - t0
        out["baseline_rss_mb"] = peak_rss_mb()
        r = optimize(uri, "text", merge="all", memory_limit=memory_limit)
        out["seconds"] = r.seconds
        out["merged_segments"] = r.merged_segments
    out["peak_rss_mb"] = peak_rss_mb()
    out["digest"], out["docs"] = digest(uri)
    return out


def run_child(peer: str, uri: str, segments: int, memory_limit: str | None = None) -> dict:
    env = dict(os.environ)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", peer, "--uri", uri, "--segments", str(segments)]
    if memory_limit:
        from lance_minhash_sql.index.band_sorter import parse_bytes

        env["LANCE_MEM_POOL_SIZE"] = str(parse_bytes(memory_limit, "--memory-limit"))
        cmd += ["--memory-limit", memory_limit]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{peer} merge failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def restore(uri: str, version: int) -> int:
    """Back to the starting version: a new version with its manifest, older versions and
    their files removed; returns the new starting version (also kept in the marker)."""
    import datetime

    import lance

    ds = lance.dataset(uri)
    if ds.version != version:
        lance.dataset(uri, version=version).restore()
        ds = lance.dataset(uri)
    ds.cleanup_old_versions(older_than=datetime.timedelta(0), delete_unverified=True)
    with open(uri + ".ready", "w") as f:
        f.write(str(ds.version))
    return int(ds.version)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1, help="merges per peer, alternating; best time kept")
    ap.add_argument("--memory-limit", default=None, help="e.g. 512MiB: ours gets memory_limit, Lance LANCE_MEM_POOL_SIZE")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--child", choices=("lance", "ours"), help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.uri, args.segments, args.memory_limit)))
        return
    os.makedirs(args.data_dir, exist_ok=True)
    uri, version = prepare(args.rows, args.segments, args.data_dir)
    best: dict[str, dict] = {}
    for _ in range(args.repeat):
        for peer in ("lance", "ours"):
            version = restore(uri, version)
            r = run_child(peer, uri, args.segments, args.memory_limit)
            if peer not in best or r["seconds"] < best[peer]["seconds"]:
                best[peer] = r
    restore(uri, version)
    same = best["lance"]["digest"] == best["ours"]["digest"]
    lim = f", memory limit {args.memory_limit}" if args.memory_limit else ""
    print(f"merge of {args.segments} segments, {args.rows:,} rows (1% deleted; k=128, b=16), "
          f"{os.cpu_count()} CPUs{lim}, best of {args.repeat}")
    print(f"  {'peer':6s} {'seconds':>8s} {'docs':>10s} {'peak RSS':>9s} {'baseline':>9s}")
    for peer in ("lance", "ours"):
        r = best[peer]
        print(f"  {peer:6s} {r['seconds']:8.2f} {r['docs']:10,d} {r['peak_rss_mb']:7.0f}MB "
              f"{r['baseline_rss_mb']:7.0f}MB")
    ratio = best["lance"]["seconds"] / best["ours"]["seconds"]
    print(f"  ours is {ratio:.2f}x Lance's speed; merged segments identical: {same}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "segments": args.segments, "memory_limit": args.memory_limit,
                       "ratio": ratio, "identical": same, "peers": best}, f, indent=2)
    if not same:
        raise SystemExit("the two merges wrote different segments")


if __name__ == "__main__":
    main()
