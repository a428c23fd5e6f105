-- disclosure_distance: how far back does PSA reach?
-- Distance of a disclosure = the request that disclosed the state − the request that created it
-- (steps.disclosed_from); 0 = a state of the current request, k = one created k requests earlier.
-- One row per benchmark × domain × method × model × distance.
--   share  fraction of the cell's disclosures at that distance
-- Parameters: none.
WITH d AS (
    SELECT benchmark, domain, method, model, request - unnest(disclosed_from) AS distance
    FROM steps
)
SELECT benchmark, domain, method, model, distance,
       count(*) AS disclosures,
       count(*) / sum(count(*)) OVER (PARTITION BY benchmark, domain, method, model) AS share
FROM d
GROUP BY benchmark, domain, method, model, distance
ORDER BY benchmark, domain, model, method, distance;
