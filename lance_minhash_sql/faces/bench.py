"""Side-by-side benchmarks: every peer runs on the same corpus in one invocation.

Each peer runs in its own child process, so its peak RSS is its own; the parent prints
one table with throughput ratios. Peers:

* ``ours``       scan the text column from Lance and sign every row (numba engine);
* ``lance``      pylance's native ``MINHASHLSH`` index build (scan, sign, sort, write);
* ``datasketch`` ``datasketch.MinHash`` per row (Python shingling), on a sample;
* ``rensa``      ``rensa.RMinHash`` per row (Python shingling), on a sample.

Run ``lance-minhash bench --rows 1000000``; ``--json FILE`` also writes the figures.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from types import MappingProxyType

from lance_minhash_sql.core.usage import peak_rss_mb

__all__ = ["PEERS", "PeerResult", "run_bench", "format_table", "python_shingles"]

PEERS = ("ours", "lance", "datasketch", "rensa")
_WORD = re.compile(r"\w+")


@dataclass
class PeerResult:
    peer: str
    task: str
    rows: int
    seconds: float
    peak_rss_mb: float
    baseline_rss_mb: float
    note: str = ""

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


def python_shingles(text: str, size: int = 3) -> list[str]:
    """Word ``size``-gram shingles of ``text`` in plain Python: what the Python peers
    (datasketch, rensa) are fed, as their users would write it."""
    tokens = _WORD.findall(text.lower())
    w = min(size, len(tokens))
    return [" ".join(tokens[i:i + w]) for i in range(len(tokens) - w + 1)] if tokens else []


def _peer_ours(uri: str, column: str, limit: int | None) -> tuple[str, int, float, str]:
    from lance_minhash_sql.core.params import MinHashParams
    from lance_minhash_sql.index.sign import signer_for
    from lance_minhash_sql.io.scan import open_dataset, scan_text

    signer = signer_for(MinHashParams())
    t0 = time.perf_counter()
    signer.sign(["warm up the compiled kernels"])
    compile_s = time.perf_counter() - t0
    ds = open_dataset(uri)
    rows = signed = 0
    t0 = time.perf_counter()
    for _, texts in scan_text(ds, column):
        _, has = signer.sign(texts)
        rows += len(texts)
        signed += int(has.sum())
        if limit and rows >= limit:
            break
    seconds = time.perf_counter() - t0
    return "scan + sign (k=128)", rows, seconds, f"{signed:,} signed; kernel load {compile_s:.1f}s"


def _peer_lance(uri: str, column: str, limit: int | None) -> tuple[str, int, float, str]:
    import lance
    from lance.indices import IndexConfig

    ds = lance.dataset(uri)
    name = "bench_native_minhash"
    t0 = time.perf_counter()
    ds.create_scalar_index(column, IndexConfig("MINHASHLSH", {}), name=name, replace=True)
    seconds = time.perf_counter() - t0
    ds = lance.dataset(uri)
    rows = ds.count_rows()
    ds.drop_index(name)
    return "native index build (k=128, b=16)", rows, seconds, ""


def _sample_texts(uri: str, column: str, limit: int) -> list[str]:
    import lance

    table = lance.dataset(uri).to_table(columns=[column], limit=limit)
    return [t for t in table.column(column).to_pylist() if t]


def _peer_datasketch(uri: str, column: str, limit: int | None) -> tuple[str, int, float, str]:
    from datasketch import MinHash

    texts = _sample_texts(uri, column, limit or 20_000)
    t0 = time.perf_counter()
    for text in texts:
        m = MinHash(num_perm=128)
        m.update_batch([s.encode("utf-8") for s in python_shingles(text)])
    return "MinHash per row, Python shingles", len(texts), time.perf_counter() - t0, "sample"


def _peer_rensa(uri: str, column: str, limit: int | None) -> tuple[str, int, float, str]:
    from rensa import RMinHash

    texts = _sample_texts(uri, column, limit or 20_000)
    t0 = time.perf_counter()
    for text in texts:
        m = RMinHash(num_perm=128, seed=42)
        m.update(python_shingles(text))
        m.digest()
    return "RMinHash per row, Python shingles", len(texts), time.perf_counter() - t0, "sample"


_RUNNERS = MappingProxyType({"ours": _peer_ours, "lance": _peer_lance, "datasketch": _peer_datasketch, "rensa": _peer_rensa})


def _child(peer: str, uri: str, column: str, limit: int | None) -> None:
    baseline = peak_rss_mb()
    task, rows, seconds, note = _RUNNERS[peer](uri, column, limit)
    print(json.dumps(asdict(PeerResult(peer, task, rows, seconds, peak_rss_mb(), baseline, note))))


def run_peer(peer: str, uri: str, column: str = "text", limit: int | None = None) -> PeerResult | str:
    """Run one peer in a child process; a string result says why it could not run."""
    cmd = [sys.executable, "-m", "lance_minhash_sql.faces.bench", peer, uri, column, str(limit or 0)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        missing = re.search(r"No module named '([\w.]+)'", last)
        hint = f"; install it with: pip install {missing.group(1).split('.')[0]}" if missing else ""
        return f"{peer}: not run ({last[:200]}){hint}"
    return PeerResult(**json.loads(proc.stdout.strip().splitlines()[-1]))


def format_table(results: list[PeerResult], reference: str = "lance") -> str:
    ref = next((r for r in results if r.peer == reference), None)
    lines = [f"{'peer':<11} {'task':<36} {'rows':>10} {'seconds':>8} {'rows/s':>11} "
             f"{'ours ÷ peer':>11} {'peak RSS':>9}  note"]
    ours = next((r for r in results if r.peer == "ours"), None)
    for r in results:
        # the ours row has no ratio to itself: a dash, not "nanx"
        ratio = f"{ours.rows_per_second / r.rows_per_second:>10.1f}x" if ours and r.peer != "ours" else f"{'-':>11}"
        lines.append(f"{r.peer:<11} {r.task:<36} {r.rows:>10,} {r.seconds:>8.2f} {r.rows_per_second:>11,.0f} "
                     f"{ratio} {r.peak_rss_mb:>7.0f}MB  {r.note}")
    if ref and ours:
        lines.append(f"signing throughput ours ÷ Lance native build: "
                     f"{ours.rows_per_second / ref.rows_per_second:.2f}x")
    return "\n".join(lines)


def run_bench(rows: int = 1_000_000, data_dir: str = "bench-data", peers=PEERS, sample_rows: int = 20_000,
              json_path: str | None = None, progress: bool = True, out=print) -> list[PeerResult]:
    """Generate (or reuse) the synthetic corpus, run every peer, print the table."""
    from lance_minhash_sql.faces.corpus import write_corpus

    uri = os.path.join(data_dir, f"corpus-{rows}.lance")
    if not os.path.exists(uri):
        out(f"generating a {rows:,}-row synthetic corpus at {uri} ...")
        write_corpus(uri, rows, progress=progress)
    results: list[PeerResult] = []
    for peer in peers:
        limit = sample_rows if peer in ("datasketch", "rensa") else None
        out(f"running {peer} ...")
        res = run_peer(peer, uri, "text", limit)
        if isinstance(res, str):
            out(res)
        else:
            results.append(res)
    out(format_table(results))
    if json_path:
        with open(json_path, "w") as fh:
            json.dump([asdict(r) | {"rows_per_second": r.rows_per_second} for r in results], fh, indent=2)
    return results


if __name__ == "__main__":
    _peer, _uri, _column, _limit = sys.argv[1:5]
    _child(_peer, _uri, _column, int(_limit) or None)
