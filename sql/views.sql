-- views.sql: the views and macros every query in sql/ relies on.
--
-- Base views, one per table (columns: pipeline/store/schema.py):
--   steps, episodes, transcript, messages, request_outcomes, method_records, faults
-- and the tables metric_catalog: every benchmark's declared metrics, as its sweeps' manifests stored
-- them, else as the installed plug-ins declare them (benchmark, position,
-- metric, label, description, aggregate, source, key, numerator, denominator, headline), which
-- scores.sql reads, and depth_panels (benchmark, domain, panel) for depth_curve. A benchmark's per-episode scores are the episodes column metrics, a
-- MAP(VARCHAR, DOUBLE): episodes.metrics['db'].
-- Each reads the Parquet files listed in the DuckDB variable <table>_files. The query runner
-- (pipeline/analysis/query.py) sets them to exactly the files that hold finished episodes, once each,
-- compacted or not (pipeline/store/files.py), plus an empty file that carries the current schema
-- so that every column exists even in old or empty runs. By hand, globs work too:
--   SET VARIABLE steps_files = 'runs/<sweep>/steps/**/*.parquet';   -- likewise for each table
--   .read sql/views.sql
-- (a glob also sees the rows of unfinished episodes and, right after an interrupted compaction, some
-- rows twice; the runner's file lists never do).
-- union_by_name: files written before a column existed read it as NULL.
-- hive_partitioning = false: every file carries its id columns; the cell=<id> folders are layout only.
-- One copy of each episode: where a folder of sweeps holds an episode more than once (sweeps that
-- share episode ids, a copied sweep), the runner lists in the table other_copies (filename,
-- episode_id) the rows of every copy but the one read (pipeline/store/copies.py); every view leaves
-- them out. By hand it is empty.
--
-- request_outcomes (depth analysis, paper Figure 4 / Table 4): one row per graded request of an
-- episode, written by the grading stage for benchmarks that grade each request (subtask) on its own
-- (rewritten by flowstate grade). Columns: the id columns of every table, then
--   request        INT32    depth k of the request in its episode, counted from 1
--   correct        BOOLEAN  whether the request (subtask) was completed correctly
--   score          DOUBLE   optional partial credit in [0, 1] (NULL when the benchmark has none)
--   credit_passed  INT32    optional: named items passed (e.g. constraint slots) ...
--   credit_total   INT32    ... of how many
--   reason         VARCHAR  optional: why (the benchmark's words)
-- method_records: what a method declared worth keeping: kind, request, step (0: between steps),
-- payload_json (read it with DuckDB's JSON functions: payload_json->>'$.field').
-- faults: one row per fault of a model call (pipeline/llm/faults.py), of every attempt of the
-- episode, finished or failed: seq, episode_attempt, caller, request, step, deployment, served_by,
-- kind, http_status, attempt (the client's, within the call), retried, latency_s, message. A sweep
-- written before the table existed has none: an empty view.

CREATE TABLE IF NOT EXISTS other_copies (filename VARCHAR, episode_id VARCHAR);

CREATE OR REPLACE MACRO one_copy(files) AS TABLE
SELECT * EXCLUDE (filename)
FROM read_parquet(files, union_by_name = true, hive_partitioning = false, filename = true) AS t
WHERE NOT EXISTS (SELECT 1 FROM other_copies AS o WHERE o.filename = t.filename AND o.episode_id = t.episode_id);

CREATE OR REPLACE VIEW steps AS
SELECT * FROM one_copy(getvariable('steps_files'));

CREATE OR REPLACE VIEW episodes AS
SELECT * FROM one_copy(getvariable('episodes_files'));

CREATE OR REPLACE VIEW transcript AS
SELECT * FROM one_copy(getvariable('transcript_files'));

-- call_model: the model that answered the call (served_model). Files written before that column was
-- named hold a second column "model" instead, which DuckDB reads as model_1; call_model is either.
CREATE OR REPLACE VIEW messages AS
SELECT *, coalesce(*COLUMNS('^(model_1|served_model)$')) AS call_model
FROM one_copy(getvariable('messages_files'));

CREATE OR REPLACE VIEW request_outcomes AS
SELECT * FROM one_copy(getvariable('request_outcomes_files'));

CREATE OR REPLACE VIEW method_records AS
SELECT * FROM one_copy(getvariable('method_records_files'));

CREATE OR REPLACE VIEW faults AS
SELECT * FROM one_copy(getvariable('faults_files'));

-- Episodes that ran to the end, graded or not: everything but infrastructure failures (status
-- 'failed'), which are excluded from every metric (as upstream τ-bench excludes infrastructure_error).
CREATE OR REPLACE VIEW finished AS
SELECT * FROM episodes WHERE status <> 'failed';

-- Episodes with a reward: the population of every score. Grading failures (status 'grading_failed',
-- no reward) are counted by pass_rate.sql, never scored as 0.
CREATE OR REPLACE VIEW scored AS
SELECT * FROM episodes WHERE status = 'completed';

-- Share of episodes that achieved a 0/1 component (or the mean of a fraction), where an episode whose
-- grading gate failed (graded = false: reward 0, nothing evaluated) counts as 0. NULL when no episode
-- of the group evaluated the component. A benchmark's "gated_mean" metrics aggregate this way.
CREATE OR REPLACE MACRO component_rate(component, graded) AS
    CASE WHEN count(component) > 0 THEN avg(CASE WHEN graded THEN component ELSE 0 END) END;

-- Accuracy by request depth: Acc_k = percentage of episodes (task instances) with at least k graded
-- requests whose k-th request is correct; R_k = 100 · Acc_k / Acc_1 (NULL when Acc_1 = 0). Domains a
-- benchmark pools into one panel (table depth_panels: MemoryArena's math and physics are
-- "formal_reasoning") are one curve, under the panel's name in the domain column.
CREATE OR REPLACE VIEW depth_curve AS
WITH acc AS (
    SELECT r.benchmark, coalesce(p.panel, r.domain) AS domain, r.method, r.model, r.request AS k,
           count(*) AS instances,
           100.0 * avg(CASE WHEN r.correct THEN 1 ELSE 0 END) AS acc_k
    FROM request_outcomes AS r
    LEFT JOIN depth_panels AS p ON p.benchmark = r.benchmark AND p.domain = r.domain
    SEMI JOIN finished AS e ON e.episode_id = r.episode_id AND e.sweep_id = r.sweep_id
    GROUP BY ALL
)
SELECT *,
       100.0 * acc_k / nullif(max(acc_k) FILTER (WHERE k = 1) OVER (PARTITION BY benchmark, domain, method, model), 0)
           AS r_k
FROM acc;
