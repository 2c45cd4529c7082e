"""Run ``lance-minhash dedup DATASET text --output OUTPUT`` and kill this process (SIGKILL,
as ``kill -9``) at its Nth write event: ``python kill_during_write.py DATASET OUTPUT N``.

Events are counted from the moment the output is prepared (``io/rewrite.py`` calls
``prepare_output``): every batch handed to Lance, and every file-system call of
``audited_calls.py``. With N = 0 nothing is
killed, and the last line printed is ``events TOTAL RENAME`` (RENAME: the event number of
the rename that publishes the dataset), so a test can choose its moments by count, never
by wall-clock time.
"""

from __future__ import annotations

import os
import signal
import sys

from audited_calls import counts
from lance_minhash_sql.io import rewrite

state = {"on": False, "n": 0, "rename": 0}


def main() -> int:
    dataset, output, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rewrite.SCAN_BATCH_ROWS = 128  # many batches: many moments inside Lance's write

    def event(name: str) -> None:
        if not state["on"]:
            return
        state["n"] += 1
        if name == "os.rename" and not state["rename"]:
            state["rename"] = state["n"]
        if state["n"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(lambda name, args: event(name) if counts(name, args) else None)
    prepare, write = rewrite.prepare_output, rewrite.write_dataset

    def prepare_output(*args, **kwargs):
        state["on"] = True
        return prepare(*args, **kwargs)

    def write_dataset(uri, batches, *args, **kwargs):
        def counted():
            for b in batches:
                event("batch")
                yield b
        return write(uri, counted(), *args, **kwargs)

    rewrite.prepare_output, rewrite.write_dataset = prepare_output, write_dataset
    from lance_minhash_sql.faces.cli import main as cli

    code = cli(["dedup", dataset, "text", "--threshold", "0.8", "--output", output, "--quiet"])
    state["on"] = False
    print(f"events {state['n']} {state['rename']}")
    return code


if __name__ == "__main__":
    sys.exit(main())
