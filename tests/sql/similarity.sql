# minhash_similarity(sig_a, sig_b) -> DOUBLE: fraction of equal positions, Lance's f32 widened.

# name: identical texts give 1.0
SELECT minhash_similarity(minhash_signature('the cat sat on the mat'), minhash_signature('the cat sat on the mat'))
----
1.0

# name: near-duplicate texts (naive oracle: 91 of 128 positions equal)
SELECT minhash_similarity(minhash_signature('the cat sat on the mat today'), minhash_signature('the cat sat on the mat yesterday'))
----
0.7109375

# name: literal lists
SELECT minhash_similarity([1, 2, 3, 4], [1, 2, 3, 5]), minhash_similarity([7], [8])
----
0.75	0.0

# name: value is the float32 quotient widened (1/3)
SELECT minhash_similarity([1, 2, 3], [1, 5, 6])
----
0.3333333432674408

# name: string literal casts to a signature
SELECT minhash_similarity('[1, 2]', '[1, 3]')
----
0.5

# name: NULL either side gives NULL
SELECT minhash_similarity(NULL, [1]), minhash_similarity([1], NULL), minhash_similarity(NULL, NULL), minhash_similarity(minhash_signature(''), minhash_signature('a'))
----
NULL	NULL	NULL	NULL

# name: rows of different lengths and NULLs in one chunk
SELECT i, minhash_similarity(a, b) FROM (VALUES (1, [1, 2], [1, 3]), (2, [1, 2, 3], [1, 2, 3]), (3, NULL, [1]), (4, [5, 6, 7, 8], [5, 0, 7, 0]), (5, [9], NULL)) v(i, a, b) ORDER BY i
----
1	0.5
2	1.0
3	NULL
4	0.5
5	NULL

# name: result type
SELECT typeof(minhash_similarity([1], [1]))
----
'DOUBLE'

# name: error mismatched signature lengths
SELECT minhash_similarity([1, 2], [1, 2, 3])
----
error: InvalidInputError: minhash_similarity: sig_a has 2 values but sig_b has 3

# name: error signatures of different num_hashes
SELECT minhash_similarity(minhash_signature('a b c', 64), minhash_signature('a b c'))
----
error: InvalidInputError: sig_a has 64 values but sig_b has 128

# name: error empty signature
SELECT minhash_similarity([]::USMALLINT[], []::USMALLINT[])
----
error: InvalidInputError: sig_a is an empty list

# name: error NULL element
SELECT minhash_similarity([1, 2], [1, NULL])
----
error: InvalidInputError: sig_b contains NULL elements

# name: error value out of the USMALLINT range
SELECT minhash_similarity([70000], [1])
----
error: ConversionException: out of range for the destination type UINT16
