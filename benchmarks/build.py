"""Index build, side by side: pylance's native ``MINHASHLSH`` build against ``build_index``.

    python benchmarks/build.py --rows 1000000
    python benchmarks/build.py --rows 1000000 --memory-limit 64MiB   # the spill path

The synthetic corpus (``lance_minhash_sql.corpus``) is written once and cached under
``bench-data/``. Each build runs in its own child process, so each peak RSS
(``ru_maxrss`` of the child) is its own; ours first loads its compiled kernels with a
tiny build (reported as "kernel load", not part of the build time). Both builds use the
same parameters (k=128, b=16, shingle 3, default tokenizer) and the same dataset; each
child removes its index afterwards. ``--memory-limit`` is passed to ours as
``memory_limit`` and to Lance as ``LANCE_MEM_POOL_SIZE``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)


def corpus(rows: int, data_dir: str) -> str:
    from lance_minhash_sql.corpus import write_corpus

    uri = os.path.join(data_dir, f"corpus-{rows}.lance")
    if not os.path.exists(os.path.join(uri, "_versions")):
        os.makedirs(data_dir, exist_ok=True)
        t0 = time.perf_counter()
        write_corpus(uri, rows, progress=True)
        print(f"corpus: {rows:,} rows written to {uri} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return uri


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(peer: str, uri: str, memory_limit: str | None) -> dict:
    import lance

    out: dict = {"peer": peer}
    if peer == "lance":
        from lance.indices import IndexConfig

        ds = lance.dataset(uri)
        out["baseline_rss_mb"] = _rss_mb()
        t0 = time.perf_counter()
        ds.create_scalar_index("text", IndexConfig("MINHASHLSH", {}), name="bench_lance", replace=True)
        out["seconds"] = time.perf_counter() - t0
        out["peak_rss_mb"] = _rss_mb()
        ds = lance.dataset(uri)
        out["rows"] = ds.count_rows()
        out["bytes"] = sum(d.total_size_bytes or 0 for d in ds.describe_indices() if d.name == "bench_lance")
        out["note"] = ""
        ds.drop_index("bench_lance")
    else:
        import tempfile

        import pyarrow as pa

        from lance_minhash_sql.index.build import build_index

        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:  # load the compiled kernels
            small = os.path.join(tmp, "w.lance")
            lance.write_dataset(pa.table({"text": ["warm up the kernels", "and the sort"] * 50}), small)
            build_index(small, "text")
            build_index(small, "text", memory_limit="64KiB")
        out["kernel_load_s"] = time.perf_counter() - t0
        out["baseline_rss_mb"] = _rss_mb()
        r = build_index(uri, "text", name="bench_ours", memory_limit=memory_limit)
        out["seconds"] = r.seconds
        out["peak_rss_mb"] = _rss_mb()
        out["rows"] = r.rows_indexed + r.rows_without_tokens
        out["bytes"] = r.bytes
        out["note"] = (f"spilled {r.spilled_bytes / 2**20:.0f} MiB" if r.spilled_bytes else "in-memory sort")
        lance.dataset(uri).drop_index("bench_ours")
    return out


def run_child(peer: str, uri: str, memory_limit: str | None) -> dict:
    env = dict(os.environ)
    if memory_limit and peer == "lance":
        from lance_minhash_sql.index.spill import parse_bytes

        env["LANCE_MEM_POOL_SIZE"] = str(parse_bytes(memory_limit, "--memory-limit"))
    cmd = [sys.executable, os.path.abspath(__file__), "--child", peer, "--uri", uri]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{peer} build failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cleanup(uri: str) -> None:
    import datetime

    import lance

    lance.dataset(uri).cleanup_old_versions(older_than=datetime.timedelta(0), delete_unverified=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1, help="builds per peer, alternating; best time kept")
    ap.add_argument("--memory-limit", default=None, help="e.g. 512MiB: ours gets memory_limit, Lance LANCE_MEM_POOL_SIZE")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--child", choices=("lance", "ours"), help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.uri, args.memory_limit)))
        return
    uri = corpus(args.rows, args.data_dir)
    best: dict[str, dict] = {}
    for _ in range(args.repeat):
        for peer in ("lance", "ours"):
            r = run_child(peer, uri, args.memory_limit)
            cleanup(uri)
            if peer not in best or r["seconds"] < best[peer]["seconds"]:
                best[peer] = r
    lim = f", memory limit {args.memory_limit}" if args.memory_limit else ""
    print(f"index build, {args.rows:,} rows (k=128, b=16, shingle 3), {os.cpu_count()} CPUs{lim}, "
          f"best of {args.repeat}")
    print(f"  {'peer':6s} {'seconds':>8s} {'rows/s':>10s} {'peak RSS':>9s} {'baseline':>9s} {'index MB':>9s}  note")
    for peer in ("lance", "ours"):
        r = best[peer]
        note = r["note"] + (f"; kernel load {r['kernel_load_s']:.1f} s" if "kernel_load_s" in r else "")
        print(f"  {peer:6s} {r['seconds']:8.2f} {r['rows'] / r['seconds']:10,.0f} {r['peak_rss_mb']:7.0f}MB "
              f"{r['baseline_rss_mb']:7.0f}MB {r['bytes'] / 1e6:9.1f}  {note}")
    ratio = best["lance"]["seconds"] / best["ours"]["seconds"]
    print(f"  Lance / ours: {ratio:.2f}x time, {best['lance']['peak_rss_mb'] / best['ours']['peak_rss_mb']:.2f}x peak RSS")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "memory_limit": args.memory_limit, "ratio": ratio, **best}, f, indent=2)


if __name__ == "__main__":
    main()
