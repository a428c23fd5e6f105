-- tokens: how many tokens did each benchmark × domain × method × model use? (the paper's #Tok)
--   tokens              #Tok: prompt + completion tokens of the agent and of the method's own model
--                       (the memory role), summed over episodes (episodes.tokens)
--   prompt_tokens, completion_tokens
--                       the agent's part of it
--   memory_tokens       the method's own model calls' part of it (memory methods; NULL otherwise)
--   tokens_per_episode, tokens_per_request (requests = the episode's requests)
--   cached_share        reported cached prompt tokens / prompt tokens of the agent, over episodes
--                       whose server reported cached tokens (vLLM with --enable-prompt-tokens-details)
--   cached_share_estimate
--                       the same with FlowState's own labelled estimate (llama.cpp prefix reuse),
--                       never mixed with the reported figure
--   user_tokens, judge_tokens, tool_model_tokens
--                       prompt + completion tokens of the user simulator, the judge and the tool
--                       model: reported beside #Tok, never in it
--   embeddings_tokens   input tokens of the embeddings calls (beside #Tok)
--   tokens_counted      true where a tokenizer counted #Tok because no server did (model-free
--                       episodes, e.g. the oracle, with analysis.count_tokens): counted, not served
--   reusable_prefix_tokens
--                       the agent's prompt tokens that the conversation's previous call left on the
--                       same replica, exact from the engine's token ids (llama.cpp, vLLM; NULL else)
--   physical_limit_tokens
--                       the agent's prompt tokens minus the content each call added: the most any
--                       prompt layout of the same content could reuse (NULL where not computed)
--   uncached_prompt_tokens
--                       the agent's prompt tokens the engine had to compute: prompt minus the cached
--                       tokens it reported, else minus the exact reusable prefix, else all of them
--   cached_share_of_limit
--                       (reported cached, else reusable prefix) / physical limit, over episodes with
--                       a physical limit: how close the method's layout comes to the best possible
-- Population: finished episodes (all but infrastructure failures). NULL where nothing was reported.
-- Parameters: none.
SELECT benchmark, domain, method, model,
       count(*) AS episodes,
       sum(tokens)::BIGINT AS tokens,
       sum(agent_prompt_tokens)::BIGINT AS prompt_tokens,
       sum(agent_completion_tokens)::BIGINT AS completion_tokens,
       sum(memory_prompt_tokens + memory_completion_tokens)::BIGINT AS memory_tokens,
       avg(tokens) AS tokens_per_episode,
       sum(tokens) / nullif(sum(n_requests), 0) AS tokens_per_request,
       sum(agent_cached_tokens) / nullif(sum(agent_prompt_tokens) FILTER (WHERE agent_cached_tokens IS NOT NULL), 0)
           AS cached_share,
       sum(agent_cached_tokens_estimate)
           / nullif(sum(agent_prompt_tokens) FILTER (WHERE agent_cached_tokens_estimate IS NOT NULL), 0)
           AS cached_share_estimate,
       sum(user_simulator_prompt_tokens + user_simulator_completion_tokens)::BIGINT AS user_tokens,
       sum(judge_prompt_tokens + judge_completion_tokens)::BIGINT AS judge_tokens,
       sum(tool_model_prompt_tokens + tool_model_completion_tokens)::BIGINT AS tool_model_tokens,
       sum(embeddings_tokens)::BIGINT AS embeddings_tokens,
       coalesce(bool_or(tokens_counted), false) AS tokens_counted,
       sum(agent_reusable_prefix_tokens)::BIGINT AS reusable_prefix_tokens,
       sum(agent_physical_limit_tokens)::BIGINT AS physical_limit_tokens,
       sum(agent_prompt_tokens - coalesce(agent_cached_tokens, agent_reusable_prefix_tokens, 0))::BIGINT
           AS uncached_prompt_tokens,
       sum(coalesce(agent_cached_tokens, agent_reusable_prefix_tokens))
           / nullif(sum(agent_physical_limit_tokens) FILTER (WHERE agent_physical_limit_tokens IS NOT NULL), 0)
           AS cached_share_of_limit
FROM finished
GROUP BY ALL
ORDER BY benchmark, domain, model, method;
