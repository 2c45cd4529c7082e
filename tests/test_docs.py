"""The repository documents itself: docstrings and docs cite files that exist in it, and
the figures the docs state are the code's."""

from __future__ import annotations

import pathlib
import re

import pyarrow as pa

from lance_minhash_sql.core.params import MinHashParams, lsh_probability, optimal_bands, recall_bands
from lance_minhash_sql.core.sizes import parse_bytes
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.kernels.minhash import coefficients

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def sources() -> list[pathlib.Path]:
    files = list((ROOT / "lance_minhash_sql").rglob("*.py")) + list((ROOT / "lance_minhash_sql").rglob("*.sql"))
    files += list((ROOT / "tests").rglob("*.py")) + list((ROOT / "tests").rglob("*.sql"))
    files += list(DOCS.glob("*.md")) + [ROOT / "README.md"]
    return [f for f in files if f.name != "test_docs.py"]


def test_nothing_cites_documents_outside_the_repository():
    banned = re.compile(r"contract §|contract section|DESIGN §|DESIGN\.md|\.\./shared|/work/shared")
    for path in sources():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not banned.search(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"


def test_every_cited_docs_page_exists():
    cited = set()
    for path in sources():
        cited |= set(re.findall(r"docs/([\w.-]+\.md)", path.read_text(encoding="utf-8")))
    assert {"signatures.md", "parameters.md"} <= cited
    assert {"index-format.md", "search.md"} <= cited
    missing = {name for name in cited if not (DOCS / name).exists()}
    assert not missing, missing


def test_known_answer_vectors_of_signatures_md_are_the_codes():
    text = (DOCS / "signatures.md").read_text(encoding="utf-8")
    a, b, c = coefficients(4)
    for name, values in (("a", a), ("b", b), ("c", c)):
        assert f"{name} = " + " ".join(f"{int(x):016x}" for x in values) in text
    signer = signer_for(MinHashParams(4, 2, 2))
    texts = ["The quick brown fox", "Fox"]
    sigs, has = signer.sign(pa.array(texts))
    assert has.all()
    for t, sig, keys in zip(texts, sigs, signer.band_keys(sigs)):
        line = next(l for l in text.splitlines() if l.startswith(f'"{t}"'))
        assert line.split()[-6:] == ["signature", *(f"{int(v):04x}" for v in sig), "band", "keys",
                                     *(f"{int(k):016x}" for k in keys)][-6:]
        assert "signature " + " ".join(f"{int(v):04x}" for v in sig) in line


def test_byte_size_table_of_parameters_md_is_the_rule():
    text = (DOCS / "parameters.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (`[^|]+`) \| ([\d,]+) \|$", text, re.M)
    assert len(rows) == 4
    for texts, n in rows:
        for t in re.findall(r"`([^`]+)`", texts):
            assert parse_bytes(t, "x") == int(n.replace(",", "")), t


def test_band_table_of_parameters_md_is_the_math():
    text = (DOCS / "parameters.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([\d.]+) \| (\d+) x (\d+) \| ([\d.]+) \| (\d+) x (\d+) \| ([\d.]+) \|$", text, re.M)
    assert len(rows) == 5
    for t, rb, rr, rp, ob, orr, op in rows:
        t = float(t)
        assert recall_bands(t, 128) == (int(rb), int(rr)) and optimal_bands(t, 128) == (int(ob), int(orr))
        for b, r, p in ((rb, rr, rp), (ob, orr, op)):
            decimals = len(p.split(".")[-1]) if "." in p else 0
            assert abs(lsh_probability(t, int(b), int(r)) - float(p)) < 10 ** -decimals
