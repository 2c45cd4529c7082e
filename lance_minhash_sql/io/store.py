"""Where a dataset lives: local paths and object-store URIs (``s3://``, ``gs://``, ``az://``...).

Everything here goes through Lance's own object store (``LanceFileSession``) for URIs, so
the same ``storage_options`` (``aws_access_key_id``, ``aws_secret_access_key``,
``aws_region``, ``aws_endpoint``, ``allow_http``...) reach every read, write and delete.
Object stores have no folders: a segment "folder" is a key prefix, created by its first
file and removed by deleting its files.
"""

from __future__ import annotations

import os
import re
import shutil
from urllib.parse import urlsplit

from lance.file import LanceFileSession

from lance_minhash_sql.core.errors import DatasetError

__all__ = ["SCHEMES", "is_remote", "absolute_uri", "check_uri", "redact", "lance_message", "open_error", "make_dir", "remove_dir",
           "dir_exists", "SECRET_KEYS"]

# URI schemes Lance 14 opens (file:// and memory:// are local to the process)
SCHEMES = ("s3", "s3+ddb", "gs", "az", "abfss", "oss", "hf", "file", "file+uring", "memory")
SECRET_KEYS = ("aws_secret_access_key", "secret_access_key", "aws_session_token", "session_token",
               "google_service_account_key", "azure_storage_account_key", "account_key",
               "azure_storage_sas_token", "sas_token", "oss_secret_access_key", "token", "hf_token")


def _scheme(uri: str) -> str | None:
    if "://" not in uri:
        return None
    return uri.split("://", 1)[0].lower()


def is_remote(uri: str) -> bool:
    """True for an object-store URI (anything with a scheme other than ``file://``)."""
    return _scheme(uri) not in (None, "file", "file+uring")


def absolute_uri(uri: str) -> str:
    """``uri`` as it names the same dataset from any working directory and any machine's
    process: a local path made absolute against this process's working directory, a URI
    with a scheme (``s3://``, ``file://``, ``memory://``...) as given. The one rule every
    dataset path follows before it is opened, kept or handed to another process (a Ray
    worker runs in the folder its cluster was started from, not the driver's)."""
    return uri if _scheme(uri) is not None else os.path.abspath(uri)


def local_path(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri


def check_uri(uri: str) -> None:
    """Refuse a URI scheme Lance cannot open, before Lance tries."""
    scheme = _scheme(uri)
    if scheme is not None and scheme not in SCHEMES:
        raise DatasetError(
            f"dataset {redact_uri(uri)!r} has URI scheme {scheme!r}, which Lance cannot open; use a local path "
            f"or one of {', '.join(s + '://' for s in SCHEMES if s not in ('memory', 'file+uring'))}")


def redact_uri(uri: str) -> str:
    """``uri`` without any ``user:password@`` part."""
    if "://" not in uri:
        return uri
    parts = urlsplit(uri)
    if parts.password is None and parts.username is None:
        return uri
    host = parts.hostname or ""
    return uri.replace(parts.netloc, host + (f":{parts.port}" if parts.port else ""), 1)


def redact(text: str, storage_options: dict | None) -> str:
    """``text`` with every secret value of ``storage_options`` replaced by ``***``."""
    if not storage_options:
        return text
    for k, v in storage_options.items():
        v = str(v)
        if len(v) >= 4 and (str(k).lower() in SECRET_KEYS or "secret" in str(k).lower()
                            or "token" in str(k).lower() or "key" in str(k).lower() and "id" not in str(k).lower()):
            text = text.replace(v, "***")
    return text


# ", /home/runner/work/lance/lance/rust/lance-table/src/io/commit.rs:653:26": where in
# Lance's Rust sources the error was raised, meaningless to a user
_RUST_LOCATION = re.compile(r",?\s*[^\s,()]*\.rs:\d+:\d+")


def lance_message(exc: BaseException, path: str | None = None, limit: int = 300) -> str:
    """The first line of a Lance error, without Lance's Rust source locations; a local
    ``path``, which Lance prints absolute but without its leading ``/``, gets it back."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = _RUST_LOCATION.sub("", text)
    if path and "://" not in path:
        bare = os.path.abspath(path).lstrip("/")
        text = re.sub(r"(?<![\w/.])" + re.escape(bare), lambda _: "/" + bare, text)
    return text[:limit]


def open_error(uri: str, exc: BaseException, storage_options: dict | None) -> DatasetError:
    """The error for a dataset Lance cannot open: Lance's message with the secrets of
    ``storage_options`` and of the URI hidden, and what to check (for an object store, read
    from the store's answer)."""
    msg = redact(lance_message(exc, uri), storage_options)
    return DatasetError(f"dataset {redact_uri(uri)!r} cannot be opened as a Lance dataset ({msg}); "
                        f"{_store_hint(msg, storage_options) if is_remote(uri) else 'check the path'}")


def _store_hint(msg: str, storage_options: dict | None) -> str:
    """What to check, from the object store's answer in Lance's error message."""
    endpoint = (storage_options or {}).get("aws_endpoint") or (storage_options or {}).get("endpoint")
    if "403 Forbidden" in msg or "InvalidAccessKeyId" in msg or "SignatureDoesNotMatch" in msg:
        return ("the store refused the credentials (403): check the access key id and secret in "
                "storage_options (or the DuckDB secret)")
    if "404 Not Found" in msg or "NoSuchBucket" in msg:
        return "the bucket or the dataset path does not exist (404): check the URI"
    if "error sending request" in msg or "onnect" in msg or "timed out" in msg.lower():
        return (f"the object store endpoint {endpoint or '(default)'} cannot be reached: check the endpoint "
                "and the network")
    return "check the URI, the bucket, the credentials and the endpoint in storage_options"


def _session(uri: str, storage_options: dict | None) -> LanceFileSession:
    return LanceFileSession(uri, storage_options=storage_options or None)


def make_dir(path: str) -> None:
    """Create a fresh local folder; nothing for an object store (prefixes need no creation)."""
    if not is_remote(path):
        os.makedirs(local_path(path), exist_ok=False)


def dir_exists(path: str, storage_options: dict | None = None) -> bool:
    if not is_remote(path):
        return os.path.isdir(local_path(path))
    return bool(_session(path, storage_options).list())


def remove_dir(path: str, storage_options: dict | None = None) -> None:
    """Delete a folder / every object under a prefix; missing is fine, errors are quiet
    (callers use it to undo a failed build, where the first error is the one to report)."""
    if not is_remote(path):
        shutil.rmtree(local_path(path), ignore_errors=True)
        return
    try:
        session = _session(path, storage_options)
        for name in session.list():
            try:
                session.delete_file(name)
            except OSError:
                pass
    except (OSError, ValueError, RuntimeError):
        pass
