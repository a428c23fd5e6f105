-- latency: how long did model calls take, per caller and deployment?
-- One row per caller (agent / user_simulator / judge) × model (the model that answered, call_model
-- in views.sql) × served_by (the replica URL that answered; NULL where the row does not record it),
-- over every model call in messages:
--   p50_s / p90_s / p99_s   latency percentiles (interpolated), mean_s, max_s
--   completion_tokens_per_s sum of completion tokens / sum of latency
-- Parameters: none.
SELECT caller, call_model AS model, served_by,
       count(*) AS calls,
       avg(latency_s) AS mean_s,
       quantile_cont(latency_s, 0.5) AS p50_s,
       quantile_cont(latency_s, 0.9) AS p90_s,
       quantile_cont(latency_s, 0.99) AS p99_s,
       max(latency_s) AS max_s,
       avg(prompt_tokens) AS mean_prompt_tokens,
       sum(completion_tokens) / nullif(sum(latency_s), 0) AS completion_tokens_per_s
FROM messages
GROUP BY ALL
ORDER BY caller, call_model, served_by;
