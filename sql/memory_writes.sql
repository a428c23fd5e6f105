-- memory_writes: what the memory methods that write with a model wrote, one row per write record
-- (ReasoningBank: one per entry; Mem0: one per entry), in episode and request order.
--   status           ReasoningBank's judged outcome of the entry (success / fail); NULL for Mem0
--   items            ReasoningBank's memory items extracted; Mem0's memories added
--   titles           ReasoningBank's item titles; Mem0's added memories' texts
-- Parameters: none. Rows of BM25 (which writes pieces, no model) are left out.
SELECT benchmark, domain, method, model, episode_id, request,
       json_extract_string(payload_json, '$.status') AS status,
       CAST(coalesce(CAST(json_extract(payload_json, '$.items') AS BIGINT),
                     json_array_length(json_extract(payload_json, '$.events'))) AS BIGINT) AS items,
       coalesce(CAST(json_extract(payload_json, '$.titles') AS VARCHAR[]),
                CAST(json_extract(payload_json, '$.events[*].memory') AS VARCHAR[])) AS titles
FROM method_records
WHERE kind = 'write' AND json_extract(payload_json, '$.pieces') IS NULL
ORDER BY benchmark, domain, method, model, episode_id, request;
