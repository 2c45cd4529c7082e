SELECT cluster_id, count(*) FILTER (WHERE keep) AS kept
FROM {{ ref('dedup_flags') }}
GROUP BY cluster_id
HAVING kept <> 1
