-- parse_errors: how often could the model's output not be parsed under the protocol?
-- Per benchmark × domain × method × model, over agent steps:
--   steps_with_errors / error_rate   steps whose output had at least one parse error (unusable in
--                                    part or whole), and their share
--   parse_errors                     total errors
--   steps_with_warnings / warnings   output repaired by the parser (protocol_warnings)
-- Parameters: none.
SELECT benchmark, domain, method, model,
       count(*) AS steps,
       count(*) FILTER (WHERE n_parse_errors > 0) AS steps_with_errors,
       count(*) FILTER (WHERE n_parse_errors > 0) / count(*) AS error_rate,
       sum(n_parse_errors)::BIGINT AS parse_errors,
       count(*) FILTER (WHERE len(protocol_warnings) > 0) AS steps_with_warnings,
       sum(len(protocol_warnings))::BIGINT AS warnings
FROM steps
GROUP BY ALL
ORDER BY benchmark, domain, model, method;
