-- retrieval: what memory methods retrieved and stored (their `retrieval` and `write` method records:
-- BM25's pieces, ReasoningBank's records, Mem0's memories).
-- One row per benchmark × domain × method × model with retrieval records:
--   retrievals       requests that retrieved (one per request)
--   empty_share      share of retrievals that returned nothing (no query terms, or an empty memory)
--   hits_mean        pieces / records / memories returned per retrieval
--   top_score_mean   mean score of the best hit (BM25 score; cosine × 100; Mem0's score), where one came back
--   stored_mean      pieces / records / memories in memory when retrieving
--   writes, written  write records, and the pieces / records / memories they made
-- Parameters: none.
WITH retrievals AS (
    SELECT benchmark, domain, method, model,
           json_array_length(json_extract(payload_json, '$.hits')) AS hits,
           CAST(json_extract(payload_json, '$.hits[0].score') AS DOUBLE) AS top_score,
           CAST(coalesce(json_extract(payload_json, '$.stored_pieces'), json_extract(payload_json, '$.stored')) AS BIGINT)
               AS stored
    FROM method_records WHERE kind = 'retrieval'
), writes AS (
    SELECT benchmark, domain, method, model, count(*) AS writes,
           CAST(sum(json_array_length(coalesce(json_extract(payload_json, '$.pieces'),
                                               json_extract(payload_json, '$.records')))) AS BIGINT) AS written
    FROM method_records WHERE kind = 'write'
    GROUP BY ALL
)
SELECT r.benchmark, r.domain, r.method, r.model, count(*) AS retrievals,
       avg(CASE WHEN r.hits = 0 THEN 1.0 ELSE 0.0 END) AS empty_share,
       avg(r.hits) AS hits_mean, avg(r.top_score) AS top_score_mean, avg(r.stored) AS stored_mean,
       any_value(w.writes) AS writes, any_value(w.written) AS written
FROM retrievals r LEFT JOIN writes w USING (benchmark, domain, method, model)
GROUP BY r.benchmark, r.domain, r.method, r.model
ORDER BY r.benchmark, r.domain, r.model, r.method;
