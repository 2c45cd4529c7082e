"""io/takes.py: a search's result rows fetched by :class:`RowFetcher` equal Lance's own take
(``_take_rows``), in the asked order, for columns of many types, with deletions, several
fragments and stable row ids; a missing row is an error, never a shorter result."""

from __future__ import annotations

import datetime
import decimal

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.io.takes import RowFetcher

ROWS = 600


def table() -> pa.Table:
    i = np.arange(ROWS)
    return pa.table({
        "id": pa.array(i, pa.int64()),
        "text": pa.array([f"row {k} " + "word " * (k % 7) for k in i]),
        "small": pa.array((i % 100).astype(np.int8)),
        "f32": pa.array(i.astype(np.float32) / 3),
        "f64": pa.array(np.where(i % 11 == 0, np.nan, i / 7.0)),
        "flag": pa.array(i % 3 == 0),
        "maybe": pa.array([None if k % 5 == 0 else int(k) for k in i], pa.int32()),
        "blob": pa.array([bytes([k % 256]) * (k % 4) for k in i], pa.binary()),
        "big": pa.array([f"text {k}" * (k % 3) for k in i], pa.large_string()),
        "day": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=int(k)) for k in i], pa.date32()),
        "ts": pa.array(i * 1_000_000, pa.timestamp("us")),
        "dec": pa.array([decimal.Decimal(int(k)) / 100 for k in i], pa.decimal128(12, 2)),
        "tags": pa.array([[f"t{k % 3}"] * (k % 3) for k in i], pa.list_(pa.string())),
        "vec": pa.array([[float(k), float(-k)] for k in i], pa.list_(pa.float32(), 2)),
        "pair": pa.array([{"a": int(k), "b": f"b{k}"} for k in i],
                         pa.struct([("a", pa.int64()), ("b", pa.string())])),
    })


COLUMNS = table().column_names


def lance_take(ds, rowids: np.ndarray, columns: list[str]) -> pa.Table:
    return ds._take_rows(pa.array(rowids, pa.uint64()), columns)


def same(a: pa.Table, b: pa.Table) -> bool:
    """Equal schemas and values (NaN equal to NaN, which ``Table.equals`` denies)."""
    def rows(t):
        return [[("NaN" if isinstance(v, float) and v != v else v) for v in r.values()] for r in t.to_pylist()]
    return a.schema.equals(b.schema) and rows(a) == rows(b)


def rowids_of(ds) -> np.ndarray:
    return ds.to_table(columns=[], with_row_id=True).column("_rowid").to_numpy()


def check(ds, stable: bool, rng, *, expect_session: bool):
    fetcher = RowFetcher(ds, stable)
    live = rowids_of(ds)
    for n in (1, 2, 10, 37):
        ids = rng.choice(live, size=n, replace=False)  # any order, as a search's result is
        for cols in (COLUMNS, ["text"], ["id", "text"], ["pair", "id"], ["vec"]):
            got = fetcher.take(ids, cols, "the test")
            want = lance_take(ds, ids, cols)
            assert got.column_names == cols
            assert same(got, want), (cols, ids)
    sessions = [v for v in fetcher._sessions.values() if v]
    assert bool(sessions) == expect_session


def test_one_fragment_uses_a_session_and_equals_lance(tmp_path):
    ds = lance.write_dataset(table(), str(tmp_path / "a.lance"))
    check(ds, False, np.random.default_rng(1), expect_session=True)


def test_several_fragments_equal_lance(tmp_path):
    ds = lance.write_dataset(table(), str(tmp_path / "a.lance"), max_rows_per_file=150)
    assert len(ds.get_fragments()) == 4
    check(ds, False, np.random.default_rng(2), expect_session=True)  # the ids of one query often span several
    fetcher = RowFetcher(ds, False)
    frag2 = rowids_of(ds)[300:310][::-1]  # all in fragment 2
    assert same(fetcher.take(frag2, ["id", "text"], "t"), lance_take(ds, frag2, ["id", "text"]))
    assert fetcher._sessions[(2, ("id", "text"))] is not None


def test_fragment_with_deletions_equals_lance(tmp_path):
    ds = lance.write_dataset(table(), str(tmp_path / "a.lance"))
    ds.delete("id % 4 = 1")
    ds = lance.dataset(str(tmp_path / "a.lance"))
    # a fragment session takes by position among live rows: not used where rows are deleted
    check(ds, False, np.random.default_rng(3), expect_session=False)


def test_stable_row_ids_equal_lance(tmp_path):
    ds = lance.write_dataset(table(), str(tmp_path / "a.lance"), enable_stable_row_ids=True,
                             max_rows_per_file=200)
    ds.delete("id % 5 = 2")
    ds.optimize.compact_files(target_rows_per_fragment=1000)
    ds = lance.dataset(str(tmp_path / "a.lance"))
    check(ds, True, np.random.default_rng(4), expect_session=False)


def test_a_missing_row_is_an_error(tmp_path):
    ds = lance.write_dataset(table(), str(tmp_path / "a.lance"))
    fetcher = RowFetcher(ds, False)
    with pytest.raises(DatasetError, match="changed during the test"):
        fetcher.take(np.array([3, ROWS + 5], np.uint64), ["id"], "the test")  # past the fragment's end
    with pytest.raises(DatasetError, match="changed during the test"):
        fetcher.take(np.array([(7 << 32) | 1], np.uint64), ["id"], "the test")  # no fragment 7
    ds.delete("id = 3")
    ds = lance.dataset(str(tmp_path / "a.lance"))
    with pytest.raises(DatasetError, match="changed during the test"):
        RowFetcher(ds, False).take(np.array([2, 3], np.uint64), ["id"], "the test")  # deleted in this version


def test_a_row_asked_twice_comes_twice(tmp_path):
    ds = lance.write_dataset(table(), str(tmp_path / "a.lance"))
    ids = np.array([5, 9, 5], np.uint64)
    got = RowFetcher(ds, False).take(ids, ["id"], "t")
    assert got.column("id").to_pylist() == [5, 9, 5]
