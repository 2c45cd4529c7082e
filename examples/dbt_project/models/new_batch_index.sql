-- The new batch's own index, with the corpus index's parameters: it finds the batch's
-- near-duplicates among themselves, and the join against the corpus reuses its signatures.
SELECT index_name, num_hashes, num_bands, rows_per_band, rows_indexed, rows_without_tokens, dataset_version
FROM minhash_build('{{ var("new_batch") }}', 'text', threshold := {{ var("threshold") }})
