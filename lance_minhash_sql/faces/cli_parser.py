r"""The ``lance-minhash`` command line's arguments: every subcommand, its flags and their help.

The commands themselves are in ``faces/cli.py``.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from types import MappingProxyType

from lance_minhash_sql.core.checks import CLUSTERINGS, EXECUTORS, VERIFY_MODES
from lance_minhash_sql.core.params import DEFAULT_SELF_JOIN_MEMORY, KEEP_POLICIES

__all__ = ["build_parser", "CommandParser", "EXAMPLES"]

EXAMPLES = r"""
    lance-minhash build corpus.lance text    # Lance's MINHASHLSH index, written by our engine
    lance-minhash search corpus.lance text "some text" -k 5
    lance-minhash pairs corpus.lance text --threshold 0.8 --output pairs.parquet
    lance-minhash join eval.lance corpus.lance text --threshold 0.8 --output contaminated.parquet
    lance-minhash dedup corpus.lance text --keep longest --output deduped.lance   # dry run without --output
    lance-minhash optimize corpus.lance text --merge all   # index appended rows, merge segments
    lance-minhash ingest corpus.lance batch.lance text --verify exact   # append the batch's new rows, index them
    lance-minhash cleanup corpus.lance --older-than "7 days"   # remove old versions and the files only they use
    lance-minhash report corpus.lance text --out report/   # S-curve, buckets, error; PNG plots
    lance-minhash estimate corpus.lance text --thresholds 0.7 0.8 0.9   # dry run: what dedup would drop, and its cost
    lance-minhash review corpus.lance text --out review.html   # a page to review what dedup drops
    lance-minhash demo                       # synthetic corpus + SQL over it, in ./demo
    lance-minhash bench --rows 1000000       # ours vs Lance native, datasketch, rensa
    lance-minhash warmup                     # compile every numba kernel into the cache, once
    lance-minhash sql "SELECT minhash_similarity(minhash_signature('a b c'), minhash_signature('a b c d'))"
    lance-minhash build s3://bucket/corpus.lance text --storage-option aws_region=us-east-1 \
        --storage-option aws_access_key_id=... --storage-option aws_secret_access_key=...
"""

SELF_JOIN_MEMORY_HELP = (f"what the self-join may hold, bytes or e.g. 1GiB (default {DEFAULT_SELF_JOIN_MEMORY >> 20} MiB); "
                         "answers do not depend on it")
STORAGE_OPTION_HELP = ("Lance object-store option KEY=VALUE for an s3://, gs://, az://... dataset, e.g. "
                       "aws_region=us-east-1, aws_endpoint=http://127.0.0.1:9000, allow_http=true; repeat for "
                       "each option (values are never printed)")


def rows_arg(value: str) -> int | None:
    """``-k``: a number of rows, or ``all`` (no limit, with --threshold)."""
    if value == "all":
        return None
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shlex.quote(value)}: must be a whole number of rows or all; pass e.g. "
                                         "-k 10, or -k all with --threshold") from None


# argparse's own messages (Python 3.11's wording), rewritten by CommandParser.usage_error
_ARGUMENT = re.compile(r"argument (?P<name>[^:]+): (?P<message>.*)", re.S)
_INVALID_TYPE = re.compile(r"invalid (?P<type>\w+) value: (?P<value>.*)", re.S)
_INVALID_CHOICE = re.compile(r"invalid choice: (?P<value>.*) \(choose from .*\)", re.S)
_RULES = MappingProxyType({"int": "must be a whole number", "float": "must be a number"})


class CommandParser(argparse.ArgumentParser):
    """An argument parser that lists its own option strings (``options``), and, for the
    top-level parser, its commands' parsers by name (``commands``).

    A usage error is one line on stderr, ``lance-minhash CMD: error: --option value: rule;
    fix``, and at most one ``hint:`` line, exit status 2 (:meth:`usage_error`). A value
    that starts with ``-`` (``--memory-limit -1GiB``) is taken as the value of the option
    before it unless it is one of the command's options, so that the command's own check
    judges it."""

    def __init__(self, *args, **kwargs):
        self.options: set[str] = set()
        self.commands: dict[str, "CommandParser"] = {}
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.options.update(action.option_strings)
        return action

    def _action(self, name: str) -> argparse.Action | None:
        """The action named ``name`` in argparse's messages (``--output/-o``, ``dataset``)."""
        for action in self._actions:
            if name in ("/".join(action.option_strings), action.metavar, action.dest):
                return action
        return None

    def parse_known_args(self, args=None, namespace=None):
        if args is not None:
            args = list(args)
            takes_value = {o for a in self._actions if a.nargs is None and a.option_strings for o in a.option_strings}
            for i in range(len(args) - 1):
                if args[i] in takes_value and args[i + 1].startswith("-") and args[i + 1] not in self.options \
                        and args[i + 1] not in ("-", "--"):
                    args[i:i + 2] = [f"{args[i]}={args[i + 1]}", None]
            args = [a for a in args if a is not None]
        return super().parse_known_args(args, namespace)

    def parse_args(self, args=None, namespace=None):
        args, extras = self.parse_known_args(args, namespace)
        if extras:  # named by the command they were given to
            command = self.commands.get(getattr(args, "command", None), self)
            command.error(f"unrecognized arguments: {' '.join(extras)}")
        return args

    def usage_error(self, message: str) -> tuple[str, str]:
        """argparse's ``message`` as one line in the command line's terms, naming the
        argument, the rule and a fix, and a hint ('' for none)."""
        more = f"{self.prog} --help lists every argument"
        if message.startswith("the following arguments are required: "):
            names = message.split(": ", 1)[1].split(", ")
            action = self._action(names[0])
            shown = [n.upper() if not n.startswith("-") else n for n in names]
            what = f" ({action.help})" if action is not None and action.help not in (None, argparse.SUPPRESS) else ""
            return f"missing {' '.join(shown)}{what}", more
        if message.startswith("unrecognized arguments: "):
            extras = message.split(": ", 1)[1]
            return f"{extras}: {'no such option' if extras.startswith('-') else 'one argument too many'} of {self.prog}", more
        m = _ARGUMENT.fullmatch(message)
        if m is None:
            return message, more
        name, message = m["name"], m["message"]
        action = self._action(name)
        flag = action.option_strings[0] if action is not None and action.option_strings else name
        if action is not None and action.dest == "command" and not action.option_strings:  # the subcommand
            choice = _INVALID_CHOICE.fullmatch(message)
            if choice:
                return (f"{_value(choice['value'])}: no such command; choose one of {', '.join(action.choices)}",
                        f"{self.prog} --help describes each")
        example = _example(flag, action)
        fix = f"; pass e.g. {flag} {example}" if example else ""
        hint = f"{flag}: {action.help}" if action is not None and action.help not in (None, argparse.SUPPRESS) \
            else more
        choice, typed = _INVALID_CHOICE.fullmatch(message), _INVALID_TYPE.fullmatch(message)
        if choice:
            return (f"{flag} {_value(choice['value'])}: must be one of {', '.join(map(str, action.choices))}{fix}",
                    hint)
        if typed:
            return f"{flag} {_value(typed['value'])}: {_RULES.get(typed['type'], 'is not a ' + typed['type'])}{fix}", hint
        if message.startswith("expected "):
            return f"{flag} needs a value{fix}", hint
        if message.startswith("ignored explicit argument "):
            return f"{flag} takes no value ({message.split(' ', 3)[3]} given)", hint
        return f"{flag} {message}", hint  # a type of this file, whose message starts with the value

    def error(self, message: str):
        line, hint = self.usage_error(message)
        self.exit(2, f"{self.prog}: error: {line}\n" + (f"hint: {hint}\n" if hint else ""))


def _value(text: str) -> str:
    """A value argparse quotes with repr(), as typed on the command line."""
    try:
        return shlex.quote(str(ast.literal_eval(text)))
    except (ValueError, SyntaxError):
        return text


# example values of options without a default (used in the fixes of usage errors)
_EXAMPLES = MappingProxyType({"--threshold": "0.8", "--num-bands": "16", "-k": "10", "--memory-limit": "1GiB",
                              "--out": "review.html"})


def _example(flag: str, action: argparse.Action | None) -> str:
    """An example value of an option, for the fix of a usage error ('' for none)."""
    if action is None or not action.option_strings or action.nargs == 0:
        return ""
    if action.choices:
        return str(next(iter(action.choices)) if action.default is None else action.default)
    if isinstance(action.default, (int, float)) and not isinstance(action.default, bool):
        return f"{action.default:g}" if isinstance(action.default, float) else str(action.default)
    if isinstance(action.default, list):
        return " ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in action.default)
    return _EXAMPLES.get(flag, "")


def build_parser() -> CommandParser:
    """The ``lance-minhash`` argument parser: one subcommand per command of ``faces/cli.py``
    (``args.command`` names it; ``parser.commands[name].options`` lists its options)."""
    parser = CommandParser(
        prog="lance-minhash",
        description="Near-duplicate detection for text in Lance datasets, in SQL.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_tool_commands, _index_commands, _pipeline_commands, _self_join_commands, _estimate_command,
                _page_commands):
        add(sub)
    parser.commands = dict(sub.choices)
    return parser


def command(sub, name: str, help_: str, **kw) -> argparse.ArgumentParser:
    """A subcommand whose --help opens with its one-line help."""
    kw.setdefault("description", help_[0].upper() + help_[1:] + ".")
    return sub.add_parser(name, help=help_, **kw)


def storage_flag(p) -> None:
    p.add_argument("--storage-option", action="append", default=None, metavar="KEY=VALUE",
                   help=STORAGE_OPTION_HELP)


def verify_flag(p) -> None:
    p.add_argument("--verify", default="estimate", type=str.lower, choices=VERIFY_MODES,
                   help="estimate (the MinHash estimate reaches the threshold, default) or exact (the exact "
                        "shingle Jaccard does; candidates down to 4 standard deviations of the estimate under it)")


def executor_flag(p) -> None:
    p.add_argument("--executor", default="local", type=str.lower, choices=EXECUTORS,
                   help="local (this process, default) or ray (Ray tasks on the running cluster: the same answer)")
    p.add_argument("--ray-address", default=None,
                   help="the Ray cluster for --executor ray (default: RAY_ADDRESS, else the cluster running here)")


def clustering_flag(p) -> None:
    p.add_argument("--clustering", default="components", type=str.lower, choices=CLUSTERINGS,
                   help="components (connected components, default) or star (every dropped row has a kept "
                        "twin it is similar to)")
    verify_flag(p)


def _tool_commands(sub) -> None:
    """demo, bench, warmup"""
    p = command(sub, "demo", "generate a synthetic corpus and run SQL over it")
    p.add_argument("--rows", type=int, default=20_000, help="rows of the synthetic corpus (default 20000)")
    p.add_argument("--dir", default="demo", help="folder for the demo dataset (default ./demo)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    p = command(sub, "bench", "benchmark against Lance native and other peers, side by side")
    p.add_argument("--rows", type=int, default=1_000_000, help="corpus rows (default 1000000)")
    p.add_argument("--data", default="bench-data", help="folder for benchmark corpora, reused between runs "
                   "(default ./bench-data)")
    p.add_argument("--peers", default=None, help="comma-separated subset of ours,lance,datasketch,rensa")
    p.add_argument("--sample-rows", type=int, default=20_000, help="rows for the slow Python peers")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")

    p = command(sub, "warmup", "compile every numba kernel into numba's on-disk cache (for container "
                       "images and CI caches): later processes then compile nothing")
    p.add_argument("--quiet", action="store_true", help="no status line")


def _index_commands(sub) -> None:
    """build, optimize, search"""
    p = command(sub, "build", "build Lance's MinHash LSH index on a text column")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the text column")
    p.add_argument("--num-hashes", type=int, default=128,
                   help="MinHash values per signature, k (default 128); more: finer similarity estimates")
    p.add_argument("--num-bands", type=int, default=None, help="default 16, or chosen by --threshold")
    p.add_argument("--shingle-size", type=int, default=3,
                   help="tokens per shingle (default 3); the sets whose Jaccard similarity is estimated")
    p.add_argument("--threshold", type=float, default=None, help="choose num_bands for this similarity")
    p.add_argument("--tokenizer", default=None, help='JSON tokenizer options, e.g. \'{"base_tokenizer": "whitespace"}\'')
    p.add_argument("--memory-limit", default=None, help="sort budget, bytes or e.g. 512MiB (default 64 MiB)")
    p.add_argument("--no-replace", action="store_true", help="fail if the column already has an index")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    executor_flag(p)
    storage_flag(p)

    p = command(sub, "optimize", "bring a MinHash index up to date: index new rows, merge segments")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the indexed text column")
    p.add_argument("--merge", default="1",
                   help="0: a delta segment for new fragments only; N: rewrite the newest N segments with them "
                        "(default 1, as Lance); all; or comma-separated segment uuids")
    p.add_argument("--memory-limit", default=None, help="sort budget, bytes or e.g. 512MiB (default 64 MiB)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    storage_flag(p)

    p = command(sub, "search", "top-k most similar rows of a text")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the indexed text column")
    p.add_argument("query", help="the text to look up")
    p.add_argument("-k", type=rows_arg, default=10, help="rows to return (default 10), or all: every row at "
                   "least --threshold similar")
    p.add_argument("--threshold", type=float, default=None,
                   help="only rows at least this similar (estimated Jaccard, 0 < t <= 1)")
    p.add_argument("--verify", default="estimate", type=str.lower, choices=VERIFY_MODES,
                   help="exact: add _jaccard, the exact shingle Jaccard (with --threshold: the rows whose _jaccard "
                        "reaches it, candidates down to 4 standard deviations of the estimate under it)")
    p.add_argument("--exact", action="store_true", help=argparse.SUPPRESS)  # the older spelling of --verify exact
    p.add_argument("--columns", default=None, help="comma-separated columns to show (default all)")
    p.add_argument("--filter", default=None, help="Lance filter applied before the top-k, e.g. \"lang = 'en'\"")
    p.add_argument("--fast-search", action="store_true", help="indexed rows only (skip unindexed fragments)")
    p.add_argument("--quiet", action="store_true", help="no compile notice")
    storage_flag(p)


def _pipeline_commands(sub) -> None:
    """ingest, cleanup"""
    p = command(sub, "ingest", "append a batch's rows that have no near-duplicate in the corpus (nor earlier in the "
                               "batch) to the corpus, and index them, in one new version")
    p.add_argument("corpus", help="path or URI of the indexed Lance dataset that takes the rows")
    p.add_argument("batch", help="path or URI of the Lance dataset of new rows (same columns; needs no index)")
    p.add_argument("column", help="the text column")
    p.add_argument("--threshold", type=float, default=0.8, help="similarity that makes a row a near-duplicate "
                   "(default 0.8)")
    verify_flag(p)
    p.add_argument("--order-by", default=None, help="SQL ORDER BY over the batch's columns: the order batch rows "
                   "are taken in (default: row id)")
    p.add_argument("--memory-limit", default=None, help=SELF_JOIN_MEMORY_HELP)
    p.add_argument("--dry-run", action="store_true", help="only plan: count what would be appended, write nothing")
    p.add_argument("--output", default=None, help="write the plan (one row per batch row) to this .parquet or "
                   ".csv file")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    executor_flag(p)
    p.add_argument("--corpus-storage-option", action="append", default=None, metavar="KEY=VALUE",
                   help="object-store option of CORPUS; " + STORAGE_OPTION_HELP)
    p.add_argument("--batch-storage-option", action="append", default=None, metavar="KEY=VALUE",
                   help="object-store option of BATCH")

    p = command(sub, "cleanup", "remove a dataset's versions older than a retention, and the files (index "
                                "segments included) that only they use; the latest version is always kept")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("--older-than", default="7 days", help="retention: versions older than this go, e.g. '7 days', "
                   "'12 hours', '0 seconds' (default 7 days)")
    storage_flag(p)


def _self_join_commands(sub) -> None:
    """pairs, join, clusters, dedup"""
    def self_join(name: str, help_: str, link: str, output: str):
        p = command(sub, name, help_)
        p.add_argument("dataset", help="path or URI of the Lance dataset")
        p.add_argument("column", help="the indexed text column")
        p.add_argument("--threshold", type=float, default=0.8, help=f"{link} (default 0.8)")
        p.add_argument("--output", default=None, help=output)
        p.add_argument("--memory-limit", default=None, help=SELF_JOIN_MEMORY_HELP)
        executor_flag(p)
        return p

    p = self_join("pairs", "every pair of rows whose MinHash similarity reaches a threshold",
                  "similarity a pair must reach", "write all pairs to this .parquet or .csv file (streamed)")
    p.add_argument("--exact", action="store_true", help=argparse.SUPPRESS)  # the older spelling of --verify exact
    verify_flag(p)
    p.add_argument("--limit", type=int, default=20, help="pairs to print without --output (default 20)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    storage_flag(p)

    p = command(sub, "join", "every (left, right) pair of rows of two datasets whose MinHash similarity "
                                    "reaches a threshold, through RIGHT's index (decontamination, ingestion dedup)")
    p.add_argument("left", help="path or URI of the dataset whose rows are looked up (signed with RIGHT's parameters)")
    p.add_argument("right", help="path or URI of the indexed dataset")
    p.add_argument("column", help="the text column of LEFT (and of RIGHT unless --right-column)")
    p.add_argument("--right-column", default=None, help="RIGHT's indexed text column, if named differently")
    p.add_argument("--threshold", type=float, default=0.8, help="similarity a pair must reach (default 0.8)")
    p.add_argument("--exact", action="store_true", help=argparse.SUPPRESS)  # the older spelling of --verify exact
    verify_flag(p)
    p.add_argument("--output", default=None, help="write all pairs to this .parquet or .csv file (streamed)")
    p.add_argument("--memory-limit", default=None, help=SELF_JOIN_MEMORY_HELP)
    executor_flag(p)
    p.add_argument("--limit", type=int, default=20, help="pairs to print without --output (default 20)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    for side in ("left", "right"):
        p.add_argument(f"--{side}-storage-option", action="append", default=None, metavar="KEY=VALUE",
                       help=f"an object-store option of the {side.upper()} dataset only (repeat for several)")

    p = self_join("clusters", "near-duplicate clusters (rows in clusters of two or more)", "similarity of a link",
                  "write the clusters to this .parquet or .csv file")
    p.add_argument("--limit", type=int, default=20, help="rows to print without --output (default 20)")
    p.add_argument("--quiet", action="store_true", help="no notice of a first-run kernel compilation")
    clustering_flag(p)
    storage_flag(p)

    p = self_join("dedup", "keep one row per near-duplicate cluster (dry run unless told where to write)",
                  "similarity of a link", "write the kept rows to this new Lance dataset")
    p.add_argument("--keep", default="first", type=str.lower, choices=KEEP_POLICIES,
                   help="first (lowest row id, default) or longest (longest text)")
    p.add_argument("--order-by", default=None,
                   help="keep the first row by this SQL ORDER BY over the dataset's columns, e.g. 'quality DESC'")
    p.add_argument("--delete-in-place", action="store_true",
                   help="delete the duplicates from DATASET in one commit (a new version; the old stays readable)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    clustering_flag(p)
    storage_flag(p)


def _estimate_command(sub) -> None:
    """estimate"""
    p = command(sub, "estimate", "a dry run of the self-join from a sample of rows: the share of rows with a "
                "near-duplicate, rows dedup would drop, pairs (95%% intervals), and what the full run would cost")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the indexed text column")
    p.add_argument("--thresholds", type=float, nargs="+", default=[0.7, 0.8, 0.9],
                   help="similarities a pair must reach, one row each (default 0.7 0.8 0.9)")
    p.add_argument("--sample-rows", type=int, default=2000, help="rows drawn and searched (default 2000)")
    verify_flag(p)
    p.add_argument("--seed", type=int, default=0, help="random seed of the sample (default 0)")
    p.add_argument("--memory-limit", default=None, help="the budget of the self-join whose cost is projected, "
                   f"bytes or e.g. 1GiB (default {DEFAULT_SELF_JOIN_MEMORY >> 20} MiB)")
    p.add_argument("--quiet", action="store_true", help="no status line")
    storage_flag(p)


def _page_commands(sub) -> None:
    """review, report, sql"""
    p = command(sub, "review", "write one HTML page to review what dedup drops: parameters, S-curve, cluster sizes, "
                "sample clusters side by side with their exact Jaccard")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the indexed text column")
    p.add_argument("--out", required=True, help="the HTML file to write, e.g. review.html")
    p.add_argument("--threshold", type=float, default=0.8, help="similarity of a link (default 0.8)")
    p.add_argument("--keep", default="first", type=str.lower, choices=KEEP_POLICIES,
                   help="the row dedup keeps: first (lowest row id, default) or longest (longest text)")
    p.add_argument("--order-by", default=None, help="keep the first row by this SQL ORDER BY, e.g. 'quality DESC'")
    p.add_argument("--per-kind", type=int, default=3,
                   help="clusters shown of each kind: largest, borderline, random (default 3)")
    p.add_argument("--max-members", type=int, default=8, help="rows shown per cluster (default 8)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sample (default 0)")
    p.add_argument("--id-column", default=None,
                   help="the column that names rows on the page (default: a column named id, doc_id, uuid, ... "
                        "or *_id, else _rowid, the row ids)")
    p.add_argument("--memory-limit", default=None, help=SELF_JOIN_MEMORY_HELP)
    p.add_argument("--batch", default=None, help="review the plan of ingesting this dataset into DATASET instead: "
                   "each dropped batch row beside its twin, a corpus row or an earlier batch row (--per-kind "
                   "rows of each kind: borderline, random)")
    p.add_argument("--quiet", action="store_true", help="no progress")
    clustering_flag(p)
    storage_flag(p)

    p = command(sub, "report", "diagnostics of an index: S-curve vs sampled pairs, buckets, error")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the indexed text column")
    p.add_argument("--out", default=None, help="folder for scurve.png, buckets.png, estimator.png (needs matplotlib)")
    p.add_argument("--sample", type=int, default=2000, help="query rows, and most pairs kept per bin (default 2000)")
    p.add_argument("--threshold", type=float, default=None, help="similarity for fp/fn areas and recall "
                   "(default: the S-curve threshold)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sample (default 0)")
    p.add_argument("--top", type=int, default=10, help="largest buckets to list (default 10)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    storage_flag(p)

    p = command(sub, "sql", "run SQL with every function installed (argument, file or - for stdin)",
                       description="Run SQL statements with every lance_minhash_sql function installed and print "
                                   "each result.")
    p.add_argument("query", nargs="?", default="-", metavar="SQL|FILE|-",
                   help="SQL text (one or more statements), a .sql FILE, or - to read SQL from stdin (default -)")
    p.add_argument("--output", "-o", default=None,
                   help="write the last statement's rows to this file (.csv, .parquet or .json lines)")
    p.add_argument("--quiet", action="store_true", help="no status line")
