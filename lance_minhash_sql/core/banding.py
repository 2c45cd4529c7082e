"""The LSH arithmetic of an index's bands, written once (``docs/parameters.md``): the
S-curve, the choice of ``(num_bands, rows_per_band)`` for a threshold, the areas it is
weighed by, and the floor of the estimates that ``verify := 'exact'`` verifies. Plain
numbers in, numbers out: the parameter classes that use them are in :mod:`.params`.

The S-curve: a pair of similarity ``s`` shares at least one of ``b`` bands of ``r`` rows
with probability ``P(s) = 1 - (1 - s**r)**b``; its steepest point is near
``(1/b)**(1/r)``. :func:`recall_bands` picks the fewest bands that make a pair at a target
threshold a candidate with probability >= :data:`CANDIDATE_PROBABILITY` (what a build
with ``threshold`` uses: candidates are verified, so recall at the threshold is what
counts); :func:`optimal_bands` instead minimises the weighted false-positive and
false-negative areas around the threshold, as datasketch does, restricted to ``b``
dividing ``num_hashes`` (it puts the threshold mid-curve: at 0.8 it gives 8 x 16, under
which a pair of similarity 0.8 is a candidate with probability 0.2 only).
"""

from __future__ import annotations

from typing import Any

from lance_minhash_sql.core.checks import check_int, check_real, check_similarity, check_threshold
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.lance_format import MAX_NUM_BANDS, MAX_NUM_HASHES

__all__ = [
    "scurve",
    "lsh_probability",
    "scurve_threshold",
    "false_positive_area",
    "false_negative_area",
    "optimal_bands",
    "recall_bands",
    "CANDIDATE_PROBABILITY",
    "VERIFY_SIGMAS",
    "exact_candidate_floor",
    "candidate_floor",
]

# a build with threshold := t makes a pair of similarity t a candidate at least this often
CANDIDATE_PROBABILITY = 0.9
VERIFY_SIGMAS = 4.0  # verify := 'exact': candidates down to this many standard deviations under the threshold


def scurve(similarity, num_bands, rows_per_band):
    """``1 - (1 - s**r)**b``, the S-curve, unchecked: for floats and NumPy arrays (the
    one place the formula is written; :func:`lsh_probability` checks its arguments)."""
    return 1.0 - (1.0 - similarity**rows_per_band) ** num_bands


def lsh_probability(similarity: float, num_bands: int, rows_per_band: int) -> float:
    """Probability that a pair of Jaccard ``similarity`` shares at least one band."""
    s = check_similarity("similarity", similarity)
    b = check_int("num_bands", num_bands, "use a positive integer")
    r = check_int("rows_per_band", rows_per_band, "use a positive integer")
    if b < 1 or r < 1:
        raise InvalidParameterError(f"num_bands={b}, rows_per_band={r} must both be >= 1")
    return scurve(s, b, r)


def scurve_threshold(num_bands: int, rows_per_band: int) -> float:
    """The similarity where the S-curve rises steepest, approximately ``(1/b)**(1/r)``."""
    return (1.0 / num_bands) ** (1.0 / rows_per_band)


def _integrate(f, a: float, b: float, steps: int = 200) -> float:
    """Composite Simpson's rule (steps even)."""
    if b <= a:
        return 0.0
    h = (b - a) / steps
    total = f(a) + f(b)
    for i in range(1, steps):
        total += (4 if i % 2 else 2) * f(a + i * h)
    return total * h / 3.0


def false_positive_area(threshold: float, num_bands: int, rows_per_band: int) -> float:
    """Integral of P(s) over s in [0, threshold]: weight of candidates below the threshold."""
    return _integrate(lambda s: scurve(s, num_bands, rows_per_band), 0.0, threshold)


def false_negative_area(threshold: float, num_bands: int, rows_per_band: int) -> float:
    """Integral of 1 - P(s) over s in [threshold, 1]: weight of pairs the index misses."""
    return _integrate(lambda s: 1.0 - scurve(s, num_bands, rows_per_band), threshold, 1.0)


def _threshold_and_hashes(threshold: Any, num_hashes: Any) -> tuple[float, int]:
    return check_threshold(threshold), check_int("num_hashes", num_hashes, "e.g. 128", 1, MAX_NUM_HASHES)


def recall_bands(threshold: float, num_hashes: int = 128,
                 probability: float = CANDIDATE_PROBABILITY) -> tuple[int, int]:
    """``(num_bands, rows_per_band)``: the fewest bands (``b`` dividing ``num_hashes``,
    ``b <= 256``) under which a pair of similarity ``threshold`` becomes a candidate with
    at least ``probability``; the most bands if none reaches it.

    Fewer bands mean a smaller index and fewer false candidates to verify; every
    candidate is then verified on the full signature, so what matters at the threshold
    is recall. This is what ``minhash_build(..., threshold := t)`` uses.

    >>> recall_bands(0.8, 128)
    (16, 8)
    >>> recall_bands(0.5, 128)
    (64, 2)
    """
    t, k = _threshold_and_hashes(threshold, num_hashes)
    p = check_similarity("probability", probability)
    bands = [b for b in range(1, min(k, MAX_NUM_BANDS) + 1) if k % b == 0]
    for b in bands:
        if scurve(t, b, k // b) >= p:
            return b, k // b
    return bands[-1], k // bands[-1]


def optimal_bands(
    threshold: float,
    num_hashes: int = 128,
    false_positive_weight: float = 0.5,
    false_negative_weight: float = 0.5,
) -> tuple[int, int]:
    """``(num_bands, rows_per_band)`` with ``b * r == num_hashes`` and ``b <= 256`` minimising
    ``fp_weight * false_positive_area + fn_weight * false_negative_area`` at ``threshold``.

    >>> optimal_bands(0.8, 128)
    (8, 16)
    >>> optimal_bands(0.5, 128)
    (32, 4)
    """
    t, k = _threshold_and_hashes(threshold, num_hashes)
    for name, w in (("false_positive_weight", false_positive_weight), ("false_negative_weight", false_negative_weight)):
        check_real(name, w, "e.g. 0.5", lo=0)
    if false_positive_weight + false_negative_weight <= 0:
        raise InvalidParameterError("false_positive_weight and false_negative_weight must not both be 0")
    best: tuple[float, int, int] | None = None
    for b in range(1, min(k, MAX_NUM_BANDS) + 1):
        if k % b:
            continue
        r = k // b
        err = (false_positive_weight * false_positive_area(t, b, r)
               + false_negative_weight * false_negative_area(t, b, r))
        if best is None or err < best[0] - 1e-15:
            best = (err, b, r)
    assert best is not None
    return best[1], best[2]


def exact_candidate_floor(threshold: float, num_hashes: int) -> float:
    """The MinHash estimate a candidate pair must reach to be verified by its exact Jaccard
    (``verify := 'exact'``): ``threshold - VERIFY_SIGMAS * sqrt(t (1 - t) / k)``, at least 0.

    Why: the estimate of a pair of Jaccard ``J`` is ``eq / k``, ``eq`` the equal values of
    ``k`` independent min-hashes, each equal with probability ``J``: ``eq`` is binomial,
    the estimate has mean ``J`` and standard deviation ``sqrt(J (1 - J) / k)`` (0.035 at
    ``J = 0.8, k = 128``). Verifying the estimate alone drops about half of the pairs
    whose Jaccard is just at the threshold. A pair at ``J = t`` falls more than
    :data:`VERIFY_SIGMAS` (4) standard deviations under its mean with probability about
    3e-5 (normal tail), and a pair above ``t`` (for ``t >= 0.5``: a smaller deviation, a
    mean further up) less often; so every candidate whose exact Jaccard reaches ``t`` is
    kept but for that fraction, while the candidates far below (most of the band
    collisions that are not near-duplicates) are never fetched and shingled. The margin
    is 0.141 at ``t = 0.8, k = 128`` (floor 0.659) and 0.106 at ``t = 0.9``.

    >>> round(exact_candidate_floor(0.8, 128), 3), exact_candidate_floor(1.0, 128)
    (0.659, 1.0)
    """
    t = check_threshold(threshold)
    k = check_int("num_hashes", num_hashes, "e.g. 128", 1)
    return max(0.0, t - VERIFY_SIGMAS * (t * (1.0 - t) / k) ** 0.5)


def candidate_floor(threshold: float, num_hashes: int, verify: str) -> float:
    """The MinHash estimate a candidate (a hit, a pair, a link) must reach to be verified
    under ``verify``: ``threshold`` itself (``"estimate"``), or
    :func:`exact_candidate_floor` (``"exact"``: the exact Jaccard then decides at the
    threshold). The one home of that choice: the search's cut (``core/params.py:
    threshold_cut``, ``query/scores.py: verified``), the self-join and the join
    (``selfjoin/verify.py: candidate_matches``), exact star's links (``selfjoin/links.py:
    link_rule``), the review's chains (``faces/chains.py``), the dry run's neighbours and
    the calibration (``diagnostics/``) all take it from here.

    >>> candidate_floor(0.8, 128, "estimate"), round(candidate_floor(0.8, 128, "exact"), 3)
    (0.8, 0.659)
    """
    return exact_candidate_floor(threshold, num_hashes) if verify == "exact" else threshold
