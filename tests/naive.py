"""Slow, obvious reference implementations used as oracles (docs/signatures.md: shingles, hashing).

Tokens come from ``lance.tokenize`` itself; hashing from the ``xxhash`` package.
"""

from __future__ import annotations

import lance
import xxhash

MASK = (1 << 64) - 1


def splitmix_coefficients(k):
    state = 42
    def nxt():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    ab = [(nxt() | 1, nxt()) for _ in range(k)]
    c = [nxt() | 1 for _ in range(k)]
    return [p[0] for p in ab], [p[1] for p in ab], c


def lance_tokens(text, tokenizer_params):
    return [t.text for t in lance.tokenize(text, **tokenizer_params.lance_tokenize_kwargs())]


def shingles(tokens, shingle_size):
    n = len(tokens)
    if n == 0:
        return []
    w = min(shingle_size, n)
    return ["\x1f".join(tokens[s:s + w]).encode("utf-8") for s in range(n - w + 1)]


def signature_of_tokens(tokens, num_hashes, shingle_size):
    sh = shingles(tokens, shingle_size)
    if not sh:
        return None
    a, b, c = splitmix_coefficients(num_hashes)
    xs = [xxhash.xxh64_intdigest(s, seed=42) for s in sh]
    sig = []
    for i in range(num_hashes):
        m = min((a[i] * x + b[i]) & MASK for x in xs)
        sig.append(((c[i] * m) & MASK) >> 48)
    return sig


def signature(text, params):
    if text is None:
        return None
    return signature_of_tokens(lance_tokens(text, params.tokenizer), params.num_hashes, params.shingle_size)


def band_keys(sig, num_bands):
    r = len(sig) // num_bands
    keys = []
    for j in range(num_bands):
        data = b"".join(v.to_bytes(2, "little") for v in sig[j * r:(j + 1) * r])
        keys.append((j << 56) | (xxhash.xxh64_intdigest(data, seed=42) & 0x00FFFFFFFFFFFFFF))
    return keys


def exact_jaccard(text_a, text_b, params):
    sa = set(shingles(lance_tokens(text_a, params.tokenizer), params.shingle_size))
    sb = set(shingles(lance_tokens(text_b, params.tokenizer), params.shingle_size))
    if not sa or not sb:
        return None
    return len(sa & sb) / len(sa | sb)


def representative_links(rowids, sigs, keys, min_eq, max_reps):
    """Links of ``selfjoin/clusters.py``'s rule, bucket by bucket in plain numpy: members by
    ascending row id; each later member verified against every rep (>= ``min_eq`` equal
    values) and linked to each it passes; one passing none becomes a rep while fewer than
    ``max_reps`` are held. Returns ``[(member rowid, rep rowid)]``."""
    import numpy as np

    links = []
    for j in range(keys.shape[1]):
        order = np.lexsort((rowids, keys[:, j]))
        k = keys[order, j]
        for grp in np.split(order, np.flatnonzero(np.diff(k)) + 1):
            reps = [grp[0]]
            for x in grp[1:]:
                passed = False
                for y in reps:
                    if int((sigs[x] == sigs[y]).sum()) >= min_eq:
                        links.append((int(rowids[x]), int(rowids[y])))
                        passed = True
                if not passed and len(reps) < max_reps:
                    reps.append(x)
    return links
