-- faults: what went wrong on the model path, and what became of it?
-- One row per benchmark × domain × method × model × caller (role) × deployment (the job's name) ×
-- kind × http_status, over every fault of every attempt of every episode, finished or failed
-- (kinds: pipeline/llm/faults.py; a completion cut at max_tokens is kind 'length'):
--   faults           attempts that failed this way (length: completions cut at max_tokens)
--   retried          of them, those the client tried again (a 429 after its Retry-After)
--   raised           of them, those that ended their call with an error: the last attempt, or one
--                    never retried (a context overflow, a rejected request); length never raises,
--                    its cut text is the answer
--   episodes         episodes with at least one of them
--   failed_episodes  of those, the ones recorded as infrastructure failures (status 'failed')
--   p50_latency_s / max_latency_s   from sending the attempt to the fault
-- Parameters: none.
SELECT f.benchmark, f.domain, f.method, f.model, f.caller, f.deployment, f.kind, f.http_status,
       count(*) AS faults,
       count(*) FILTER (WHERE f.retried) AS retried,
       count(*) FILTER (WHERE NOT f.retried AND f.kind <> 'length') AS raised,
       count(DISTINCT f.episode_id) AS episodes,
       count(DISTINCT f.episode_id) FILTER (WHERE e.status = 'failed') AS failed_episodes,
       quantile_cont(f.latency_s, 0.5) AS p50_latency_s,
       max(f.latency_s) AS max_latency_s
FROM faults AS f
LEFT JOIN episodes AS e ON e.episode_id = f.episode_id AND e.sweep_id = f.sweep_id
GROUP BY ALL
ORDER BY f.benchmark, f.domain, f.model, f.method, f.caller, faults DESC, f.kind, f.http_status;
