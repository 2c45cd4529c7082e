"""A local S3-compatible server (moto) that counts the requests and bytes it serves."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Counter:
    """Requests by method, and response bytes, since the last :meth:`reset`."""

    requests: dict = field(default_factory=dict)
    bytes_out: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.requests = {}
            self.bytes_out = 0

    def total(self) -> int:
        return sum(self.requests.values())

    def snapshot(self) -> dict:
        with self.lock:
            return {"requests": sum(self.requests.values()), "by_method": dict(self.requests),
                    "bytes": self.bytes_out}


class _Counting:
    """WSGI middleware: counts each request and the bytes of each response body."""

    def __init__(self, app, counter: Counter):
        self.app = app
        self.counter = counter

    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "?")
        with self.counter.lock:
            self.counter.requests[method] = self.counter.requests.get(method, 0) + 1
        for chunk in self.app(environ, start_response):
            with self.counter.lock:
                self.counter.bytes_out += len(chunk)
            yield chunk


class S3Server:
    """``moto`` on ``127.0.0.1:<free port>`` behind the counting middleware."""

    ACCESS_KEY = "lms-test-access-key"
    SECRET_KEY = "lms-test-SECRET-9f8e7d6c5b4a"
    REGION = "us-east-1"

    def __init__(self):
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.counter = Counter()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    def start(self) -> "S3Server":
        self._server.start()
        wsgi = self._server._server  # werkzeug's server; wrap its app
        wsgi.app = _Counting(wsgi.app, self.counter)
        return self

    def stop(self) -> None:
        self._server.stop()

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
