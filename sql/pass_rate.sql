-- pass_rate: how did each benchmark × domain × method × model do, in the terms every benchmark shares?
--   tasks, episodes           scored episodes (those with a reward)
--   evaluated                 of those, the episodes the benchmark evaluated; its grading gate scores
--                             the others 0 unseen (τ-bench: those the user or agent did not end, e.g.
--                             at the step limit)
--   grading_failed, failed    episodes without a reward (grading could not decide; the progress line's
--                             "grading failed"), and infrastructure failures (only counted)
--   pass_rate                 mean reward (τ-bench: avg_reward, the paper's PR)
--   success_rate              share of successful episodes (the benchmark decides what success is)
-- Each benchmark's own metrics (τ-bench: DB, COMMUNICATE, NL_ASSERTION, actions; MemoryArena: SR, PS,
-- sPS) are in scores.sql. Shares are fractions in [0, 1].
-- Parameters: none.
WITH counts AS (
    SELECT benchmark, domain, method, model,
           count(*) FILTER (WHERE status = 'grading_failed') AS grading_failed,
           count(*) FILTER (WHERE status = 'failed') AS failed
    FROM episodes
    GROUP BY ALL
),
scores AS (
    SELECT benchmark, domain, method, model,
           count(DISTINCT task_id) AS tasks,
           count(*) AS episodes,
           count(*) FILTER (WHERE graded) AS evaluated,
           avg(reward) AS pass_rate,
           avg(success::INTEGER) AS success_rate
    FROM scored
    GROUP BY ALL
)
SELECT c.benchmark, c.domain, c.method, c.model,
       coalesce(s.tasks, 0) AS tasks, coalesce(s.episodes, 0) AS episodes, coalesce(s.evaluated, 0) AS evaluated,
       c.grading_failed, c.failed, s.pass_rate, s.success_rate
FROM counts AS c
LEFT JOIN scores AS s USING (benchmark, domain, method, model)
ORDER BY c.benchmark, c.domain, c.model, c.method;
