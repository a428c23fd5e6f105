-- rejections: why were state operations (ISU) and state accesses (PSA) rejected?
-- One row per benchmark × domain × method × model × kind × reason × operation, where kind is
-- 'isu' (steps.rejected_ops: add / update / remove that failed Validate_upd) or
-- 'psa' (steps.focus_rejected: state_focus ids that failed Validate_acc); reasons are the codes of
-- flowstate.rules.Reason (malformed, id_in_use, not_accessible, …).
--   share  fraction of the cell's rejections of that kind
-- Parameters: none.
WITH rejected AS (
    SELECT benchmark, domain, method, model, 'isu' AS kind, unnest(rejected_ops) AS r FROM steps
    UNION ALL
    SELECT benchmark, domain, method, model, 'psa' AS kind, unnest(focus_rejected) AS r FROM steps
)
SELECT benchmark, domain, method, model, kind, r.reason AS reason, r.operation AS operation,
       count(*) AS rejections,
       count(*) / sum(count(*)) OVER (PARTITION BY benchmark, domain, method, model, kind) AS share
FROM rejected
GROUP BY benchmark, domain, method, model, kind, r.reason, r.operation
ORDER BY benchmark, domain, model, method, kind, rejections DESC, reason, operation;
