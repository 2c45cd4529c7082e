"""A local S3-compatible server (moto) in its own process that counts the requests and
bytes it serves.

The server runs in a child process, as a real store would: the client under test shares
no interpreter (and no GIL) with it. Two extra paths answer the tests and benchmarks:
``GET /_lms/counts`` gives the requests by method and the response bytes since the last
``POST /_lms/reset``. moto checks no credentials; the middleware refuses a request signed
with an access key id other than :attr:`S3Server.ACCESS_KEY` as S3 does (403
``InvalidAccessKeyId``).

Run by hand: ``python tests/s3server.py --port 5005``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Counting:
    """WSGI middleware: counts each request and the bytes of each response body."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.requests: dict = {}
        self.bytes_out = 0
        self.log: list = []  # (method, path, range) of each request since the last reset

    def _answer(self, start_response, body: dict):
        data = json.dumps(body).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/_lms/counts":
            with self.lock:
                return self._answer(start_response, {"requests": sum(self.requests.values()),
                                                     "by_method": dict(self.requests), "bytes": self.bytes_out,
                                                     "log": list(self.log)})
        if path == "/_lms/reset":
            with self.lock:
                self.requests, self.bytes_out, self.log = {}, 0, []
            return self._answer(start_response, {"ok": True})
        method = environ.get("REQUEST_METHOD", "?")
        key_id = _access_key_id(environ)
        if key_id is not None and key_id != S3Server.ACCESS_KEY:
            return self._deny(start_response, key_id)
        with self.lock:
            self.requests[method] = self.requests.get(method, 0) + 1
            if len(self.log) < 100_000:
                self.log.append((method, path, environ.get("HTTP_RANGE", "")))
        return self._count(self.app(environ, start_response))

    def _deny(self, start_response, key_id: str):
        """What S3 answers a request signed with an access key it does not know."""
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InvalidAccessKeyId</Code><Message>"
                "The AWS Access Key Id you provided does not exist in our records.</Message>"
                f"<AWSAccessKeyId>{key_id}</AWSAccessKeyId></Error>").encode()
        start_response("403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]

    def _count(self, chunks):
        for chunk in chunks:
            with self.lock:
                self.bytes_out += len(chunk)
            yield chunk


def _access_key_id(environ) -> str | None:
    """The access key id a request is signed with (SigV4 header or presigned query)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    m = re.search(r"Credential=([^/,\s]+)/", auth) or re.search(r"X-Amz-Credential=([^%/&]+)",
                                                              environ.get("QUERY_STRING", ""))
    return m.group(1) if m else None


class S3Server:
    """``moto`` on ``127.0.0.1:<free port>`` in a child process, behind the counting middleware."""

    ACCESS_KEY = "lms-test-access-key"
    SECRET_KEY = "lms-test-SECRET-9f8e7d6c5b4a"
    REGION = "us-east-1"

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> "S3Server":
        self._proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--port", str(self.port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.counts()
                return self
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the moto S3 server on port {self.port} did not start") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None

    def __enter__(self) -> "S3Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _get(self, path: str, method: str = "GET") -> dict:
        req = urllib.request.Request(self.endpoint + path, method=method)
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def counts(self) -> dict:
        """``{"requests": n, "by_method": {...}, "bytes": n, "log": [(method, path, range)]}``
        since the last reset."""
        return self._get("/_lms/counts")

    def reset(self) -> None:
        self._get("/_lms/reset", "POST")

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.ACCESS_KEY,
                            aws_secret_access_key=self.SECRET_KEY, region_name=self.REGION)

    def make_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def storage_options(self, **over) -> dict:
        opts = {"aws_access_key_id": self.ACCESS_KEY, "aws_secret_access_key": self.SECRET_KEY,
                "aws_region": self.REGION, "aws_endpoint": self.endpoint, "allow_http": "true"}
        opts.update(over)
        return opts

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return out


def _serve(port: int) -> None:
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    wsgi = server._server  # werkzeug's server; wrap its app
    wsgi.app = _Counting(wsgi.app)
    threading.Event().wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    _serve(ap.parse_args().port)
