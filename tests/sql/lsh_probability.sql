# lsh_probability(similarity, num_bands, rows_per_band) -> DOUBLE: 1 - (1 - s^r)^b.

# name: matches the formula on a grid of values
SELECT count(*), bool_and(abs(lsh_probability(s, b, r) - (1 - (1 - s ** r) ** b)) < 1e-12) FROM (SELECT s / 20 AS s FROM range(21) t(s)) CROSS JOIN (VALUES (1, 1), (16, 8), (8, 16), (32, 4), (256, 16), (2, 64)) v(b, r)
----
126	True

# name: one value against the formula
SELECT round(lsh_probability(0.5, 16, 8), 15), round(1 - (1 - 0.5 ** 8) ** 16, 15)
----
0.060701904106184	0.060701904106184

# name: endpoints
SELECT lsh_probability(0, 16, 8), lsh_probability(1, 16, 8), lsh_probability(0.5, 1, 1)
----
0.0	1.0	0.5

# name: steep near the threshold (1/b)^(1/r)
SELECT lsh_probability(0.5, 8, 16) < 0.01, lsh_probability(0.95, 8, 16) > 0.99
----
True	True

# name: NULL similarity gives NULL
SELECT lsh_probability(NULL, 16, 8)
----
NULL

# name: values varying per row, with a NULL
SELECT i, round(lsh_probability(s, b, r), 12) FROM (VALUES (1, 0.8, 8, 16), (2, NULL, 1, 1), (3, 0.5, 32, 4), (4, 0.9, 1, 2)) v(i, s, b, r) ORDER BY i
----
1	0.204201973504
2	NULL
3	0.873211213623
4	0.81

# name: result type
SELECT typeof(lsh_probability(0.5, 2, 2))
----
'DOUBLE'

# name: error similarity above 1
SELECT lsh_probability(1.5, 16, 8)
----
error: InvalidParameterError: lsh_probability: similarity := 1.5 must be a number in [0, 1]

# name: error similarity below 0
SELECT lsh_probability(-0.1, 16, 8)
----
error: InvalidParameterError: similarity := -0.1 must be a number in [0, 1]

# name: error similarity NaN
SELECT lsh_probability('nan'::DOUBLE, 16, 8)
----
error: InvalidParameterError: similarity := nan must be a number in [0, 1]

# name: error similarity out of range in one row of many
SELECT lsh_probability(s, 4, 4) FROM (VALUES (0.2), (0.4), (2.0)) v(s)
----
error: InvalidParameterError: similarity := 2.0 must be a number in [0, 1]

# name: error num_bands 0
SELECT lsh_probability(0.5, 0, 8)
----
error: InvalidParameterError: num_bands := 0, rows_per_band := 8 must both be >= 1

# name: error rows_per_band 0
SELECT lsh_probability(0.5, 16, 0)
----
error: InvalidParameterError: num_bands := 16, rows_per_band := 0 must both be >= 1

# name: error num_bands not an integer
SELECT lsh_probability(0.5, 1.5, 8)
----
error: InvalidParameterError: num_bands := 1.5 must be an integer

# name: error num_bands NULL
SELECT lsh_probability(0.5, NULL, 8)
----
error: InvalidParameterError: lsh_probability: num_bands is NULL

# name: error rows_per_band NULL
SELECT lsh_probability(0.5, 16, NULL)
----
error: InvalidParameterError: lsh_probability: rows_per_band is NULL
