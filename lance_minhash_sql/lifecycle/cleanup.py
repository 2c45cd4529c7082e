"""``cleanup``: keep a dataset's disk bounded by removing its old versions, through Lance's
own cleanup (``docs/pipelines.md``).

Every commit (an ingest, an index rebuild or optimize, a delete) makes a new version and
keeps the old ones readable (``lance.dataset(uri, version=v)``), with their data files and
index segments. :func:`cleanup` removes the versions older than ``older_than`` and every
file that no remaining version uses: replaced index segments, data files of deleted or
compacted rows. The latest version is never removed, whatever its age; tagged versions
are kept. After it, the removed versions can no longer be read.
"""

from __future__ import annotations

from datetime import timedelta

from lance_minhash_sql.core.checks import check_duration
from lance_minhash_sql.index.results import CleanupResult
from lance_minhash_sql.io.append import cleanup_versions
from lance_minhash_sql.io.handles import options_for
from lance_minhash_sql.io.scan import open_dataset, uri_of

__all__ = ["CleanupResult", "DEFAULT_RETENTION", "cleanup"]

DEFAULT_RETENTION = timedelta(days=7)


def cleanup(dataset, older_than=DEFAULT_RETENTION, *, storage_options: dict | None = None) -> CleanupResult:
    """Remove the versions of ``dataset`` older than ``older_than`` (a ``timedelta``, a
    number of seconds, or a text such as ``"7 days"``: ``core/checks.py``) and the files
    only they used; see the module doc."""
    age = check_duration("older_than", older_than)
    storage_options = options_for(dataset, storage_options)
    ds = open_dataset(dataset if isinstance(dataset, str) else uri_of(dataset), storage_options)
    versions, removed = cleanup_versions(ds, age)
    return CleanupResult(versions, removed)
