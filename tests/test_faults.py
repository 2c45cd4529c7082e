"""Faults: a build killed with SIGKILL at each phase leaves a dataset that opens, answers
from its earlier index and registers no partial segment; the next build removes what the
killed one left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import lance
import pyarrow as pa
import pytest
from lance.query import MinHashQuery

from lance_minhash_sql.indexer import builder as build_mod
from lance_minhash_sql.indexer.builder import build_index, marker_dir
from lance_minhash_sql.faces.corpus import generate_texts
from lance_minhash_sql.io import manifest
from lance_minhash_sql.query.topk import search

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The child builds with a tiny memory budget (so it spills) and kills itself with SIGKILL
# at the phase named in argv[2]: nothing of Python's cleanup runs, as with kill -9.
_CHILD = r"""
import os, signal, sys
from lance_minhash_sql.indexer import builder as b
from lance_minhash_sql.index import band_sorter
from lance_minhash_sql.io import manifest

phase = sys.argv[2]

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if phase == "signing":
    real_scan = b.scan_text
    def scan(*a, **k):
        it = real_scan(*a, **k)
        yield next(it)
        die()
    b.scan_text = scan
elif phase == "spill":
    real_append = band_sorter._append
    calls = []
    def append(path, array):
        calls.append(path)
        if len(calls) > 3:
            die()
        real_append(path, array)
    band_sorter._append = append
elif phase in ("signatures", "bands"):
    cls = b.SignaturesWriter if phase == "signatures" else b.BandsWriter
    real_write = cls.write
    def write(self, *a, **k):
        real_write(self, *a, **k)
        die()
    cls.write = write
elif phase == "commit":
    def commit(*a, **k):
        die()
    manifest.commit_segments = commit
elif phase == "after-commit":
    real_commit = manifest.commit_segments
    def commit(*a, **k):
        real_commit(*a, **k)
        die()
    manifest.commit_segments = commit
b.build_index(sys.argv[1], "text", num_hashes=64, num_bands=8, memory_limit="64KiB")
raise SystemExit("the build finished: the phase was never reached")
"""

QUERIES = generate_texts(0, 12).to_pylist()


def _answers(uri: str) -> list:
    ds = lance.dataset(uri)
    out = []
    for q in QUERIES:
        t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=5, with_row_id=True, columns=["_distance"])
        ours = search(uri, "text", q, 5, columns=[])
        assert ours.column("_rowid").to_pylist() == t.column("_rowid").to_pylist()
        out.append((t.column("_rowid").to_pylist(), t.column("_distance").to_pylist()))
    return out


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Markers and spill folders live under the test's own temporary directory."""
    import tempfile

    t = tmp_path / "tmp"
    t.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    return t


@pytest.mark.parametrize("phase", ["signing", "spill", "signatures", "bands", "commit", "after-commit"])
def test_build_killed_at_each_phase(tmp_path, private_tmp, phase):
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(pa.table({"text": generate_texts(0, 3000)}), uri, max_rows_per_file=1000)
    build_index(uri, "text", num_hashes=64, num_bands=8)  # the earlier index
    version = lance.dataset(uri).version
    before = _answers(uri)
    (earlier,) = [s.uuid for s in manifest.minhash_segments(lance.dataset(uri))]

    env = dict(os.environ, TMPDIR=str(private_tmp), PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    child = subprocess.run([sys.executable, "-c", _CHILD, uri, phase], env=env, capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == -9, (child.returncode, child.stderr[-2000:])

    ds = lance.dataset(uri)  # the dataset opens
    segments = [s.uuid for s in manifest.minhash_segments(ds)]
    (marker,) = os.listdir(marker_dir())
    with open(os.path.join(marker_dir(), marker)) as f:
        killed = json.load(f)
    if phase == "after-commit":
        # the commit is the build's last step: the new index is whole and in use
        assert ds.version == version + 1 and segments == [killed["uuid"]]
    else:
        assert ds.version == version and segments == [earlier]  # no partial segment registered
        assert os.path.isdir(killed["segment"])  # what the killed build left behind
    assert _answers(uri) == before  # same parameters, same data: the same answers either way

    result = build_index(uri, "text", num_hashes=64, num_bands=8)  # the next build cleans up
    assert os.listdir(marker_dir()) == []
    assert killed["spill"] is None or not os.path.exists(killed["spill"])
    live = [s.uuid for s in manifest.minhash_segments(lance.dataset(uri))]
    assert live == list(result.segment_uuids)
    # folders left: the live index, and those older versions still reference (time travel)
    kept = set(live) | {earlier} | ({killed["uuid"]} if phase == "after-commit" else set())
    assert set(os.listdir(os.path.join(uri, "_indices"))) == kept
    assert _answers(uri) == before
    assert build_mod.cleanup_leftovers(uri) == []


def test_segment_files_with_parameters_other_than_the_manifest_are_refused(tmp_path):
    """Files written for 64/8/5 registered under default details: an error naming the
    segment's files, never answers from mismatched parameters (Lance refuses them too)."""
    import shutil
    import uuid

    from lance_minhash_sql.core.errors import CorruptIndexError
    from lance_minhash_sql.core.params import MinHashParams

    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(pa.table({"text": generate_texts(0, 800)}), uri)
    build_index(uri, "text", num_hashes=64, num_bands=8, shingle_size=5)
    ds = lance.dataset(uri)
    (seg,) = manifest.minhash_segments(ds)
    moved = str(uuid.uuid4())
    shutil.copytree(manifest.segment_dir(ds, seg.uuid), manifest.segment_dir(ds, moved))
    new = manifest.NewSegment(moved, manifest.segment_dir(ds, moved), seg.fragment_ids, MinHashParams())
    manifest.commit_segments(ds, seg.name, "text", [new], removed=[seg],
                             removed_params=MinHashParams(64, 8, 5))
    with pytest.raises(CorruptIndexError, match=f"{moved}.*num_hashes: files 64, manifest 128"):
        search(uri, "text", QUERIES[0], 5)
    with pytest.raises(Exception):
        lance.dataset(uri).to_table(nearest=MinHashQuery(QUERIES[0], "text"), limit=5)
