# minhash_band_keys(sig, num_bands := 16) -> UBIGINT[]: Lance's LSH band keys.

# name: known answer (docs/signatures.md), The quick brown fox
SELECT list_transform(minhash_band_keys(minhash_signature('The quick brown fox', num_hashes := 4, shingle_size := 2), num_bands := 2), lambda k: printf('%016x', k))
----
['00f30f3501d458ea', '01aec5df28d04915']

# name: known answer (docs/signatures.md), Fox, positional
SELECT list_transform(minhash_band_keys(minhash_signature('Fox', 4, 2), 2), lambda k: printf('%016x', k))
----
['003cf6e803312eca', '017c5504fbc83f36']

# name: known answer (docs/signatures.md) from a literal signature
SELECT minhash_band_keys([45071, 22998, 20762, 52524], 2) = [68415139679066346, 121251802238699797]::UBIGINT[]
----
True

# name: result type, default 16 bands, band id in the top byte
SELECT typeof(k), len(k), list_transform(k, lambda x: x >> 56) FROM (SELECT minhash_band_keys(minhash_signature('hello big world')) AS k)
----
'UBIGINT[]'	16	[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]

# name: one band and one row per band
SELECT len(minhash_band_keys(minhash_signature('a b c'), 1)), len(minhash_band_keys(minhash_signature('a b c'), 128))
----
1	128

# name: NULL signature gives NULL
SELECT minhash_band_keys(NULL, 2), minhash_band_keys(minhash_signature(''), 2)
----
NULL	NULL

# name: equal bands give equal keys
SELECT (minhash_band_keys([1, 2, 3, 4], 2))[1] = (minhash_band_keys([1, 2, 9, 9], 2))[1], (minhash_band_keys([1, 2, 3, 4], 2))[2] = (minhash_band_keys([1, 2, 9, 9], 2))[2]
----
True	False

# name: signature lengths and band counts varying per row
SELECT i, len(minhash_band_keys(s, b)) FROM (VALUES (1, [1, 2, 3, 4], 2), (2, [1, 2, 3, 4, 5, 6], 3), (3, NULL, 5), (4, [45071, 22998, 20762, 52524], 2), (5, [1, 2, 3, 4], 4)) v(i, s, b) ORDER BY i
----
1	2
2	3
3	NULL
4	2
5	4

# name: per-row keys agree with constant-parameter keys
SELECT bool_and(minhash_band_keys(s, b) = CASE b WHEN 2 THEN minhash_band_keys([45071, 22998, 20762, 52524], 2) ELSE minhash_band_keys([45071, 22998, 20762, 52524], 4) END) FROM (VALUES ([45071, 22998, 20762, 52524], 2), ([45071, 22998, 20762, 52524], 4)) v(s, b)
----
True

# name: error num_bands does not divide the signature length
SELECT minhash_band_keys(minhash_signature('a b c'), 7)
----
error: InvalidParameterError: minhash_band_keys: the signature has 128 values (its num_hashes); num_bands := 7 does not divide num_hashes := 128

# name: error default num_bands on a short signature
SELECT minhash_band_keys([1, 2, 3, 4])
----
error: InvalidParameterError: num_bands := 16 does not divide num_hashes := 4

# name: error num_bands 0
SELECT minhash_band_keys([1, 2], 0)
----
error: InvalidParameterError: num_bands := 0 is out of range

# name: error num_bands over 256
SELECT minhash_band_keys(minhash_signature('a b c', 512), 512)
----
error: InvalidParameterError: num_bands := 512 is out of range: requires 1 <= num_bands <= 256

# name: error num_bands NULL
SELECT minhash_band_keys([1, 2], NULL)
----
error: InvalidParameterError: minhash_band_keys: num_bands is NULL

# name: error num_bands not an integer
SELECT minhash_band_keys([1, 2], 1.5)
----
error: InvalidParameterError: num_bands := 1.5 must be an integer

# name: error NULL element in the signature
SELECT minhash_band_keys([1, NULL], 1)
----
error: InvalidInputError: sig contains NULL elements

# name: error not a signature
SELECT minhash_band_keys('abc', 1)
----
error: ConversionException: can't be cast to the destination type USMALLINT[]
