-- pass_rate: how did each benchmark × domain × method × model score? (paper Table 2: PR, DB, Act.)
--   pass_rate     mean reward (τ-bench avg_reward; the paper's PR)
--   success_rate  share of episodes with |reward − 1| ≤ 1e-6
--   db, communicate, nl_assertion
--                 share of episodes whose component is 1 (the paper's DB is db)
--   action        share of episodes where every gold action was matched (the paper's Act.)
--   action_read, action_write
--                 mean read / write action accuracy (fraction of gold actions matched)
-- Components follow component_rate (views.sql): an episode gated by its termination counts as 0;
-- NULL when no episode evaluated the component. Shares are fractions in [0, 1].
-- Population: scored episodes; episodes with an infrastructure failure (failed) or without a reward
-- (grading_failed) are only counted.
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
           count(*) FILTER (WHERE graded) AS graded,
           avg(reward) AS pass_rate,
           avg(success::INTEGER) AS success_rate,
           component_rate(db, graded) AS db,
           component_rate(communicate, graded) AS communicate,
           component_rate(nl_assertion, graded) AS nl_assertion,
           component_rate(action, graded) AS action,
           component_rate(action_read_accuracy, graded) AS action_read,
           component_rate(action_write_accuracy, graded) AS action_write
    FROM scored
    GROUP BY ALL
)
SELECT c.benchmark, c.domain, c.method, c.model,
       coalesce(s.tasks, 0) AS tasks, coalesce(s.episodes, 0) AS episodes, coalesce(s.graded, 0) AS graded,
       c.grading_failed, c.failed,
       s.pass_rate, s.success_rate, s.db, s.communicate, s.nl_assertion, s.action, s.action_read, s.action_write
FROM counts AS c
LEFT JOIN scores AS s USING (benchmark, domain, method, model)
ORDER BY c.benchmark, c.domain, c.model, c.method;
