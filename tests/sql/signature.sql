# minhash_signature(text, num_hashes := 128, shingle_size := 3, tokenizer := NULL) -> USMALLINT[]
# Non-default vectors were computed with tests/naive.py (lance.tokenize + xxhash).

# name: known answer (docs/signatures.md), named parameters
SELECT minhash_signature('The quick brown fox', num_hashes := 4, shingle_size := 2)
----
[45071, 22998, 20762, 52524]

# name: known answer (docs/signatures.md), positional parameters
SELECT minhash_signature('The quick brown fox', 4, 2)
----
[45071, 22998, 20762, 52524]

# name: known answer (docs/signatures.md), Fox
SELECT list_transform(minhash_signature('Fox', num_hashes := 4, shingle_size := 2), lambda v: printf('%04x', v))
----
['2970', 'd6db', '65f8', 'adfc']

# name: result type and default length
SELECT typeof(minhash_signature('hello world')), len(minhash_signature('hello world'))
----
'USMALLINT[]'	128

# name: num_hashes only (named, other defaults kept)
SELECT len(minhash_signature('hello world', num_hashes := 64)), len(minhash_signature('hello world', 1)), len(minhash_signature('hello world', 4096))
----
64	1	4096

# name: NULL text gives NULL
SELECT minhash_signature(NULL), minhash_signature(NULL::VARCHAR, 4)
----
NULL	NULL

# name: texts without tokens give NULL (Lance indexes no signature)
SELECT minhash_signature(''), minhash_signature('   '), minhash_signature('!!! ... ---')
----
NULL	NULL	NULL

# name: the raw tokenizer indexes the empty string
SELECT minhash_signature('', num_hashes := 4, tokenizer := '{"base_tokenizer": "raw"}') IS NOT NULL
----
True

# name: NULL and token-less rows mixed with signed rows in one chunk
SELECT i, len(minhash_signature(t, 8)) FROM (VALUES (1, 'a b c'), (2, NULL), (3, ''), (4, 'd e')) v(i, t) ORDER BY i
----
1	8
2	NULL
3	NULL
4	8

# name: non-default shingle_size (naive oracle)
SELECT minhash_signature('Hello, World! Hello again.', num_hashes := 8, shingle_size := 1)
----
[17069, 395, 46631, 53842, 10343, 52566, 52780, 9843]

# name: tokenizer as JSON string (whitespace, case kept; naive oracle)
SELECT minhash_signature('Hello, World! Hello again.', num_hashes := 8, shingle_size := 2, tokenizer := '{"base_tokenizer": "whitespace", "lower_case": false}')
----
[24605, 49226, 7159, 1067, 37415, 16714, 3147, 60045]

# name: tokenizer as STRUCT literal
SELECT minhash_signature('Hello, World! Hello again.', num_hashes := 8, shingle_size := 2, tokenizer := {'base_tokenizer': 'whitespace', 'lower_case': false})
----
[24605, 49226, 7159, 1067, 37415, 16714, 3147, 60045]

# name: tokenizer as MAP and as JSON value
SELECT minhash_signature('a-b c', 8, tokenizer := MAP {'base_tokenizer': 'whitespace'}) = minhash_signature('a-b c', 8, tokenizer := '{"base_tokenizer": "whitespace"}'::JSON)
----
True

# name: ngram tokenizer (naive oracle)
SELECT minhash_signature('Fox', num_hashes := 6, tokenizer := '{"base_tokenizer": "ngram"}')
----
[20933, 35341, 32753, 41723, 29250, 21503]

# name: default tokenizer folds accents and splits on punctuation (naive oracle)
SELECT minhash_signature('Café au lait, s''il vous plaît', 4)
----
[5137, 21851, 31305, 49751]

# name: NULL and empty tokenizer mean the defaults
SELECT minhash_signature('a b c d', tokenizer := NULL) = minhash_signature('a b c d'), minhash_signature('a b c d', tokenizer := '{}') = minhash_signature('a b c d')
----
True	True

# name: lower_case default ignores case, lower_case false does not
SELECT minhash_signature('HELLO world', 4) = minhash_signature('hello WORLD', 4), minhash_signature('HELLO world', 4, tokenizer := {'lower_case': false}) = minhash_signature('hello WORLD', 4, tokenizer := {'lower_case': false})
----
True	False

# name: shingle_size changes the signature
SELECT minhash_signature('a b c d', shingle_size := 1) = minhash_signature('a b c d')
----
False

# name: parameters varying per row (naive oracle)
SELECT t, k, w, minhash_signature(t, k, w) FROM (VALUES ('The quick brown fox', 4, 2), ('Fox', 4, 2), ('The quick brown fox', 2, 2), (NULL, 3, 1), ('The quick brown fox', 4, 1)) v(t, k, w) ORDER BY k, w, t
----
'The quick brown fox'	2	2	[50943, 16162]
NULL	3	1	NULL
'The quick brown fox'	4	1	[10608, 55003, 19544, 16441]
'Fox'	4	2	[10608, 55003, 26104, 44540]
'The quick brown fox'	4	2	[45071, 22998, 20762, 52524]

# name: tokenizer varying per row
SELECT t, minhash_signature('a-b c', 4, 1, t) = minhash_signature('a-b c', 4, 1, '{"base_tokenizer": "whitespace"}') FROM (VALUES ('{"base_tokenizer": "whitespace"}'), (NULL), ('{"base_tokenizer": "simple"}')) v(t) ORDER BY t NULLS LAST
----
'{"base_tokenizer": "simple"}'	False
'{"base_tokenizer": "whitespace"}'	True
NULL	False

# name: prepared statement parameters
PREPARE p AS SELECT minhash_signature(?, num_hashes := ?, shingle_size := 2); EXECUTE p('The quick brown fox', 4)
----
[45071, 22998, 20762, 52524]

# name: error INTEGER text
SELECT minhash_signature(42)
----
error: InvalidInputError: minhash_signature: text has type INTEGER, but a VARCHAR is required

# name: error BLOB text suggests decode
SELECT minhash_signature('abc'::BLOB)
----
error: InvalidInputError: text has type BLOB, but a VARCHAR is required; decode UTF-8 bytes first

# name: error list text suggests array_to_string
SELECT minhash_signature(['a', 'b'])
----
error: InvalidInputError: text has type VARCHAR[], but a VARCHAR is required; join the list

# name: error non-string column even when all rows are NULL
SELECT minhash_signature(x) FROM (VALUES (NULL::INTEGER)) v(x)
----
error: InvalidInputError: text has type INTEGER

# name: error num_hashes 0
SELECT minhash_signature('a b c', 0)
----
error: InvalidParameterError: minhash_signature: num_hashes := 0 is out of range: requires 1 <= num_hashes <= 4096

# name: error num_hashes 4097
SELECT minhash_signature('a b c', num_hashes := 4097)
----
error: InvalidParameterError: num_hashes := 4097 is out of range

# name: error num_hashes NULL
SELECT minhash_signature('a b c', num_hashes := NULL)
----
error: InvalidParameterError: minhash_signature: num_hashes is NULL

# name: error num_hashes NULL even for NULL text
SELECT minhash_signature(NULL, NULL)
----
error: InvalidParameterError: num_hashes is NULL

# name: error num_hashes not an integer
SELECT minhash_signature('a b c', 1.5)
----
error: InvalidParameterError: num_hashes := 1.5 must be an integer

# name: error num_hashes in one row of many
SELECT minhash_signature('a b c', k) FROM (VALUES (4), (0), (8)) v(k)
----
error: InvalidParameterError: num_hashes := 0 is out of range

# name: error shingle_size 0
SELECT minhash_signature('a b c', shingle_size := 0)
----
error: InvalidParameterError: minhash_signature: shingle_size := 0 must be >= 1

# name: error shingle_size NULL
SELECT minhash_signature('a b c', shingle_size := NULL)
----
error: InvalidParameterError: minhash_signature: shingle_size is NULL

# name: error tokenizer bad JSON
SELECT minhash_signature('a b c', tokenizer := '{base_tokenizer: whitespace}')
----
error: InvalidParameterError: tokenizer := '{base_tokenizer: whitespace}' is not valid JSON

# name: error tokenizer unknown key (JSON string)
SELECT minhash_signature('a b c', tokenizer := '{"foo": 1}')
----
error: InvalidParameterError: tokenizer option(s) ['foo'] are unknown or unsupported

# name: error tokenizer unknown key (STRUCT)
SELECT minhash_signature('a b c', tokenizer := {'base_tokenizer': 'simple', 'lowercase': true})
----
error: InvalidParameterError: tokenizer option(s) ['lowercase'] are unknown or unsupported

# name: error tokenizer unknown base tokenizer
SELECT minhash_signature('a b c', tokenizer := '{"base_tokenizer": "spaces"}')
----
error: InvalidParameterError: base_tokenizer := 'spaces' is unknown

# name: error tokenizer Lance's MinHash index refuses (jieba), with Lance's reason and icu instead
SELECT minhash_signature('a b c', tokenizer := {'base_tokenizer': 'jieba/default'})
----
error: InvalidParameterError: base_tokenizer := 'jieba/default' is refused by Lance's MinHash index: the jieba/default tokenizer loads a dictionary from LANCE_LANGUAGE_MODEL_HOME, outside Lance, so the index details cannot identify it; for Chinese, Japanese, Korean or Thai text use base_tokenizer := 'icu' (dictionary word segmentation built into Lance)

# name: error tokenizer JSON that is not an object
SELECT minhash_signature('a b c', tokenizer := '["whitespace"]')
----
error: InvalidParameterError: tokenizer := '["whitespace"]' must be a JSON object

# name: error tokenizer bad option value
SELECT minhash_signature('a b c', tokenizer := {'max_token_length': 0})
----
error: InvalidParameterError: max_token_length := 0 must be >= 1
