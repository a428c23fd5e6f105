-- paired_outcomes: the same task and trial run by a method and by the baseline, side by side
-- (same benchmark, domain and model): the input of the report's paired bootstrap intervals.
-- One row per (method, task, trial) that both sides scored. Rewards and components as in episodes.
-- @param baseline VARCHAR -- method label the others are paired with (the job's analysis.baseline)
SELECT m.benchmark, m.domain, m.model, m.method, $baseline AS baseline, m.task_id, m.trial,
       m.reward, b.reward AS baseline_reward,
       m.tokens,
       b.tokens AS baseline_tokens
FROM scored AS m
JOIN scored AS b
  ON b.benchmark = m.benchmark AND b.domain = m.domain AND b.model = m.model
 AND b.task_id = m.task_id AND b.trial = m.trial
WHERE b.method = $baseline AND m.method <> $baseline
ORDER BY m.benchmark, m.domain, m.model, m.method, m.task_id, m.trial;
