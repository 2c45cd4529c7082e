-- Scalar MinHash functions: TEMP macros over the _lms_* Python UDFs of
-- lance_minhash_sql/duck/udfs.py. Installed on every connection by
-- lance_minhash_sql.install(con); the defaults are MinHashParams' (tests check them).
--
-- Text arguments are passed as text::VARCHAR together with typeof(text), so that a
-- non-string argument gets the package's InvalidInputError (with the fix) instead of a
-- DuckDB binder error. tokenizer is passed through to_json(): a JSON object string
-- ('{"base_tokenizer": "whitespace"}'), a STRUCT ({'base_tokenizer': 'whitespace'}),
-- a MAP or a JSON value all work; NULL means the defaults.

-- A numeric argument of a table macro as DOUBLE (NULL stays NULL); a value of another
-- type (text, a boolean, a list, ...) fails naming the function fn and the argument name
-- (_lms_as_number, lance_minhash_sql/duck/args.py), where a cast would not name them.
-- One UDF call rather than a CASE: DuckDB binds a CASE in a table macro's query() argument
-- at several times the cost of the call.
CREATE OR REPLACE TEMP MACRO _lms_number(fn, name, value) AS
    _lms_as_number(fn, name, try_cast(value AS DOUBLE), typeof(value), value::VARCHAR);

-- MinHash signature of a text, bit-identical to Lance's MINHASHLSH index.
-- NULL for NULL text and for texts without tokens (Lance indexes no signature for them).
CREATE OR REPLACE TEMP MACRO minhash_signature(text, num_hashes := 128, shingle_size := 3, tokenizer := NULL) AS
    _lms_signature(text::VARCHAR, typeof(text), num_hashes, shingle_size, to_json(tokenizer)::VARCHAR);

-- Estimated Jaccard similarity: the fraction of equal positions of two signatures of the
-- same length (Lance's f32 value as DOUBLE). NULL if either is NULL.
CREATE OR REPLACE TEMP MACRO minhash_similarity(sig_a, sig_b) AS
    _lms_similarity(sig_a::USMALLINT[], sig_b::USMALLINT[]);

-- Lance's LSH band keys of a signature: num_bands UBIGINT values, band j's key starting
-- with byte j. num_bands must divide the signature length.
CREATE OR REPLACE TEMP MACRO minhash_band_keys(sig, num_bands := 16) AS
    _lms_band_keys(sig::USMALLINT[], num_bands);

-- Exact Jaccard similarity of the two texts' shingle sets (same tokenizer and shingles as
-- the signatures). NULL if either text is NULL or has no shingles.
CREATE OR REPLACE TEMP MACRO shingle_jaccard(text_a, text_b, shingle_size := 3, tokenizer := NULL) AS
    _lms_shingle_jaccard(text_a::VARCHAR, typeof(text_a), text_b::VARCHAR, typeof(text_b),
                         shingle_size, to_json(tokenizer)::VARCHAR);

-- S-curve: probability that a pair of Jaccard similarity s shares at least one of
-- num_bands bands of rows_per_band rows, 1 - (1 - s^rows_per_band)^num_bands.
CREATE OR REPLACE TEMP MACRO lsh_probability(similarity, num_bands, rows_per_band) AS
    _lms_lsh_probability(similarity, num_bands, rows_per_band);
