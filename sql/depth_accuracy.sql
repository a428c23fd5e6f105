-- depth_accuracy: accuracy by request depth (paper Figure 4), for benchmarks that grade each request.
-- One row per benchmark × domain × method × model × depth k (from request_outcomes, views.sql):
--   instances  episodes with at least k graded requests
--   acc_k      percentage of them whose k-th request is correct
--   r_k        100 · acc_k / acc_1 (relative retention)
-- @param max_depth INTEGER = NULL -- leave out depths beyond this one (NULL: every depth)
SELECT benchmark, domain, method, model, k, instances, acc_k, r_k
FROM depth_curve
WHERE k <= coalesce(CAST($max_depth AS INTEGER), k)
ORDER BY benchmark, domain, model, method, k;
