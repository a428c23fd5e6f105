-- tokens: how many tokens did each benchmark × domain × method × model use? (the paper's #Tok)
--   tokens              #Tok: the agent's prompt + completion tokens, summed over episodes
--   tokens_per_episode, tokens_per_request (requests = the episode's FlowState requests)
--   cached_share        reported cached prompt tokens / prompt tokens, over episodes whose server
--                       reported cached tokens (vLLM with --enable-prompt-tokens-details)
--   cached_share_estimate
--                       the same with FlowState's own labelled estimate (llama.cpp prefix reuse),
--                       never mixed with the reported figure
--   user_tokens, judge_tokens
--                       prompt + completion tokens of the user simulator and of the judge
-- Population: finished episodes (all but infrastructure failures). NULL where nothing was reported.
-- Parameters: none.
SELECT benchmark, domain, method, model,
       count(*) AS episodes,
       sum(agent_prompt_tokens + agent_completion_tokens)::BIGINT AS tokens,
       sum(agent_prompt_tokens)::BIGINT AS prompt_tokens,
       sum(agent_completion_tokens)::BIGINT AS completion_tokens,
       avg(agent_prompt_tokens + agent_completion_tokens) AS tokens_per_episode,
       sum(agent_prompt_tokens + agent_completion_tokens) / nullif(sum(n_requests), 0) AS tokens_per_request,
       sum(agent_cached_tokens) / nullif(sum(agent_prompt_tokens) FILTER (WHERE agent_cached_tokens IS NOT NULL), 0)
           AS cached_share,
       sum(agent_cached_tokens_estimate)
           / nullif(sum(agent_prompt_tokens) FILTER (WHERE agent_cached_tokens_estimate IS NOT NULL), 0)
           AS cached_share_estimate,
       sum(user_prompt_tokens + user_completion_tokens)::BIGINT AS user_tokens,
       sum(judge_prompt_tokens + judge_completion_tokens)::BIGINT AS judge_tokens
FROM finished
GROUP BY ALL
ORDER BY benchmark, domain, model, method;
