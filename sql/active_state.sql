-- active_state: how large was what the model saw, as requests and steps go on?
-- One row per benchmark × domain × method × model × request × step (both counted from 1):
--   steps                 agent steps at that position (episodes that reached it)
--   mean/max_active_nodes state nodes in the active state S_k,t
--   mean_active_tokens    their rendered size in tokens
--   mean_index_states     entries of the historical state index G_k
--   mean_prompt_tokens    the agent's prompt tokens at that step
-- Parameters: none.
SELECT benchmark, domain, method, model, request, step,
       count(*) AS steps,
       avg(active_nodes) AS mean_active_nodes,
       max(active_nodes) AS max_active_nodes,
       avg(active_state_tokens) AS mean_active_tokens,
       avg(index_states) AS mean_index_states,
       avg(prompt_tokens) AS mean_prompt_tokens
FROM steps
GROUP BY ALL
ORDER BY benchmark, domain, model, method, request, step;
