# shingle_jaccard(text_a, text_b, shingle_size := 3, tokenizer := NULL) -> DOUBLE: exact Jaccard.

# name: identical texts give 1.0
SELECT shingle_jaccard('the cat sat on the mat', 'the cat sat on the mat')
----
1.0

# name: one shingle of three differs (2 shared of 4)
SELECT shingle_jaccard('a b c d e', 'a b c d f')
----
0.5

# name: near-duplicate texts (naive oracle)
SELECT shingle_jaccard('the cat sat on the mat today', 'the cat sat on the mat yesterday')
----
0.6666666666666666

# name: tokenizer normalisation applies (case, accents, punctuation)
SELECT shingle_jaccard('Café, au LAIT!', 'cafe au lait')
----
1.0

# name: shingle_size named and positional
SELECT shingle_jaccard('a b c', 'a b d', shingle_size := 1), shingle_jaccard('a b c', 'a b d', 1), shingle_jaccard('a b c', 'a b d')
----
0.5	0.5	0.0

# name: text shorter than the shingle is one shingle
SELECT shingle_jaccard('a b', 'A B'), shingle_jaccard('a b', 'a b c')
----
1.0	0.0

# name: whitespace tokenizer as JSON string and STRUCT (naive oracle)
SELECT shingle_jaccard('a-b c', 'a b c', 1), shingle_jaccard('a-b c', 'a b c', 1, '{"base_tokenizer": "whitespace"}'), shingle_jaccard('a-b c', 'a b c', 1, {'base_tokenizer': 'whitespace'})
----
1.0	0.25	0.25

# name: ngram tokenizer (naive oracle)
SELECT shingle_jaccard('foxes', 'boxes', shingle_size := 1, tokenizer := '{"base_tokenizer": "ngram"}')
----
0.5

# name: NULL or token-less text gives NULL
SELECT shingle_jaccard(NULL, 'a'), shingle_jaccard('a', NULL), shingle_jaccard('', 'a'), shingle_jaccard('...', '...'), shingle_jaccard(NULL, NULL)
----
NULL	NULL	NULL	NULL	NULL

# name: parameters varying per row
SELECT i, shingle_jaccard(a, b, w) FROM (VALUES (1, 'a b c', 'a b d', 1), (2, 'a b c', 'a b d', 3), (3, NULL, 'x', 2), (4, 'a b c d e', 'a b c d f', 3), (5, 'x y', 'x y', 2)) v(i, a, b, w) ORDER BY i
----
1	0.5
2	0.0
3	NULL
4	0.5
5	1.0

# name: result type
SELECT typeof(shingle_jaccard('a', 'a'))
----
'DOUBLE'

# name: error INTEGER text_a
SELECT shingle_jaccard(1, 'a')
----
error: InvalidInputError: shingle_jaccard: text_a has type INTEGER, but a VARCHAR is required

# name: error BLOB text_b
SELECT shingle_jaccard('a', 'a'::BLOB)
----
error: InvalidInputError: shingle_jaccard: text_b has type BLOB

# name: error list text
SELECT shingle_jaccard(['a'], 'a')
----
error: InvalidInputError: text_a has type VARCHAR[]

# name: error shingle_size 0
SELECT shingle_jaccard('a', 'b', 0)
----
error: InvalidParameterError: shingle_jaccard: shingle_size := 0 must be >= 1

# name: error shingle_size NULL
SELECT shingle_jaccard('a', 'b', NULL)
----
error: InvalidParameterError: shingle_jaccard: shingle_size is NULL

# name: error tokenizer bad JSON
SELECT shingle_jaccard('a', 'b', tokenizer := '{"base_tokenizer": ')
----
error: InvalidParameterError: is not valid JSON

# name: error tokenizer unknown key
SELECT shingle_jaccard('a', 'b', tokenizer := {'stemming': true})
----
error: InvalidParameterError: tokenizer option(s) ['stemming'] are unknown or unsupported
