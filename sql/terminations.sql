-- terminations: why did episodes end, per benchmark × domain × method × model?
-- One row per termination reason (status says which population it belongs to: completed and
-- grading_failed episodes ended on their own; failed ones are infrastructure failures, recorded with
-- termination 'infrastructure_error' and excluded from every score).
--   share        fraction of all the cell's episodes (failed ones included)
--   mean_reward  over the scored episodes with this termination (NULL when none has a reward)
-- Parameters: none.
SELECT benchmark, domain, method, model, status, termination,
       count(*) AS episodes,
       count(*) / sum(count(*)) OVER (PARTITION BY benchmark, domain, method, model) AS share,
       avg(reward) AS mean_reward
FROM episodes
GROUP BY benchmark, domain, method, model, status, termination
ORDER BY benchmark, domain, model, method, episodes DESC, status, termination;
