"""A dbt-duckdb plugin: the package's SQL functions in every dbt connection and cursor, and
Lance datasets as dbt sources.

In ``profiles.yml``::

    my_project:
      target: dev
      outputs:
        dev:
          type: duckdb
          path: dev.duckdb
          plugins:
            - module: lance_minhash_sql.faces.dbt
              alias: lance_minhash

Models then use ``minhash_build``, ``minhash_pairs``, ``minhash_dedup``, ... like any
function. A Lance dataset becomes a source (read whole, with its ``_rowid``, when dbt
materializes it) in a sources file::

    sources:
      - name: lance
        meta: {plugin: lance_minhash}
        tables:
          - name: corpus
            meta: {uri: "data/corpus.lance", columns: [id, text]}   # columns: optional

dbt-duckdb copies connections into cursors for its threads; DuckDB macros belong to one
connection, so the functions are installed on both (``configure_connection`` and
``configure_cursor``).
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.duck.install import install
from lance_minhash_sql.io.scan import read_rows

__all__ = ["Plugin"]


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        self.storage_options = plugin_config.get("storage_options")

    def configure_connection(self, conn) -> None:
        install(conn)

    def configure_cursor(self, cursor) -> None:
        install(cursor)

    def load(self, source_config):
        uri = source_config.get("uri")
        if not isinstance(uri, str) or not uri:
            raise InvalidParameterError(
                f"source {source_config.name!r}: meta 'uri' is {uri!r}; give the Lance dataset's path or URI, "
                "e.g. meta: {uri: 'data/corpus.lance'}")
        columns = source_config.get("columns")
        if columns is not None and (not isinstance(columns, list) or not all(isinstance(c, str) for c in columns)):
            raise InvalidParameterError(
                f"source {source_config.name!r}: meta 'columns' is {columns!r}; give a list of column names or "
                "leave it out for every column")
        return read_rows(uri, columns, source_config.get("storage_options", self.storage_options))
