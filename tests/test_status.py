"""Waits on a terminal are never silent (core/status.py): a status line while numba
compiles, while warmup runs, while the CLI's estimate and sql commands run; none off a
terminal or when quiet. Every check counts what was written, never a time window: a
patched step waits until its status line is on the (fake) terminal, then goes on."""

from __future__ import annotations

import io
import re
import types

import pytest

import lance_minhash_sql as lms
from lance_minhash_sql.core import status
from lance_minhash_sql.faces import cli
from lance_minhash_sql.kernels import config as kconfig


class Terminal(io.StringIO):
    def isatty(self):
        return True


def wait_for(predicate, what: str) -> None:
    """Poll until ``predicate()`` holds (no figure of time is asserted)."""
    import time

    for _ in range(4000):
        if predicate():
            return
        time.sleep(0.005)
    raise AssertionError(f"never saw {what}")


def on_a_terminal(monkeypatch) -> Terminal:
    """stderr as a terminal, and status lines that tick every 10 ms (set in the test's
    body: pytest sets its own sys.stderr again between a fixture and the test)."""
    tty = Terminal()
    monkeypatch.setattr("sys.stderr", tty)
    monkeypatch.setattr(status, "TICK_SECONDS", 0.01)
    return tty


def shown_and_erased(text: str, what: str) -> bool:
    """``what``'s line was written (``  what ... Ns``), then erased (spaces, ``\\r``)."""
    return re.search(re.escape(f"  {what} ... ") + r"\d+s\x1b\[K\r +\r", text) is not None


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("status") / "c.lance")
    lms.write_corpus(uri, 2000, with_truth=True)
    lms.build_index(uri, "text")
    return uri


def _compile_event(start: bool):
    """A numba ``numba:compile`` event of one of this package's kernels."""
    from lance_minhash_sql.kernels import minhash

    func = types.SimpleNamespace(__module__=minhash.__name__, __name__="sign_range")
    return types.SimpleNamespace(data={"dispatcher": types.SimpleNamespace(py_func=func)}, is_start=start,
                                 is_end=not start)


def _compiling(log: kconfig.CompileLog, inner: bool = False) -> None:
    log._announced = True  # not the process's first compilation: no notice, no helper process
    log.notify(_compile_event(True))
    if inner:  # a kernel compiled inside its caller's compilation: the same wait
        log.notify(_compile_event(True))
        log.notify(_compile_event(False))


def test_a_compilation_shows_a_status_line_on_a_terminal(monkeypatch):
    terminal = on_a_terminal(monkeypatch)
    log = kconfig.CompileLog()
    _compiling(log, inner=True)
    wait_for(lambda: kconfig.COMPILING in terminal.getvalue(), "the compile status line")
    log.notify(_compile_event(False))
    text = terminal.getvalue()
    assert shown_and_erased(text, kconfig.COMPILING), text
    assert text.endswith("\r") and not status.SHOWN and log.count == 2


@pytest.mark.parametrize("case", ["not a terminal", "quiet"])
def test_a_compilation_shows_nothing_off_a_terminal_or_when_quiet(monkeypatch, case):
    out = Terminal() if case == "quiet" else io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    monkeypatch.setattr(status, "TICK_SECONDS", 0.01)
    log = kconfig.CompileLog()
    log.notice = case != "quiet"  # the CLI's --quiet, LANCE_MINHASH_COMPILE_NOTICE=0
    _compiling(log)
    assert log._line is None or not log._line.enabled
    log.notify(_compile_event(False))
    assert out.getvalue() == "" and not status.SHOWN


def test_the_latest_status_line_shows_and_the_outer_one_comes_back(monkeypatch):
    """A compilation inside a command's step: its line shows, the step's line waits, then
    goes on once the compilation ends."""
    terminal = on_a_terminal(monkeypatch)
    with status.StatusLine("finding the clusters", True):
        wait_for(lambda: "finding the clusters ... " in terminal.getvalue(), "the step's line")
        log = kconfig.CompileLog()
        _compiling(log)
        wait_for(lambda: kconfig.COMPILING in terminal.getvalue(), "the compile line")
        log.notify(_compile_event(False))
        after = len(terminal.getvalue())
        wait_for(lambda: "finding the clusters ... " in terminal.getvalue()[after:], "the step's line again")
    text = terminal.getvalue()
    assert shown_and_erased(text, kconfig.COMPILING) and shown_and_erased(text, "finding the clusters")
    assert text.endswith("\r") and not status.SHOWN


def test_warmup_shows_a_status_line_on_a_terminal(monkeypatch):
    terminal = on_a_terminal(monkeypatch)
    from lance_minhash_sql.faces import warmup as module

    def run_all(tmp):  # the compilations, done once the line is up
        wait_for(lambda: module.WARMING in terminal.getvalue(), "warmup's status line")

    monkeypatch.setattr(module, "_run_all", run_all)
    lms.warmup()
    assert shown_and_erased(terminal.getvalue(), module.WARMING), terminal.getvalue()
    monkeypatch.setattr(module, "_run_all", lambda tmp: None)
    before = terminal.getvalue()
    lms.warmup(progress=False)
    assert terminal.getvalue() == before
    with pytest.raises(lms.InvalidParameterError, match="progress='yes' must be true or false"):
        lms.warmup(progress="yes")


def test_warmup_shows_nothing_off_a_terminal(monkeypatch):
    from lance_minhash_sql.faces import warmup as module

    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    monkeypatch.setattr(status, "TICK_SECONDS", 0.01)
    seen = []
    monkeypatch.setattr(module, "_run_all", lambda tmp: seen.append(list(status.SHOWN)))
    lms.warmup()
    assert seen == [[]] and out.getvalue() == ""


def test_estimate_command_shows_a_status_line_on_a_terminal_only(corpus, monkeypatch, capsys):
    terminal = on_a_terminal(monkeypatch)
    from lance_minhash_sql.diagnostics import estimate as module

    real = module.estimate
    what = "estimating from a sample of 500 rows"

    def estimate(*args, **kwargs):  # runs once the status line is up
        wait_for(lambda: what in terminal.getvalue(), "the estimate's status line")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "estimate", estimate)
    assert cli.main(["estimate", corpus, "text", "--sample-rows", "500"]) == 0
    assert shown_and_erased(terminal.getvalue(), what), terminal.getvalue()
    assert "duplicate" in capsys.readouterr().out
    monkeypatch.setattr(module, "estimate", real)
    before = terminal.getvalue()
    assert cli.main(["estimate", corpus, "text", "--sample-rows", "500", "--quiet"]) == 0
    assert terminal.getvalue() == before


def test_sql_command_shows_a_status_line_per_statement(corpus, monkeypatch, capsys):
    terminal = on_a_terminal(monkeypatch)
    from lance_minhash_sql.duck import install

    real = install.connect
    waits = []

    class Connection:
        """The command's connection, each statement run once its status line is up."""

        def __init__(self, con):
            self.con = con

        def __getattr__(self, name):
            return getattr(self.con, name)

        def sql(self, query):
            if query.lstrip().upper().startswith("SELECT"):
                line = f"  running statement {len(waits) + 1} of 2 ... "
                wait_for(lambda: line in terminal.getvalue(), line)
                waits.append(query)
            return self.con.sql(query)

    monkeypatch.setattr(install, "connect", lambda *a, **k: Connection(real(*a, **k)))
    sql = f"SELECT count(*) AS n FROM minhash_clusters('{corpus}', 'text'); SELECT 42 AS answer"
    assert cli.main(["sql", sql]) == 0
    text = terminal.getvalue()
    assert shown_and_erased(text, "running statement 1 of 2") and shown_and_erased(text, "running statement 2 of 2")
    assert len(waits) == 2 and "42" in capsys.readouterr().out
    before = terminal.getvalue()
    monkeypatch.setattr(install, "connect", real)
    assert cli.main(["sql", "SELECT 42 AS answer", "--quiet"]) == 0
    assert terminal.getvalue() == before
