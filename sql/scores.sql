-- scores: how did each benchmark × domain × method × model score, on every metric its benchmark declares?
-- One row per cell and metric, in the benchmark's order (metric_catalog, views.sql):
--   metric     the metric's name (also its MLflow name), e.g. pass_rate, db, action
--   label      its column label in the report (PR, DB, Act.)
--   headline   whether it is a column of the benchmark's main table
--   value      the cell's value, as the benchmark declares it aggregates (fractions in [0, 1] or means):
--                mean        the mean over scored episodes that have a value
--                gated_mean  the same, but an episode whose grading gate failed counts as 0
--                            (component_rate, views.sql; NULL when no episode has a value)
--                ratio       sum of the numerator over sum of the denominator (a micro-average)
--   episodes   scored episodes with a value (ratios: with a numerator)
-- Population: scored episodes (infrastructure failures and grading failures excluded).
-- @param metric VARCHAR = NULL -- only this metric (NULL: every metric)
WITH per_episode AS (
    SELECT e.benchmark, e.domain, e.method, e.model, c.metric, c.label, c.headline, c.position, c.aggregate, e.graded,
           CASE c.source WHEN 'reward' THEN e.reward WHEN 'success' THEN e.success::DOUBLE ELSE e.metrics[c.key] END
               AS value,
           e.metrics[c.numerator] AS numerator,
           e.metrics[c.denominator] AS denominator
    FROM scored AS e
    JOIN metric_catalog AS c ON c.benchmark = e.benchmark
    WHERE $metric IS NULL OR c.metric = $metric
)
SELECT benchmark, domain, method, model, metric,
       any_value(label) AS label, any_value(headline) AS headline,
       CASE any_value(aggregate)
           WHEN 'mean' THEN avg(value)
           WHEN 'gated_mean' THEN component_rate(value, graded)
           WHEN 'ratio' THEN sum(numerator) / nullif(sum(denominator), 0)
       END AS value,
       count(CASE WHEN aggregate = 'ratio' THEN numerator ELSE value END) AS episodes
FROM per_episode
GROUP BY benchmark, domain, method, model, metric
ORDER BY benchmark, domain, model, method, any_value(position);
