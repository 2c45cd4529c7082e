"""Every documented argument exists and every existing one is documented: the argument
tables of docs/sql.md against the SQL macros (lance_minhash_sql/sql/*.sql), and the
command synopsis of docs/cli.md against the command line's parser, both ways."""

from __future__ import annotations

import re
from pathlib import Path

from lance_minhash_sql.faces.cli_parser import build_parser

ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = ROOT / "lance_minhash_sql" / "sql"
# documented once for every table function that takes a dataset (docs/sql.md, docs/cli.md)
SQL_EVERYWHERE = {"storage_options"}
CLI_EVERYWHERE = {"-h", "--help", "--storage-option", "--quiet"}
# older spellings, still accepted (with a DeprecatedSpellingWarning) and never documented
SQL_OLDER = {"exact"}
CLI_OLDER = {"--exact"}
# an older spelling written out, as SQL, Python or a command-line option
OLDER_SPELLINGS = re.compile(r"(?<![\w-])--exact\b|\bexact\s*:=\s*true\b|\bexact\s*=\s*True\b", re.I)


def split_arguments(text: str) -> list[tuple[str, str | None]]:
    """``(name, default)`` of each argument of a signature (``name := default``)."""
    out, depth, quoted, cur = [], 0, False, ""
    for ch in text + ",":
        if ch == "'":
            quoted = not quoted
        elif not quoted:
            depth += (ch in "([{") - (ch in ")]}")
        if ch == "," and depth == 0 and not quoted:
            name, _, default = cur.partition(":=")
            out.append((name.strip().strip('"'), " ".join(default.split()) or None))
            cur = ""
        else:
            cur += ch
    return out


def macros() -> dict[str, list]:
    found = {}
    for path in SQL_DIR.glob("*.sql"):
        for m in re.finditer(r"MACRO (\w+)\((.*?)\) AS\b", path.read_text(encoding="utf-8"), re.S):
            if not m.group(1).startswith("_"):
                found[m.group(1)] = [a for a in split_arguments(m.group(2))
                                     if a[0] not in SQL_EVERYWHERE | SQL_OLDER]
    return found


def documented_sql() -> dict[str, tuple[list, dict, set]]:
    """Each function row of docs/sql.md: its positional arguments, its named ones with
    their defaults, and the named arguments its row mentions elsewhere."""
    found = {}
    for line in (ROOT / "docs" / "sql.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `(\w+)\((.*?)\)` \|", line)
        if m:
            assert m.group(1) not in found, f"{m.group(1)} has two rows in docs/sql.md"
            found[m.group(1)] = (*by_kind(split_arguments(m.group(2))),
                                 set(re.findall(r"`(\w+) := ", line[m.end():])))
    return found


def by_kind(arguments: list) -> tuple[list, dict]:
    """``(positional names in order, {named: default})``."""
    return [n for n, d in arguments if d is None], {n: d for n, d in arguments if d is not None}


def test_split_arguments():
    assert split_arguments("a, \"column\", k := 10, verify := 'a, b'") == [
        ("a", None), ("column", None), ("k", "10"), ("verify", "'a, b'")]


def test_sql_argument_tables_match_the_macros_both_ways():
    code, docs = macros(), documented_sql()
    assert len(code) > 15
    assert sorted(code) == sorted(docs), (sorted(set(code) - set(docs)), sorted(set(docs) - set(code)))
    for name in code:
        positional, named = by_kind(code[name])
        doc_positional, doc_named, mentioned = docs[name]
        assert doc_positional == positional, (name, doc_positional, positional)
        assert set(named) == set(doc_named) | (mentioned & set(named)), \
            (name, "undocumented:", set(named) - set(doc_named) - mentioned, "not arguments:", set(doc_named) - set(named))
        for arg, default in doc_named.items():
            assert named[arg] == default, (name, arg, default, named[arg])
    text = (ROOT / "docs" / "sql.md").read_text(encoding="utf-8")
    assert "also takes\n`storage_options := NULL`" in text


def synopsis() -> dict[str, set[str]]:
    """Each command's options in docs/cli.md's synopsis (continuation lines belong to the
    command above them)."""
    block = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split("## Commands", 1)[1].split("```")[1]
    found: dict[str, set[str]] = {}
    command = None
    for line in block.splitlines():
        m = re.match(r"lance-minhash (\w+)", line)
        if m:
            command = m.group(1)
            found.setdefault(command, set())
        if command is not None:
            found[command] |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-z])\b", line))
    return found


def parser_options() -> dict[str, set[str]]:
    return {name: set(p.options) - CLI_EVERYWHERE - CLI_OLDER for name, p in build_parser().commands.items()}


def test_cli_synopsis_matches_the_parser_both_ways():
    code, docs = parser_options(), synopsis()
    assert sorted(code) == sorted(docs), (sorted(set(code) - set(docs)), sorted(set(docs) - set(code)))
    for name in code:
        assert docs[name] == code[name], (name, "undocumented:", code[name] - docs[name],
                                          "not an option:", docs[name] - code[name])
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "--storage-option KEY=VALUE" in text and "`--quiet` hides them" in text


def test_section_pointers_name_a_heading_of_the_page_they_link():
    """``[page.md](path), *Section*`` in the README, docs and examples: the linked page
    exists and has a heading that starts with the section's name."""
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").glob("*/README.md")]
    checked = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"\]\(([^)#\s]+\.md)\),? \*([^*]+)\*", text):
            target = (page.parent / m.group(1)).resolve()
            assert target.exists(), (page, m.group(1))
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)
            name = " ".join(m.group(2).split())
            assert any(h.startswith(name) for h in headings), (page, m.group(0), headings)
            checked += 1
        assert "the main README, *" not in text, page
    assert checked >= 2


def test_cluster_counts_in_the_docs_count_clusters_not_rows():
    """minhash_clusters has one row per clustered row: a count of clusters is
    count(DISTINCT cluster_id), never count(*)."""
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").glob("*.*")]
    for page in pages:
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert not re.search(r"count\(\*\) AS clusters", text, re.I), page


def test_no_doc_example_or_help_uses_an_older_spelling():
    """README, docs, examples and the command line's help never write ``--exact``, ``exact :=
    true`` or ``exact=True``: they write ``verify`` (the older spellings still work, and warn)."""
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
             *(p for p in (ROOT / "examples").rglob("*") if p.is_file() and "target" not in p.parts
               and p.suffix in (".md", ".py", ".sql", ".yml", ".ipynb", ".txt"))]
    assert len(pages) > 15
    found = [(page.relative_to(ROOT), m.group(0)) for page in pages
             for m in OLDER_SPELLINGS.finditer(page.read_text(encoding="utf-8"))]
    parser = build_parser()
    found += [(f"lance-minhash {name} --help", m.group(0)) for name, p in parser.commands.items()
              for m in OLDER_SPELLINGS.finditer(p.format_help())]
    assert not found, found
    assert OLDER_SPELLINGS.search("pairs --exact --output") and OLDER_SPELLINGS.search("exact := TRUE")
    assert not OLDER_SPELLINGS.search("--verify exact, verify := 'exact', verify='exact'")
