-- depth_retention: how well does accuracy hold up with depth? (paper Table 4)
-- Over the curve R_k = 100 · Acc_k / Acc_1 of depth_accuracy.sql, per benchmark × domain × method × model:
--   nauc  trapezoidal integral of R over k, divided by the depth range K − 1 (higher is better;
--         100 = no decline). NULL with a single depth.
--   dr    decline rate: minus the least-squares slope of R_k over k, in percentage points per
--         depth (lower is better)
--   depths, acc_1, acc_last
-- @param max_depth INTEGER = NULL -- leave out depths beyond this one (NULL: every depth)
WITH curve AS (
    SELECT benchmark, domain, method, model, k, acc_k, r_k,
           lag(k) OVER w AS prev_k,
           lag(r_k) OVER w AS prev_r
    FROM depth_curve
    WHERE k <= coalesce(CAST($max_depth AS INTEGER), k)
    WINDOW w AS (PARTITION BY benchmark, domain, method, model ORDER BY k)
)
SELECT benchmark, domain, method, model,
       count(*) AS depths,
       max(acc_k) FILTER (WHERE k = 1) AS acc_1,
       arg_max(acc_k, k) AS acc_last,
       sum((k - prev_k) * (r_k + prev_r) / 2) / nullif(max(k) - min(k), 0) AS nauc,
       -regr_slope(r_k, k) AS dr
FROM curve
GROUP BY ALL
ORDER BY benchmark, domain, model, method;
