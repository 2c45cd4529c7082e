-- The self-join: pairs, clusters and dedup, as TEMP table macros over the _lms_* UDFs of
-- lance_minhash_sql/duck/self_join.py. dataset, column and the parameters must be constants.

-- Every pair of rows whose MinHash similarity reaches threshold, each pair once with
-- left_rowid < right_rowid, in no particular order. Runs shard by shard on DuckDB's
-- threads; memory_limit (bytes or '1GiB', default 256 MiB) bounds what each shard holds
-- (the answer does not depend on it). verify := 'estimate' (default): a candidate is kept
-- when its MinHash estimate reaches threshold; jaccard is NULL. verify := 'exact':
-- candidates whose estimate reaches threshold minus 4 standard deviations of the estimate
-- (sqrt(t (1 - t) / k): 0.141 at 0.8 and 128 hashes) are kept iff jaccard (the exact
-- shingle Jaccard) >= threshold, so pairs at the threshold whose estimate fell under it are
-- found too. exact := true is the older spelling of verify := 'exact'. executor := 'ray':
-- each shard runs as a Ray task (ray_address, else RAY_ADDRESS, else the cluster running here).
CREATE OR REPLACE TEMP MACRO minhash_pairs(dataset, "column", threshold := 0.8, exact := false,
                                           storage_options := NULL, memory_limit := NULL,
                                           verify := 'estimate', executor := 'local', ray_address := NULL) AS TABLE
    SELECT * FROM query(_lms_pairs_plan(dataset, "column", _lms_number('minhash_pairs', 'threshold', threshold), exact,
                                        _lms_storage('minhash_pairs', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection')),
                                        memory_limit::VARCHAR, verify, executor, ray_address::VARCHAR));

-- Near-duplicate clusters: one row per row in a cluster of two or more, with the
-- cluster's smallest row id as cluster_id; ordered by (cluster_id, _rowid). memory_limit
-- (bytes or '1GiB', default 256 MiB) bounds what the clustering holds besides its result.
-- clustering := 'components' (default): connected components of the verified links (they
-- chain: A ~ B ~ C puts A and C together); 'star': each component walked by row id, a row
-- joins the first earlier kept row ("center") it is similar to, else becomes one; a
-- cluster is a center (its cluster_id) and the rows dropped for it (cluster_size = 1 + those),
-- every member similar to the center; a center nobody is dropped for is in no cluster.
-- These are minhash_dedup's clusters with the same arguments (keep := 'first').
-- verify := 'exact': components are those of the exact pairs (as minhash_pairs gives them);
-- for star, similar means exact shingle Jaccard >= threshold, over components linked down
-- to 4 standard deviations of the estimate under threshold. executor := 'ray': the
-- components are computed by Ray tasks (ray_address, else RAY_ADDRESS, else the cluster
-- running here); the same clusters.
CREATE OR REPLACE TEMP MACRO minhash_clusters(dataset, "column", threshold := 0.8, storage_options := NULL,
                                              memory_limit := NULL, clustering := 'components',
                                              verify := 'estimate', executor := 'local',
                                              ray_address := NULL) AS TABLE
    SELECT unnest(_lms_clusters(dataset, "column", _lms_number('minhash_clusters', 'threshold', threshold), clustering, verify,
                                _lms_storage('minhash_clusters', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection')),
                                memory_limit::VARCHAR, executor, ray_address::VARCHAR),
                  recursive := true);

-- The clustered rows with a keep flag: exactly one kept per cluster, the first by
-- keep := 'first' (lowest row id) or 'longest' (longest text), or by order_by := a SQL
-- ORDER BY over the dataset's columns (ties: lowest row id). Rows not listed are in no
-- cluster and always kept; the duplicates to remove are WHERE NOT keep.
-- clustering := 'star': each component walked in that keep order, a row is kept unless it
-- is similar to a row kept before it; a cluster is a kept row (its cluster_id) and the rows
-- dropped for it, as in minhash_clusters; two more columns name each dropped row's kept twin
-- (twin_rowid UBIGINT), their MinHash similarity (twin_similarity DOUBLE, >= threshold) and,
-- with verify := 'exact', their exact shingle Jaccard (twin_jaccard DOUBLE, >= threshold:
-- similar then means exact, as in minhash_clusters); NULL for kept rows. executor := 'ray':
-- the components are computed by Ray tasks, as in minhash_clusters; the same flags.
CREATE OR REPLACE TEMP MACRO minhash_dedup(dataset, "column", threshold := 0.8, keep := 'first',
                                           order_by := NULL, storage_options := NULL, memory_limit := NULL,
                                           clustering := 'components', verify := 'estimate',
                                           executor := 'local', ray_address := NULL) AS TABLE
    SELECT * FROM query(_lms_dedup_plan(dataset, "column", _lms_number('minhash_dedup', 'threshold', threshold), keep, order_by, clustering, verify,
                                        _lms_storage('minhash_dedup', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection')),
                                        memory_limit::VARCHAR, executor, ray_address::VARCHAR));
