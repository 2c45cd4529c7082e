"""Confidence intervals of sample estimates (``docs/estimate.md`` explains each).

* :func:`wilson`: the Wilson score interval of a binomial proportion; with
  ``continuity=True`` Newcombe's continuity-corrected form (its coverage stays at or above
  the nominal level where the plain form dips under it), and with ``population`` the
  finite-population correction of a sample drawn without replacement: the variance
  ``p (1 - p) / n`` times ``(N - n) / (N - 1)``, which is the plain interval's with
  ``n / fpc`` in place of ``n``.
* :func:`mean_interval`: the normal interval of a sample mean, ``mean ± z s / sqrt(n)``
  (``s`` the sample standard deviation), with the same correction, and the two-stage
  variance when each value is itself estimated from a subsample.

Both give the point itself once the sample is the whole population.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["Z95", "fpc", "wilson", "mean_interval"]

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile: two-sided 95 %


def fpc(n: int, population: int | None) -> float:
    """The finite-population correction ``(N - n) / (N - 1)`` of the variance of a mean over
    ``n`` of ``N`` units drawn without replacement (1 without ``N``; 0 for the whole)."""
    if population is None:
        return 1.0
    if population <= 1 or n >= population:
        return 0.0
    return (population - n) / (population - 1)


def wilson(successes, n, *, population: int | None = None, continuity: bool = False,
           z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)``: the Wilson score interval of ``successes / n`` (arrays or numbers),
    clipped to ``[0, 1]``. ``successes`` may be a sum of values in ``[0, 1]`` rather than of
    0/1 outcomes: the interval then uses the largest variance such a mean can have,
    ``p (1 - p)``, and covers at least as often."""
    s = np.asarray(successes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    p = np.divide(s, n, out=np.zeros(np.broadcast(s, n).shape), where=n > 0)
    f = fpc(int(n.max()) if n.size else 0, population) if population is not None else 1.0
    if f == 0.0:
        return p.copy(), p.copy()
    m = n / f  # the binomial sample size with the same variance
    z2 = z * z
    if not continuity:
        centre = (p + z2 / (2 * m)) / (1 + z2 / m)
        half = z * np.sqrt(p * (1 - p) / m + z2 / (4 * m * m)) / (1 + z2 / m)
        return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    # Newcombe (1998), method 4, on the effective sample size m
    denom = 2 * (m + z2)
    with np.errstate(invalid="ignore"):
        lo = (2 * m * p + z2 - 1 - z * np.sqrt(np.maximum(z2 - 2 - 1 / m + 4 * p * (m * (1 - p) + 1), 0.0))) / denom
        hi = (2 * m * p + z2 + 1 + z * np.sqrt(np.maximum(z2 + 2 - 1 / m + 4 * p * (m * (1 - p) - 1), 0.0))) / denom
    lo = np.where(p <= 0, 0.0, lo)
    hi = np.where(p >= 1, 1.0, hi)
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def mean_interval(values: np.ndarray, *, population: int | None = None, within: np.ndarray | None = None,
                  z: float = Z95) -> tuple[float, float, float]:
    """``(mean, low, high)`` of ``values``' mean: the normal interval with the sample
    standard deviation, finite-population corrected. ``within``: each value's own
    variance when it is itself estimated (a second stage of sampling inside the unit);
    the variance of the mean is then the two-stage one,
    ``fpc s^2 / n + (n / N) sum(within) / n^2`` (the sample variance ``s^2`` of the
    estimated values holds their own variance once already; the correction takes away
    all of it but the share ``n / N`` that sampling every unit would leave)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return 0.0, 0.0, 0.0
    mean = float(v.mean())
    if v.size < 2:
        return mean, mean, mean
    var = float(v.var(ddof=1)) * fpc(v.size, population) / v.size
    if within is not None and population is not None:
        var += min(1.0, v.size / max(population, 1)) * float(np.sum(within)) / v.size ** 2
    half = z * math.sqrt(var)
    return mean, mean - half, mean + half
