-- delta_vs_baseline: how does each method compare with the baseline on the same model and tasks?
-- (the paper's "Δ vs. Full Context" rows; the baseline is the job's analysis.baseline).
-- For every method other than the baseline, both sides are restricted to the tasks that both have
-- scored episodes for (same benchmark, domain, model). One row per method and headline metric of
-- the benchmark (scores.sql, aggregated the same way), plus one row for tokens:
--   metric            the metric (tokens: mean #Tok per episode)
--   value, baseline_value
--   delta_pp          the headline metrics' change in percentage points: (method − baseline) × 100
--                     (NULL on the tokens row)
--   delta_pct         the tokens' relative change in percent: (method / baseline − 1) × 100,
--                     negative = savings (NULL on the metrics' rows)
--   tasks, method_episodes, baseline_episodes
-- @param baseline VARCHAR -- method label the others are compared with
WITH pairs AS (
    SELECT DISTINCT m.benchmark, m.domain, m.model, m.method, m.task_id
    FROM scored AS m
    JOIN scored AS b
      ON b.benchmark = m.benchmark AND b.domain = m.domain AND b.model = m.model AND b.task_id = m.task_id
    WHERE b.method = $baseline AND m.method <> $baseline
),
sides AS (
    SELECT p.benchmark, p.domain, p.model, p.method AS compared, e.method = p.method AS is_method, e.*
    EXCLUDE (benchmark, domain, model)
    FROM pairs AS p
    JOIN scored AS e
      ON e.benchmark = p.benchmark AND e.domain = p.domain AND e.model = p.model AND e.task_id = p.task_id
     AND e.method IN (p.method, $baseline)
),
metric_values AS (
    SELECT s.benchmark, s.domain, s.model, s.compared, s.is_method, c.metric, c.position, c.aggregate, s.graded,
           s.task_id,
           CASE c.source WHEN 'reward' THEN s.reward WHEN 'success' THEN s.success::DOUBLE ELSE s.metrics[c.key] END
               AS value,
           s.metrics[c.numerator] AS numerator, s.metrics[c.denominator] AS denominator
    FROM sides AS s
    JOIN metric_catalog AS c ON c.benchmark = s.benchmark AND c.headline
),
agg AS (
    SELECT benchmark, domain, model, compared, is_method, metric, any_value(position) AS position,
           count(DISTINCT task_id) AS tasks, count(*) AS episodes,
           CASE any_value(aggregate)
               WHEN 'mean' THEN avg(value)
               WHEN 'gated_mean' THEN component_rate(value, graded)
               WHEN 'ratio' THEN sum(numerator) / nullif(sum(denominator), 0)
           END AS value
    FROM metric_values
    GROUP BY benchmark, domain, model, compared, is_method, metric
    UNION ALL
    SELECT benchmark, domain, model, compared, is_method, 'tokens' AS metric, 1000000 AS position,
           count(DISTINCT task_id) AS tasks, count(*) AS episodes, avg(tokens) AS value
    FROM sides
    GROUP BY benchmark, domain, model, compared, is_method
)
SELECT m.benchmark, m.domain, m.model, m.compared AS method, $baseline AS baseline, m.metric,
       m.value, b.value AS baseline_value,
       CASE WHEN m.metric <> 'tokens' THEN 100 * (m.value - b.value) END AS delta_pp,
       CASE WHEN m.metric = 'tokens' THEN 100 * (m.value / nullif(b.value, 0) - 1) END AS delta_pct,
       m.tasks, m.episodes AS method_episodes, b.episodes AS baseline_episodes
FROM agg AS m
JOIN agg AS b USING (benchmark, domain, model, compared, metric)
WHERE m.is_method AND NOT b.is_method
ORDER BY m.benchmark, m.domain, m.model, m.compared, m.position;
