-- state_tracking: how state-tracking methods (ZipAct and its hybrids) kept their state (their
-- `state_update` method records, one per update).
-- One row per benchmark × domain × method × model × updater ('inline': the agent's own output;
-- 'separate': the method's own model after each step):
--   updates         state updates attempted
--   failed_share    share that did not parse (or were empty): the old state was kept
--   state_chars_mean  size of the state after the update (characters of its JSON)
--   attempted_max   most attempted actions in any episode's final state
-- Parameters: none.
WITH updates AS (
    SELECT benchmark, domain, method, model, episode_id, seq,
           payload_json->>'$.updater' AS updater,
           CAST(payload_json->>'$.parsed' AS BOOLEAN) AS parsed,
           length(CAST(json_extract(payload_json, '$.after') AS VARCHAR)) AS state_chars,
           json_array_length(json_extract(payload_json, '$.after.constraint_state.attempted_actions')) AS attempted
    FROM method_records WHERE kind = 'state_update'
)
SELECT benchmark, domain, method, model, updater, count(*) AS updates,
       avg(CASE WHEN parsed THEN 0.0 ELSE 1.0 END) AS failed_share,
       avg(state_chars) AS state_chars_mean, max(attempted) AS attempted_max
FROM updates
GROUP BY benchmark, domain, method, model, updater
ORDER BY benchmark, domain, model, method, updater;
