-- psa: how much did Progressive State Access reach for, per request?
-- Per benchmark × domain × method × model, over all agent steps:
--   requests            FlowState requests with at least one agent step (counted by their first step)
--   focus_requested / focus_accepted / focus_rejected
--                       historical state ids the model asked to expand (state_focus) and the outcome
--   disclosed           states disclosed into the active state (each counted at the step that disclosed it)
--   focus_requests_per_request, disclosed_per_request
--                       the totals divided by requests
--   steps_with_focus    share of agent steps that asked to expand a state
-- How far back disclosures reach: disclosure_distance.sql.
-- Parameters: none.
SELECT benchmark, domain, method, model,
       count(*) FILTER (WHERE step = 1) AS requests,
       sum(len(focus_requested))::BIGINT AS focus_requested,
       sum(len(focus_accepted))::BIGINT AS focus_accepted,
       sum(len(focus_rejected))::BIGINT AS focus_rejected,
       sum(len(disclosed))::BIGINT AS disclosed,
       sum(len(focus_requested)) / nullif(count(*) FILTER (WHERE step = 1), 0) AS focus_requests_per_request,
       sum(len(disclosed)) / nullif(count(*) FILTER (WHERE step = 1), 0) AS disclosed_per_request,
       avg((len(focus_requested) > 0)::INTEGER) AS steps_with_focus
FROM steps
GROUP BY ALL
ORDER BY benchmark, domain, model, method;
