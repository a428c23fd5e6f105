-- pass_hat_k: how reliably does each benchmark × domain × method × model succeed over repeated trials?
-- pass^k (τ-bench, TOOLS.md §7.7): for k = 1 … the smallest number of scored trials of any task, the
-- mean over tasks of C(c, k) / C(n, k), where n = scored trials of the task and c = its successes.
-- C(c, k) / C(n, k) is computed as the product of (c − i) / (n − i) for i = 0 … k − 1 (0 when c < k).
-- Population: scored episodes (infrastructure failures excluded).
-- Parameters: none.
WITH per_task AS (
    SELECT benchmark, domain, method, model, task_id,
           count(*) AS n,
           count(*) FILTER (WHERE success) AS c
    FROM scored
    GROUP BY ALL
),
per_cell AS (
    SELECT benchmark, domain, method, model, min(n) AS max_k, count(*) AS tasks
    FROM per_task
    GROUP BY ALL
)
SELECT p.benchmark, p.domain, p.method, p.model, k.k, any_value(cell.tasks) AS tasks,
       avg(list_product(list_transform(range(k.k), lambda i: (p.c - i)::DOUBLE / (p.n - i)))) AS pass_hat_k
FROM per_task AS p
JOIN per_cell AS cell USING (benchmark, domain, method, model)
CROSS JOIN LATERAL (SELECT unnest(range(1, cell.max_k + 1)) AS k) AS k
GROUP BY p.benchmark, p.domain, p.method, p.model, k.k
ORDER BY p.benchmark, p.domain, p.model, p.method, k.k;
