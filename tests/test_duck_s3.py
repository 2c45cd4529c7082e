"""Object-store datasets from SQL and the CLI: storage_options := (MAP, STRUCT, JSON text),
DuckDB S3 secrets, --storage-option; against a moto S3 server (the ``s3`` fixture).

DuckDB's S3 secret type comes with the httpfs extension, which cannot be installed here, so
``CREATE SECRET (TYPE s3 ...)`` cannot run: the secret path is tested with the mapping on
secret strings in duckdb_secrets()'s format, and with the lookup run against the core
secret manager's ``http`` secrets (same which_secret / duckdb_secrets queries, same side
cursor inside the UDF), their secret string swapped for an S3 one.
"""

from __future__ import annotations

import urllib.request

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.query import MinHashQuery

import lance_minhash_sql as lms
from lance_minhash_sql.core.errors import DatasetError, InvalidParameterError
from lance_minhash_sql.duck import storage
from lance_minhash_sql.faces import cli
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches

ROWS = 1500


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def sql_map(opts: dict) -> str:
    return "MAP {" + ", ".join(f"{lit(k)}: {lit(v)}" for k, v in opts.items()) + "}"


def sql_json(opts: dict) -> str:
    import json

    return lit(json.dumps(opts))


@pytest.fixture(scope="module")
def table():
    return pa.Table.from_batches(list(generate_batches(ROWS, CorpusSpec(seed=11))))


@pytest.fixture(scope="module")
def remote(s3, table, tmp_path_factory):
    """``(s3 uri, local copy)`` of one corpus, indexed through SQL (S3 with MAP options)."""
    bucket = s3.make_bucket("lms-duck-s3")
    uri = f"s3://{bucket}/corpus.lance"
    lance.write_dataset(table, uri, storage_options=s3.storage_options(), max_rows_per_file=1000)
    local = str(tmp_path_factory.mktemp("duck_s3") / "corpus.lance")
    lance.write_dataset(table, local, max_rows_per_file=1000)
    con = lms.connect()
    (rows,) = con.execute(f"SELECT rows_indexed FROM minhash_build({lit(uri)}, 'text', "
                      f"storage_options := {sql_map(s3.storage_options())})").fetchone()
    assert rows == ROWS
    lms.build_index(local, "text")
    return uri, local


@pytest.fixture
def con():
    return lms.connect()


def queries(table) -> list[str]:
    texts = table.column("text").to_pylist()
    return [texts[i] for i in (0, 7, 123, 999, 1400)]


# --------------------------------------------------------------------------- storage_options values


@pytest.mark.parametrize("value, expected", [
    ("NULL", None),
    ("MAP {'aws_region': 'us-east-1', 'allow_http': 'true'}", {"aws_region": "us-east-1", "allow_http": "true"}),
    ("{'aws_region': 'eu-west-1', 'allow_http': true, 'n': 3}", {"aws_region": "eu-west-1", "allow_http": "true",
                                                                "n": "3"}),
    ("'{\"aws_region\": \"us-east-1\", \"allow_http\": false}'", {"aws_region": "us-east-1", "allow_http": "false"}),
    ("'{\"aws_region\": \"us-east-1\"}'::JSON", {"aws_region": "us-east-1"}),
    ("MAP {}", {}),
])
def test_storage_options_values_from_sql(con, value, expected):
    text = con.execute(f"SELECT to_json({value})::VARCHAR").fetchone()[0]
    assert storage.parse_storage_options("minhash_build", text) == expected


@pytest.mark.parametrize("value, words", [
    ("42", ["is a number", "MAP(VARCHAR, VARCHAR)"]),
    ("[1, 2]", ["is a list"]),
    ("'[\"x\"]'", ["is a list"]),
    ("'not json hunter2'", ["not valid JSON"]),
    ("{'aws_secret_access_key': {'v': 'hunter2'}}", ["key 'aws_secret_access_key' has an object value"]),
    ("MAP {'aws_session_token': ['hunter2']}", ["key 'aws_session_token' has a list value"]),
    ("MAP {'aws_secret_access_key': NULL}", ["key 'aws_secret_access_key' has NULL value"]),
])
def test_bad_storage_options_give_the_rule_and_never_the_value(con, value, words):
    with pytest.raises(duckdb.Error) as err:
        con.execute(f"SELECT * FROM minhash_indexes('s3://lms-nowhere/x.lance', storage_options := {value})").fetchall()
    msg = str(err.value)
    assert "InvalidParameterError" in msg and "minhash_indexes: storage_options" in msg
    assert all(w in msg for w in words), msg
    assert "hunter2" not in msg


# --------------------------------------------------------------------------- S3 secrets -> Lance options

FULL_SECRET = ("name=minio;type=s3;provider=config;serializable=true;scope=s3://,s3n://,s3a://;"
               "endpoint=127.0.0.1:9000;key_id=AKIDEXAMPLE;kms_key_id=;region=eu-central-1;"
               "requester_pays=false;secret=wJalr/K7MDENG+bPxRfiCY;session_token=FQoGZXIvYXdzE;"
               "url_style=path;use_ssl=false")


def test_secret_string_fields_map_to_lance_options():
    assert storage.s3_secret_options(FULL_SECRET) == {
        "aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "wJalr/K7MDENG+bPxRfiCY",
        "aws_session_token": "FQoGZXIvYXdzE", "aws_region": "eu-central-1", "aws_endpoint": "http://127.0.0.1:9000",
        "aws_virtual_hosted_style_request": "false", "allow_http": "true"}


@pytest.mark.parametrize("fields, expected", [
    ("endpoint=minio.local:9000;use_ssl=true", {"aws_endpoint": "https://minio.local:9000"}),
    ("endpoint=minio.local:9000", {"aws_endpoint": "https://minio.local:9000"}),
    ("endpoint=http://10.0.0.1:9000;use_ssl=true", {"aws_endpoint": "http://10.0.0.1:9000"}),
    ("endpoint=s3.amazonaws.com;region=us-west-2", {"aws_region": "us-west-2"}),  # AWS default: Lance picks it
    ("url_style=vhost", {"aws_virtual_hosted_style_request": "true"}),
    ("url_style=;session_token=;key_id=", {}),
    ("use_ssl=false", {"allow_http": "true"}),
    ("use_ssl=true;region=us-east-1", {"aws_region": "us-east-1"}),
])
def test_secret_mapping_rules(fields, expected):
    head = "name=s;type=s3;provider=config;serializable=true;scope=s3://;"
    assert storage.s3_secret_options(head + fields) == expected


def test_secret_fields_as_a_map_and_map_valued_fields():
    assert storage.s3_secret_options({"KEY_ID": "AK", "secret": "SK", "use_ssl": False, "region": None}) == {
        "aws_access_key_id": "AK", "aws_secret_access_key": "SK", "allow_http": "true"}
    # a MAP value is written {k=v, k2=v2}; a ';' inside it or inside a value does not split fields
    text = ("name=s;type=s3;provider=credential_chain;serializable=true;scope=s3://a,s3://b;"
            "refresh_info={region=x;y, key_id=z};key_id=AK;secret=abc;def;region=r1")
    fields = storage.parse_secret_string(text)
    assert fields["refresh_info"] == "{region=x;y, key_id=z}" and fields["secret"] == "abc;def"
    assert fields["scope"] == "s3://a,s3://b"
    assert storage.s3_secret_options(text) == {"aws_access_key_id": "AK", "aws_secret_access_key": "abc;def",
                                               "aws_region": "r1"}


def test_secret_lookup_against_the_core_secret_manager():
    con = duckdb.connect(config={"allow_unredacted_secrets": True})
    assert storage.read_secret(con, "s3://lms-b/x.lance") is None  # no s3 secret type without httpfs: no error
    assert storage.read_secret(con, "s3://lms-b/x.lance", "http") is None
    con.execute("CREATE SECRET lms_b (TYPE http, BEARER_TOKEN 'tok-hunter2', SCOPE 's3://lms-b')")
    found = storage.read_secret(con, "s3://lms-b/x.lance", "http")
    assert found.name == "lms_b" and "bearer_token=tok-hunter2" in found.secret_string
    assert storage.read_secret(con, "s3://lms-other/x.lance", "http") is None
    assert "tok-hunter2" not in repr(storage.secret_storage_options("f", "s3://lms-b/x", found))

    plain = duckdb.connect()  # unredacted secrets not allowed: the name only
    plain.execute("CREATE SECRET lms_c (TYPE http, BEARER_TOKEN 'tok-hunter2', SCOPE 's3://lms-c')")
    found = storage.read_secret(plain, "s3://lms-c/x.lance", "http")
    assert found == storage.SecretLookup("lms_c", None)
    with pytest.raises(DatasetError) as err:
        storage.secret_storage_options("minhash_build", "s3://lms-c/x.lance", found)
    msg = str(err.value)
    assert "'lms_c'" in msg and "s3://lms-c/x.lance" in msg and "storage_options" in msg
    assert "lance_minhash_sql.connect()" in msg and "hunter2" not in msg


class _NoSecrets:
    """A connection that fails any query but the install's SET VARIABLE."""

    def execute(self, sql, *args):
        assert sql.startswith("SET VARIABLE"), sql

    def cursor(self):
        raise AssertionError("secrets were looked up")


def test_only_s3_uris_without_options_look_up_secrets():
    fake = _NoSecrets()
    cid = storage.register_connection(fake)
    for uri in ("/data/corpus.lance", "file:///data/corpus.lance", "relative/c.lance", "gs://b/c.lance",
                "memory://c"):
        assert storage.resolve("minhash_build", uri, None, cid) is None
    assert storage.resolve("minhash_build", "s3://b/c.lance", '{"aws_region":"r"}', cid) == {"aws_region": "r"}
    with pytest.raises(AssertionError, match="looked up"):
        storage.resolve("minhash_build", "s3+ddb://b/c.lance", None, cid)
    assert storage.resolve("minhash_build", "s3://b/c.lance", None, None) is None  # no connection known


def test_local_datasets_never_query_secrets(tmp_path, table):
    path = str(tmp_path / "local.lance")
    lance.write_dataset(table.slice(0, 300), path)
    con = duckdb.connect()  # unredacted secrets off, and a secret that matches everything
    con.execute("CREATE SECRET everything (TYPE http, BEARER_TOKEN 'x', SCOPE '')")
    lms.install(con)
    assert con.execute(f"SELECT rows_indexed FROM minhash_build({lit(path)}, 'text')").fetchone() == (300,)
    assert con.execute(f"SELECT count(*) FROM minhash_search_ids({lit(path)}, 'text', 'a b c', 3)").fetchone()[0] <= 3


def test_tokens_name_options_without_their_values():
    token = storage.options_token({"aws_secret_access_key": "hunter2"})
    assert "hunter2" not in token and token == storage.options_token({"aws_secret_access_key": "hunter2"})
    assert storage.options_of(token) == {"aws_secret_access_key": "hunter2"}
    assert storage.options_of(storage.options_token({})) is None and storage.options_of(None) is None
    with pytest.raises(InvalidParameterError, match="unknown"):
        storage.options_of("lms-options-0000")


# --------------------------------------------------------------------------- SQL on S3


def test_build_with_json_options_and_list_the_index(s3, remote, con):
    uri, _ = remote
    opts = s3.storage_options()
    rows = con.execute(f"SELECT rows_indexed, segments FROM minhash_build({lit(uri)}, 'text', "
                   f"storage_options := {sql_json(opts)})").fetchall()
    assert rows == [(ROWS, 1)]
    segs = con.execute(f"SELECT \"column\", \"rows\", fragment_ids FROM minhash_indexes({lit(uri)}, "
                   f"storage_options := {sql_map(opts)})").fetchall()
    assert segs == [("text", ROWS, [0, 1])]
    ds = lance.dataset(uri, storage_options=opts)
    assert len(ds.describe_indices()) == 1


def test_search_equals_lance_on_s3(s3, remote, con, table):
    uri, _ = remote
    opts = s3.storage_options()
    ds = lance.dataset(uri, storage_options=opts)
    struct = "{" + ", ".join(f"{k}: {lit(v)}" for k, v in opts.items()) + "}"
    for q in queries(table):
        ours = con.execute(f"SELECT id, _rowid, _distance FROM minhash_search({lit(uri)}, 'text', {lit(q)}, 10, "
                       f"storage_options := {sql_map(opts)})").fetchall()
        t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=10, with_row_id=True, columns=["id", "_distance"])
        theirs = list(zip(t.column("id").to_pylist(), t.column("_rowid").to_pylist(),
                          [float(np.float32(d)) for d in t.column("_distance").to_pylist()]))
        assert ours == theirs and len(ours) > 0
        ids = con.execute(f"SELECT _rowid, _distance FROM minhash_search_ids({lit(uri)}, 'text', {lit(q)}, 10, "
                      f"storage_options := {struct})").fetchall()
        assert ids == [(r, d) for _, r, d in theirs]


def test_lateral_search_ids_on_s3(s3, remote, con, table):
    uri, _ = remote
    opts = sql_map(s3.storage_options())
    qs = queries(table)
    con.execute("CREATE TEMP TABLE qs AS SELECT * FROM (VALUES " +
                ", ".join(f"({i}, {lit(q)})" for i, q in enumerate(qs)) + ") t(qid, q)")
    batch = con.execute(f"SELECT qid, s._rowid FROM qs, LATERAL minhash_search_ids({lit(uri)}, 'text', q, 3, "
                    f"storage_options := {opts}) s ORDER BY qid, s._distance, s._rowid").fetchall()
    one = []
    for i, q in enumerate(qs):
        one += [(i, r) for (r,) in con.execute(f"SELECT _rowid FROM minhash_search_ids({lit(uri)}, 'text', {lit(q)}, 3, "
                                          f"storage_options := {opts}) ORDER BY _distance, _rowid").fetchall()]
    assert batch == one


def test_pairs_clusters_dedup_buckets_on_s3_equal_a_local_copy(s3, remote, con, self_join_budget):
    uri, local = remote
    opts = sql_map(s3.storage_options())

    def both(sql: str):
        return (con.execute(sql.format(ds=lit(uri), so=f", storage_options := {opts}")).fetchall(),
                con.execute(sql.format(ds=lit(local), so="")).fetchall())

    on_s3, here = both("SELECT * FROM minhash_pairs({ds}, 'text', threshold := 0.7{so}) ORDER BY ALL")
    assert on_s3 == here and len(here) > 0
    on_s3, here = both("SELECT * FROM minhash_pairs({ds}, 'text', verify := 'exact'{so}) ORDER BY ALL")
    assert on_s3 == here and len(here) > 0
    on_s3, here = both("SELECT * FROM minhash_clusters({ds}, 'text'{so}) ORDER BY ALL")
    assert on_s3 == here and len(here) > 0
    on_s3, here = both("SELECT * FROM minhash_dedup({ds}, 'text', keep := 'longest'{so}) ORDER BY ALL")
    assert on_s3 == here
    on_s3, here = both("SELECT * FROM minhash_pairs({ds}, 'text', verify := 'exact'{so}) ORDER BY ALL")
    assert on_s3 == here and len(here) > 0
    on_s3, here = both("SELECT * FROM minhash_dedup({ds}, 'text', clustering := 'star', verify := 'exact'{so}) "
                       "ORDER BY ALL")
    assert on_s3 == here and len(here) > 0
    on_s3, here = both("SELECT band, band_key, size, sample_rowid FROM minhash_buckets({ds}, 'text', top := 3{so})")
    assert on_s3 == here
    on_s3, here = both("SELECT metric, value FROM minhash_report({ds}, 'text', sample := 200{so}) "
                       "WHERE metric IN ('num_bands', 'rows') ORDER BY metric")
    assert on_s3 == here and len(here) == 2


def test_optimize_and_prewarm_on_s3(s3, con, table):
    bucket = s3.make_bucket("lms-duck-s3-optimize")
    uri = f"s3://{bucket}/c.lance"
    opts = s3.storage_options()
    lance.write_dataset(table.slice(0, 400), uri, storage_options=opts)
    so = f"storage_options := {sql_json(opts)}"
    con.execute(f"SELECT * FROM minhash_build({lit(uri)}, 'text', {so})").fetchall()
    lance.write_dataset(table.slice(400, 200), uri, storage_options=opts, mode="append")
    action, added = con.execute(f"SELECT action, rows_added FROM minhash_optimize({lit(uri)}, 'text', {so})").fetchone()
    assert action != "none" and added == 200
    assert con.execute(f"SELECT sum(\"rows\") FROM minhash_indexes({lit(uri)}, {so})").fetchone() == (600,)
    from lance_minhash_sql.index.opened import clear_cache

    clear_cache()  # what the calls above cached: prewarm then loads every segment from the store
    complete, loaded, sigs, total, segments = con.execute(
        f"SELECT complete, bytes_loaded, signatures_loaded, signatures_total, segments "
        f"FROM minhash_prewarm({lit(uri)}, 'text', {so})").fetchone()
    assert complete and sigs == total == 600 and segments >= 1
    assert loaded >= 600 * (8 + 2 * 128)  # at least each row's id and 128 u16 hashes


def test_options_from_a_duckdb_secret(s3, remote, table, monkeypatch):
    """NULL storage_options on s3://: the options of the secret whose scope matches, read
    through a side cursor of the calling connection at plan time and at execution."""
    uri, _ = remote
    o = s3.storage_options()
    bucket = uri.split("/")[2]
    secret = (f"name=lms_s3;type=s3;provider=config;serializable=true;scope=s3://{bucket};"
              f"endpoint={o['aws_endpoint'].split('://')[1]};key_id={o['aws_access_key_id']};region={o['aws_region']};"
              f"secret={o['aws_secret_access_key']};session_token=;url_style=path;use_ssl=false")
    looked_up = []
    real = storage.read_secret

    def read_http_secret(cur, target, secret_type="s3"):  # httpfs's s3 type is not installable here
        found = real(cur, target, "http")
        looked_up.append(target)
        return None if found is None else found._replace(secret_string=secret if found.secret_string else None)

    monkeypatch.setattr(storage, "read_secret", read_http_secret)
    con = lms.connect()
    con.execute(f"CREATE SECRET lms_s3 (TYPE http, SCOPE 's3://{bucket}')")
    q = queries(table)[1]
    ds = lance.dataset(uri, storage_options=o)
    t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=5, with_row_id=True, columns=["id"])
    assert con.execute(f"SELECT _rowid FROM minhash_search({lit(uri)}, 'text', {lit(q)}, 5)").fetchall() == \
        [(r,) for r in t.column("_rowid").to_pylist()]
    assert con.execute(f"SELECT count(*) FROM minhash_pairs({lit(uri)}, 'text')").fetchone()[0] > 0
    assert con.execute(f"SELECT count(*) FROM minhash_indexes({lit(uri)})").fetchone() == (1,)
    assert looked_up and all(t == uri for t in looked_up)

    plain = lms.install(duckdb.connect())  # the user's own connection: secrets stay redacted
    plain.execute(f"CREATE SECRET lms_s3 (TYPE http, SCOPE 's3://{bucket}')")
    with pytest.raises(duckdb.Error) as err:
        plain.execute(f"SELECT * FROM minhash_indexes({lit(uri)})").fetchall()
    msg = str(err.value)
    assert "DatasetError" in msg and "'lms_s3'" in msg and "lance_minhash_sql.connect()" in msg
    assert o["aws_secret_access_key"] not in msg
    # given options win: no lookup at all
    looked_up.clear()
    assert plain.execute(f"SELECT count(*) FROM minhash_indexes({lit(uri)}, storage_options := {sql_map(o)})"
                     ).fetchone() == (1,)
    assert looked_up == []


def _auth(s3, count: str) -> None:
    req = urllib.request.Request(s3.endpoint + "/moto-api/reset-auth", data=count.encode(), method="POST",
                                 headers={"Content-Type": "text/plain"})  # a form body would reach moto empty
    urllib.request.urlopen(req, timeout=5).read()


def test_wrong_secret_key_names_the_uri_not_the_secret(s3, remote, con):
    uri, _ = remote
    import boto3

    client = boto3.client("iam", endpoint_url=s3.endpoint, aws_access_key_id=s3.ACCESS_KEY,
                          aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION)
    client.create_user(UserName="lms-wrong-secret")
    key = client.create_access_key(UserName="lms-wrong-secret")["AccessKey"]
    wrong = "lms-WRONG-secret-0a1b2c3d4e5f"
    opts = s3.storage_options(aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=wrong)
    _auth(s3, "0")  # moto checks signatures from now on
    try:
        with pytest.raises(duckdb.Error) as err:
            con.execute(f"SELECT * FROM minhash_search_ids({lit(uri)}, 'text', 'a b c', 3, "
                    f"storage_options := {sql_map(opts)})").fetchall()
    finally:
        _auth(s3, "inf")
    msg = str(err.value)
    assert "DatasetError" in msg and uri in msg
    assert wrong not in msg and key["SecretAccessKey"] not in msg and s3.SECRET_KEY not in msg


# --------------------------------------------------------------------------- CLI


def test_cli_storage_option_build_and_search(s3, table, capsys):
    bucket = s3.make_bucket("lms-duck-s3-cli")
    uri = f"s3://{bucket}/c.lance"
    opts = s3.storage_options()
    lance.write_dataset(table.slice(0, 500), uri, storage_options=opts)
    flags = [a for k, v in opts.items() for a in ("--storage-option", f"{k}={v}")]
    assert cli.main(["build", uri, "text", "--quiet", *flags]) == 0
    out = capsys.readouterr()
    assert "500 rows indexed" in out.out
    q = table.column("text")[3].as_py()
    assert cli.main(["search", uri, "text", q, "-k", "3", "--columns", "id", *flags]) == 0
    out = capsys.readouterr()
    assert "_distance" in out.out and s3.SECRET_KEY not in out.out + out.err
    assert cli.main(["pairs", uri, "text", "--quiet", *flags]) == 0
    assert "pairs at threshold" in capsys.readouterr().out

    # no options: Lance cannot reach the bucket; the error names the URI, never a secret
    assert cli.main(["search", uri, "text", q, "--storage-option", "aws_endpoint=http://127.0.0.1:9",
                     "--storage-option", f"aws_secret_access_key={s3.SECRET_KEY}",
                     "--storage-option", "aws_access_key_id=x", "--storage-option", "allow_http=true",
                     "--storage-option", "aws_region=us-east-1"]) == 2
    err = capsys.readouterr().err
    assert uri in err and s3.SECRET_KEY not in err


def test_cli_storage_option_needs_key_and_value(capsys):
    assert cli.main(["search", "s3://b/c.lance", "text", "q", "--storage-option", "aws_region=us-east-1",
                     "--storage-option", "hunter2-secret"]) == 2
    err = capsys.readouterr().err
    assert "--storage-option #2 (of 2) has no '='" in err and "KEY=VALUE" in err and "hunter2" not in err
    assert cli.main(["build", "s3://b/c.lance", "text", "--storage-option", "=hunter2"]) == 2
    err = capsys.readouterr().err
    assert "empty key" in err and "hunter2" not in err


@pytest.mark.parametrize("command", ["build", "optimize", "search", "pairs", "clusters", "dedup", "report"])
def test_cli_help_documents_storage_option(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert "--storage-option KEY=VALUE" in out and "repeat" in out


def test_a_connections_storage_options_are_forgotten_with_it():
    import gc

    from lance_minhash_sql.runtime.cache import clear_cache

    clear_cache()
    before = storage.tokens_held()
    con = lms.connect()
    token = con.execute("SELECT _lms_storage('minhash_search', 's3://b/x.lance', "
                        "'{\"aws_secret_access_key\": \"hunter2\"}', getvariable('_lms_connection'))").fetchone()[0]
    assert storage.options_of(token) == {"aws_secret_access_key": "hunter2"}
    assert storage.tokens_held() == before + 1
    con.close()
    del con
    gc.collect()
    assert storage.tokens_held() == before
    with pytest.raises(InvalidParameterError, match="unknown"):
        storage.options_of(token)
