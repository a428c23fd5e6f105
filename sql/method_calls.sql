-- method_calls: what a method's own model calls cost (the memory role: ZipAct's separate updater,
-- ReasoningBank's judge and extractor, Mem0's extraction; and the embeddings), per request.
-- One row per benchmark × domain × method × model × caller (memory / embeddings):
--   calls                 calls in all
--   requests              requests with at least one such call
--   calls_per_request     calls / requests
--   tokens_per_request    prompt + completion tokens per such request (embeddings: input tokens)
--   p50_s, p90_s          call latency percentiles (interpolated)
-- Parameters: none.
WITH calls AS (
    SELECT benchmark, domain, method, model, caller, episode_id, request, latency_s,
           coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0) AS tokens
    FROM messages WHERE caller IN ('memory', 'embeddings')
)
SELECT benchmark, domain, method, model, caller, count(*) AS calls,
       count(DISTINCT (episode_id, request)) AS requests,
       count(*) / count(DISTINCT (episode_id, request)) AS calls_per_request,
       sum(tokens) / count(DISTINCT (episode_id, request)) AS tokens_per_request,
       quantile_cont(latency_s, 0.5) AS p50_s, quantile_cont(latency_s, 0.9) AS p90_s
FROM calls
GROUP BY benchmark, domain, method, model, caller
ORDER BY benchmark, domain, model, method, caller;
