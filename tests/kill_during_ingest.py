"""Run an ingest (``lifecycle/ingest.py``) of BATCH into CORPUS and kill this process
(SIGKILL, as ``kill -9``) at its Nth event: ``python kill_during_ingest.py CORPUS BATCH N``.

Events are counted from the start of the ingest: every file-system call of
``audited_calls.py``, every read of kept rows (handed to Lance as it is read), and each
step of the ingest (the append, the index update, the publishing commit), before and
after it. With N = 0 nothing is killed, and the last line printed is ``events TOTAL``,
so a test chooses its moments by count, never by wall-clock time.
"""

from __future__ import annotations

import os
import signal
import sys

from audited_calls import counts
from lance_minhash_sql.lifecycle import ingest as ingest_module

state = {"on": False, "n": 0, "kill_at": 0}


def event(name: str = "") -> None:
    if not state["on"]:
        return
    state["n"] += 1
    if state["n"] == state["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)


def counted(fn):
    def wrapper(*args, **kwargs):
        event()
        out = fn(*args, **kwargs)
        event()
        return out
    return wrapper


def main() -> int:
    corpus, batch, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    state["kill_at"] = kill_at
    ingest_module.TAKE_ROWS = 64  # many batches of kept rows: many moments inside Lance's write
    for name in ("append_detached", "optimize", "publish", "plan_ingest", "take_rows"):
        setattr(ingest_module, name, counted(getattr(ingest_module, name)))
    sys.addaudithook(lambda name, args: event(name) if counts(name, args) else None)
    state["on"] = True
    r = ingest_module.ingest(corpus, batch, "text", 0.8, verify="exact")
    state["on"] = False
    print(r.rows_appended, r.rows_dropped, r.index_action)
    print("events", state["n"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
