-- delta_vs_full_context: how does each method compare with Full Context on the same model and tasks?
-- (paper Table 2, row "Δ vs. Full Context").
-- For every method other than the baseline, both sides are restricted to the tasks that both have
-- scored episodes for (same benchmark, domain, model); then
--   d_pass_rate, d_db, d_action   percentage-point change (method − baseline) × 100
--   d_tokens_pct                   relative change of mean #Tok per episode, in percent
--                                  (negative = savings; equals the change of total #Tok when both
--                                  sides ran the same number of trials)
-- Scores as in pass_rate.sql (fractions), tokens as in tokens.sql.
-- @param baseline VARCHAR = 'full_context' -- method label the others are compared with
WITH pairs AS (
    SELECT DISTINCT m.benchmark, m.domain, m.model, m.method, m.task_id
    FROM scored AS m
    JOIN scored AS b
      ON b.benchmark = m.benchmark AND b.domain = m.domain AND b.model = m.model AND b.task_id = m.task_id
    WHERE b.method = $baseline AND m.method <> $baseline
),
sides AS (
    SELECT p.benchmark, p.domain, p.model, p.method AS compared, e.method = p.method AS is_method,
           e.task_id, e.reward, e.graded, e.db, e.action,
           e.agent_prompt_tokens + e.agent_completion_tokens AS tokens
    FROM pairs AS p
    JOIN scored AS e
      ON e.benchmark = p.benchmark AND e.domain = p.domain AND e.model = p.model AND e.task_id = p.task_id
     AND e.method IN (p.method, $baseline)
),
agg AS (
    SELECT benchmark, domain, model, compared, is_method,
           count(DISTINCT task_id) AS tasks, count(*) AS episodes,
           avg(reward) AS pass_rate,
           component_rate(db, graded) AS db,
           component_rate(action, graded) AS action,
           avg(tokens) AS tokens_per_episode
    FROM sides
    GROUP BY ALL
)
SELECT m.benchmark, m.domain, m.model, m.compared AS method, $baseline AS baseline,
       m.tasks, m.episodes AS method_episodes, b.episodes AS baseline_episodes,
       m.pass_rate, b.pass_rate AS baseline_pass_rate,
       100 * (m.pass_rate - b.pass_rate) AS d_pass_rate,
       100 * (m.db - b.db) AS d_db,
       100 * (m.action - b.action) AS d_action,
       m.tokens_per_episode, b.tokens_per_episode AS baseline_tokens_per_episode,
       100 * (m.tokens_per_episode / nullif(b.tokens_per_episode, 0) - 1) AS d_tokens_pct
FROM agg AS m
JOIN agg AS b USING (benchmark, domain, model, compared)
WHERE m.is_method AND NOT b.is_method
ORDER BY m.benchmark, m.domain, m.model, m.compared;
