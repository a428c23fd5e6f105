-- isu_ops: how many state-delta operations did the model propose, and how many did ISU commit?
-- Per benchmark × domain × method × model, over all agent steps:
--   proposed   ops the model wrote (n_proposed_ops, including unparseable ones)
--   accepted   ops committed by Validate_upd (appendix B.4)
--   rejected   ops excluded, with a reason (see rejections.sql)
--   acceptance_rate = accepted / proposed; ops_per_step = proposed / steps
-- Parameters: none.
SELECT benchmark, domain, method, model,
       count(*) AS steps,
       count(*) FILTER (WHERE n_proposed_ops > 0) AS steps_with_ops,
       sum(n_proposed_ops)::BIGINT AS proposed,
       sum(len(accepted_ops))::BIGINT AS accepted,
       sum(len(rejected_ops))::BIGINT AS rejected,
       sum(len(accepted_ops)) / nullif(sum(n_proposed_ops), 0) AS acceptance_rate,
       sum(n_proposed_ops) / count(*) AS ops_per_step
FROM steps
GROUP BY ALL
ORDER BY benchmark, domain, model, method;
