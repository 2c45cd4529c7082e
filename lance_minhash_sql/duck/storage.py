"""``storage_options`` in SQL: the macros' ``storage_options :=`` argument, DuckDB S3
secrets, and the tokens that carry options from one UDF call to the SQL it writes.

Every dataset-taking macro passes its dataset and ``to_json(storage_options)::VARCHAR``
through ``_lms_storage(fn, dataset, options, connection)``, which returns a *token* (or
NULL) that the macro hands to the working UDF in place of the options:

* ``storage_options`` given: a ``MAP(VARCHAR, VARCHAR)``, a ``STRUCT`` or JSON object text
  becomes a ``dict[str, str]`` (:func:`parse_storage_options`);
* NULL, on an ``s3://`` (or ``s3+ddb://``) dataset: the DuckDB secret that applies to
  the URI (``which_secret(uri, 's3')``), read unredacted from ``duckdb_secrets(redact :=
  false)`` through a side cursor of the calling connection, mapped to Lance's options
  (:func:`s3_secret_options`). Local paths and other schemes never query secrets.

Tokens keep secrets out of SQL texts: the search and pairs UDFs write SQL for ``query()``
and name the options in it by token only. A token maps to one options dict for the life of
the process (:func:`options_token`, :func:`options_of`). Option *values* never appear in
an error message, a token or a repr; messages name keys only.

``install(con)`` gives each connection and cursor an id in the variable
``_lms_connection`` (:func:`register_connection`): inside a UDF the calling connection is
not otherwise known. A side cursor of it does not deadlock (duckdb 2.0.1, at plan time
and at execution), but it sees only committed secrets: a secret created inside
an open transaction is not found until ``COMMIT``.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import weakref
from types import MappingProxyType
from typing import Any, Callable, NamedTuple

from lance_minhash_sql.core.errors import DatasetError, InvalidParameterError
from lance_minhash_sql.duck.args import Udf
from lance_minhash_sql.runtime.cache import register_state

__all__ = ["parse_storage_options", "parse_secret_string", "s3_secret_options", "SecretLookup", "read_secret",
           "secret_storage_options", "register_connection", "resolve", "options_token", "options_of", "forget_tokens",
           "tokens_held",
           "CONNECTION_VARIABLE", "SECRET_SCHEMES", "STORAGE_UDFS"]

CONNECTION_VARIABLE = "_lms_connection"

# Dataset URI schemes whose options can come from a DuckDB secret, and the scheme the
# secret's scope is matched against (Lance opens s3:// and s3+ddb://, not s3a:// or r2://).
SECRET_SCHEMES = MappingProxyType({"s3": "s3", "s3+ddb": "s3"})

_EXAMPLE = "MAP {'aws_region': 'us-east-1'} or '{\"aws_region\": \"us-east-1\"}'"


# --------------------------------------------------------------------------- the SQL argument


def _kind(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a text"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _value(fn: str, key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise InvalidParameterError(
        f"{fn}: storage_options key {key!r} has {_kind(value)} value; every value must be text (numbers and "
        f"booleans are converted), e.g. {_EXAMPLE}")


def parse_storage_options(fn: str, text: str | None) -> dict[str, str] | None:
    """``to_json(storage_options)::VARCHAR`` as a dict of strings (``None`` for NULL).

    A MAP or STRUCT arrives as a JSON object; a VARCHAR arrives JSON-quoted and is decoded
    a second time. Anything else is an :class:`InvalidParameterError` that names the keys
    at most, never a value.

    >>> parse_storage_options("minhash_build", '{"aws_region":"us-east-1","allow_http":true,"n":3}')
    {'aws_region': 'us-east-1', 'allow_http': 'true', 'n': '3'}
    >>> parse_storage_options("minhash_build", '"{\\\\"aws_region\\\\": \\\\"eu-west-1\\\\"}"')
    {'aws_region': 'eu-west-1'}
    """
    if text is None or text == "null":
        return None
    rule = (f"storage_options must be a MAP(VARCHAR, VARCHAR), a STRUCT or JSON object text of Lance storage "
            f"options, e.g. {_EXAMPLE}")
    try:
        value = json.loads(text)
        if isinstance(value, str):  # VARCHAR input: JSON text inside a JSON string
            value = json.loads(value)
    except ValueError:
        raise InvalidParameterError(f"{fn}: storage_options is text that is not valid JSON; {rule}") from None
    if not isinstance(value, dict):
        raise InvalidParameterError(f"{fn}: storage_options is {_kind(value)}; {rule}")
    out = {}
    for key, v in value.items():
        if not key:
            raise InvalidParameterError(f"{fn}: storage_options has an empty key; {rule}")
        out[key] = _value(fn, key, v)
    return out


# --------------------------------------------------------------------------- DuckDB secrets

_FIELD_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def parse_secret_string(text: str) -> dict[str, str]:
    """The ``key=value`` fields of a ``duckdb_secrets().secret_string``.

    Fields are separated by ``;``; a MAP value is written ``{k=v, k2=v2}``. A ``;`` inside
    braces, or not followed by ``name=``, belongs to the value (DuckDB does not escape it).

    >>> parse_secret_string("name=s;type=s3;scope=s3://a,s3://b;key_id=AK;extra={a=b;c, d=e};use_ssl=false")
    {'name': 's', 'type': 's3', 'scope': 's3://a,s3://b', 'key_id': 'AK', 'extra': '{a=b;c, d=e}', 'use_ssl': 'false'}
    """
    fields: dict[str, str] = {}
    depth, start = 0, 0
    parts = []
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
        elif ch == ";" and depth == 0 and _FIELD_START.match(text, i + 1):
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    for part in parts:
        key, sep, value = part.partition("=")
        if sep:
            fields[key.strip().lower()] = value
    return fields


_AWS_DEFAULT_ENDPOINT = "s3.amazonaws.com"
_FALSE = frozenset({"false", "0", "f", "no", "off"})
# DuckDB S3 secret field -> Lance (object_store) option, copied as is when not empty
_DIRECT = (("key_id", "aws_access_key_id"), ("secret", "aws_secret_access_key"),
           ("session_token", "aws_session_token"), ("region", "aws_region"))


def s3_secret_options(secret: str | dict) -> dict[str, str]:
    """Lance storage options from a DuckDB S3 secret (its ``secret_string`` or its fields).

    ``key_id``, ``secret``, ``session_token``, ``region`` become ``aws_access_key_id``,
    ``aws_secret_access_key``, ``aws_session_token``, ``aws_region``; ``endpoint`` becomes
    ``aws_endpoint`` (``https://`` or, with ``use_ssl`` false, ``http://`` put in front when
    it has no scheme; AWS's default ``s3.amazonaws.com`` is left to Lance, which picks the
    region's endpoint); ``url_style`` ``path`` / ``vhost`` becomes
    ``aws_virtual_hosted_style_request`` ``false`` / ``true``; ``use_ssl`` false becomes
    ``allow_http`` ``true``. Empty fields and other fields (``kms_key_id``,
    ``requester_pays``, ...) are not carried over.

    >>> s3_secret_options("name=m;type=s3;provider=config;serializable=true;scope=s3://;endpoint=127.0.0.1:9000;"
    ...                   "key_id=AK;region=us-east-1;secret=SK;session_token=;url_style=path;use_ssl=false")
    ... # doctest: +NORMALIZE_WHITESPACE
    {'aws_access_key_id': 'AK', 'aws_secret_access_key': 'SK', 'aws_region': 'us-east-1',
     'aws_endpoint': 'http://127.0.0.1:9000', 'aws_virtual_hosted_style_request': 'false', 'allow_http': 'true'}
    """
    fields = parse_secret_string(secret) if isinstance(secret, str) else {str(k).lower(): v for k, v in secret.items()}
    fields = {k: ("" if v is None else str(v)).strip() for k, v in fields.items()}
    out = {lance: fields[duck] for duck, lance in _DIRECT if fields.get(duck)}
    use_ssl = fields.get("use_ssl", "").lower() not in _FALSE
    endpoint = fields.get("endpoint", "")
    if endpoint and endpoint.rstrip("/").lower() != _AWS_DEFAULT_ENDPOINT:
        out["aws_endpoint"] = endpoint if "://" in endpoint else ("https://" if use_ssl else "http://") + endpoint
    style = fields.get("url_style", "").lower()
    if style in ("path", "vhost"):
        out["aws_virtual_hosted_style_request"] = "true" if style == "vhost" else "false"
    if not use_ssl:
        out["allow_http"] = "true"
    return out


class SecretLookup(NamedTuple):
    """The DuckDB secret that applies to a URI: its name, and its ``secret_string`` when
    the connection allows unredacted secrets (``None`` otherwise)."""

    name: str
    secret_string: str | None


def read_secret(con, uri: str, secret_type: str = "s3") -> SecretLookup | None:
    """Ask DuckDB (through ``con``, a connection or cursor) which secret of ``secret_type``
    applies to ``uri``; ``None`` when none does (also when the extension defining the type,
    e.g. httpfs, is not loaded: then no such secret can exist)."""
    row = con.execute("SELECT name FROM which_secret(?, ?)", [uri, secret_type]).fetchone()
    if row is None or row[0] is None:
        return None
    (allowed,) = con.execute("SELECT current_setting('allow_unredacted_secrets')").fetchone()
    if not allowed:
        return SecretLookup(row[0], None)
    found = con.execute("SELECT secret_string FROM duckdb_secrets(redact := false) WHERE name = ?",
                        [row[0]]).fetchone()
    return SecretLookup(row[0], None if found is None else found[0])


def secret_storage_options(fn: str, uri: str, lookup: SecretLookup | None) -> dict[str, str] | None:
    """Lance options from the looked-up secret of ``uri`` (``None``: no secret applies)."""
    if lookup is None:
        return None
    if lookup.secret_string is None:
        from lance_minhash_sql.io.store import redact_uri

        raise DatasetError(
            f"{fn}: DuckDB secret {lookup.name!r} applies to {redact_uri(uri)!r}, but this connection does not allow reading "
            "secrets unredacted; pass storage_options := MAP {...} to the function, or connect with "
            "lance_minhash_sql.connect() (or duckdb.connect(config={'allow_unredacted_secrets': True}))")
    return s3_secret_options(lookup.secret_string)


# --------------------------------------------------------------------------- connections

_CONNECTIONS: dict[str, Callable] = {}
_CONNECTIONS_LOCK = threading.Lock()


def register_connection(con) -> str:
    """Remember ``con`` (weakly) under a new id and store the id in its
    ``_lms_connection`` variable, where the macros read it."""
    cid = secrets.token_hex(8)

    def forget(_ref, cid=cid):
        with _CONNECTIONS_LOCK:
            _CONNECTIONS.pop(cid, None)
        forget_tokens(cid)

    try:
        ref = weakref.ref(con, forget)
    except TypeError:  # not weakly referable: keep it (connections are few)
        ref = (lambda c: lambda: c)(con)
    with _CONNECTIONS_LOCK:
        _CONNECTIONS[cid] = ref
    con.execute(f"SET VARIABLE {CONNECTION_VARIABLE} = '{cid}'")
    return cid


def _connection(cid: str | None):
    if cid is None:
        return None
    with _CONNECTIONS_LOCK:
        ref = _CONNECTIONS.get(cid)
    return None if ref is None else ref()


def _secret_uri(uri: str) -> str | None:
    """The URI to match secret scopes against, or ``None`` when secrets do not apply."""
    if "://" not in uri:
        return None
    scheme, rest = uri.split("://", 1)
    target = SECRET_SCHEMES.get(scheme.lower())
    return None if target is None else f"{target}://{rest}"


def resolve(fn: str, dataset: str | None, options: str | None, cid: str | None) -> dict[str, str] | None:
    """The storage options of one call: given ones, else the applicable DuckDB secret's
    (object-store URIs only), else ``None``."""
    given = parse_storage_options(fn, options)
    if given is not None or not isinstance(dataset, str):
        return given
    target = _secret_uri(dataset)
    if target is None:
        return None
    con = _connection(cid)
    if con is None:
        return None
    cur = con.cursor()
    try:
        lookup = read_secret(cur, target)
    finally:
        cur.close()
    return secret_storage_options(fn, dataset, lookup)


# --------------------------------------------------------------------------- tokens

# Storage options travel through generated SQL as tokens, never as values. A token lives
# as long as the connection whose statement made it (its options, credentials included,
# are forgotten when that connection is garbage-collected); a token made outside any
# registered connection (cid None) lives for the process.
_TOKENS: dict[tuple[str | None, str], str] = {}  # (connection id, canonical JSON) -> token
_OPTIONS: dict[str, dict[str, str]] = {}  # token -> options
_OWNED: dict[str | None, set[str]] = {}  # connection id -> its tokens
_TOKENS_LOCK = threading.Lock()


def options_token(options: dict[str, str] | None, cid: str | None = None) -> str | None:
    """An opaque, process-local name for ``options`` (the same options on the same
    connection, the same token), valid while connection ``cid`` lives."""
    if options is None:
        return None
    key = (cid, json.dumps(options, sort_keys=True))
    with _TOKENS_LOCK:
        token = _TOKENS.get(key)
        if token is None:
            token = "lms-options-" + secrets.token_hex(8)
            _TOKENS[key] = token
            _OPTIONS[token] = dict(options)
            _OWNED.setdefault(cid, set()).add(token)
    return token


def forget_tokens(cid: str | None) -> None:
    """Drop the tokens (and the options they name) of connection ``cid``."""
    with _TOKENS_LOCK:
        for token in _OWNED.pop(cid, ()):
            _OPTIONS.pop(token, None)
        for key in [k for k in _TOKENS if k[0] == cid]:
            del _TOKENS[key]


def _forget_all_tokens() -> None:
    with _TOKENS_LOCK:
        _TOKENS.clear()
        _OPTIONS.clear()
        _OWNED.clear()


# clear_cache() forgets every token and its options (a statement planned before it asks
# for storage_options again); the connections stay, as DuckDB's macros name them
register_state("storage option tokens", _TOKENS, _OPTIONS, _OWNED, clear=_forget_all_tokens)
register_state("connections install() registered", _CONNECTIONS)


def tokens_held() -> int:
    """How many storage-option sets this process holds now."""
    with _TOKENS_LOCK:
        return len(_OPTIONS)


def options_of(token: str | None) -> dict[str, str] | None:
    """The options a token names; ``None`` for no token or no options (``MAP {}``)."""
    if token is None:
        return None
    with _TOKENS_LOCK:
        options = _OPTIONS.get(token)
    if options is None:
        raise InvalidParameterError(
            "storage options token is unknown in this process (its connection was closed); pass "
            "storage_options := to the table macro (the token comes from _lms_storage on the same connection)")
    return options or None


def storage(fn, dataset, options, cid) -> str | None:
    """``_lms_storage(fn, dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection'))``."""
    return options_token(resolve(fn or "storage_options", dataset, options, cid), cid)


# one call per row (not Arrow): a macro passes constants, constant-folded at plan time
STORAGE_UDFS = (Udf("_lms_storage", storage, ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR"), "VARCHAR", False, False),)
