"""What a user sees of a finished sweep in the MLflow UI, checked in a real browser (not run in CI).

Starts ``mlflow ui`` on 127.0.0.1 (a free port) against the sweep's store, renders its pages in
Debian's headless ``chromium`` (nothing is downloaded), asserts the text a user comes for: the child
runs' names (method first), the Dataset column (``benchmark/domain``), the headline metric names,
the parent's description table; and saves screenshots of the run list, the parent's overview, a
child run and the compare view into a folder it prints.

Run: python scripts/check-mlflow-ui.py [SWEEP_DIR] [--screens DIR]
With no SWEEP_DIR it first runs ``jobs/oracle.yaml`` into a temporary folder (a few minutes).
The store is the one the sweep's job names (``tracking.tracking_uri``), else ``./mlflow.db`` of the
folder the sweep was run from: pass ``--tracking-uri`` when it is elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.store.manifest import read_manifest  # noqa: E402
from pipeline.tracking import mlflow_runs as runs  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
RENDER_MS = 25_000  # virtual time for the React app to load and render its data


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_oracle(workdir: Path) -> tuple[Path, str]:
    """jobs/oracle.yaml into ``workdir``; the sweep's folder and its store."""
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "pipeline.cli", "run", str(REPO / "jobs" / "oracle.yaml"), "--out",
                    str(workdir / "runs")], check=True, cwd=workdir, env=env)
    return next((workdir / "runs").iterdir()), uri


def start_ui(uri: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    ui = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                           "--port", str(port)], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return ui
        except OSError:
            if ui.poll() is not None:
                raise SystemExit(f"mlflow ui exited; see {log}") from None
            time.sleep(1)
    ui.terminate()
    raise SystemExit(f"mlflow ui did not answer within 120 s; see {log}")


def chromium(url: str, *args: str) -> str:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1800,1100",
             f"--virtual-time-budget={RENDER_MS}"]
    done = subprocess.run([CHROMIUM, *flags, *args, url], capture_output=True, text=True, timeout=180)
    return done.stdout


def page(url: str, screenshot: Path, wanted: list[str]) -> str:
    """The rendered page's DOM, and its screenshot saved; rendered once more when some wanted text is
    missing (a slow first load of the app)."""
    chromium(url, f"--screenshot={screenshot}")
    dom = chromium(url, "--dump-dom")
    return dom if all(t in dom for t in wanted) else chromium(url, "--dump-dom")


def check(url: str, screenshot: Path, texts: list[str], where: str, failures: list[str]) -> None:
    """Render ``url``, save its screenshot and report which of ``texts`` the page lacks."""
    dom = page(url, screenshot, texts)
    missing = [t for t in texts if t not in dom]
    print(f"{where}: {'ok' if not missing else 'MISSING ' + ', '.join(map(repr, missing))}")
    if missing:
        failures.append(f"{where}: {missing}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", nargs="?", type=Path, help="a finished sweep's folder (default: run jobs/oracle.yaml)")
    parser.add_argument("--tracking-uri", help="its MLflow store (default: the job's, else ./mlflow.db)")
    parser.add_argument("--screens", type=Path, help="where the screenshots go (default: a new temporary folder)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="flowstate-ui-"))
    if args.sweep is None:
        sweep, uri = run_oracle(work)
    else:
        sweep = args.sweep.resolve()
        manifest = read_manifest(sweep) or {}
        uri = args.tracking_uri or runs.target(manifest, sweep.name).tracking_uri or "sqlite:///mlflow.db"
    screens = args.screens or work / "screens"
    screens.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(sweep) or {}
    client = runs.open_client(uri)
    experiment = runs.experiment_id(client, runs.target(manifest, sweep.name).experiment)
    parent = runs.find_parent(client, experiment, manifest["sweep_id"], manifest.get("mlflow_run_id"))
    if parent is None:
        raise SystemExit(f"no MLflow run of sweep {manifest['sweep_id']} in {uri}: `flowstate track {sweep}` first")
    children = sorted(runs.child_runs(client, experiment, parent.info.run_id).values(), key=lambda r: r.info.run_name)
    names = [c.info.run_name for c in children]
    headline = sorted({k for c in children for k in c.data.metrics if k[:1].isdigit()})
    if not headline:
        raise SystemExit(f"the runs of sweep {manifest['sweep_id']} have no headline metrics yet: "
                         f"`flowstate track {sweep}` logs them")
    datasets = sorted({d.dataset.name for c in children for d in c.inputs.dataset_inputs})
    port = free_port()
    ui = start_ui(uri, port, work / "mlflow-ui.log")
    base = f"http://127.0.0.1:{port}/#/experiments/{experiment}"
    failures: list[str] = []
    # the cells' runs only, by the first headline metric: MLflow nests child runs under their parent
    # (collapsed) only when runs are sorted by time
    cells = (f"{base}/runs?searchFilter=" + quote("tags.`flowstate.kind` = 'cell'")
             + "&orderByKey=" + quote(f"metrics.`{headline[0]}`") + "&orderByAsc=false")
    baselines = {b for b in [(manifest.get("job", {}).get("analysis") or {}).get("baseline")] if b}
    # a method other than the baseline (the job names its family: full_context for full_context-json)
    child = next((c for c in children if not c.data.tags.get("method", "").startswith(tuple(baselines) or ("\0",))),
                 children[0])
    ids, experiments = quote(json.dumps([c.info.run_id for c in children])), quote(json.dumps([experiment]))
    table = [c.split(" ", 1)[1] + (" (Δ)" if f"{c} Δ pp" in headline or f"{c} Δ pct" in headline else "")
             for c in headline if not c.endswith(("pp", "pct"))]
    pages = [  # (what, url, screenshot, expected text)
        ("run list (child runs' names, Dataset column)", cells, "1-run-list", [*names, *datasets]),
        ("run list's charts (headline metrics first)", f"{cells}&compareRunsMode=CHART", "1b-run-charts", headline[:2]),
        ("parent overview (description table)", f"{base}/runs/{parent.info.run_id}", "2-parent-overview",
         ["Method", "Domain", *table, *(["(baseline)"] if baselines else [])]),
        ("child run (name, headline metrics)", f"{base}/runs/{child.info.run_id}", "3-child-run",
         [child.info.run_name, *headline[:3]]),
        ("child run's model metrics (headline charts)", f"{base}/runs/{child.info.run_id}/model-metrics",
         "3b-child-charts", headline[:2]),
        ("compare view (names, headline metrics)",
         f"http://127.0.0.1:{port}/#/compare-runs?runs={ids}&experiments={experiments}", "4-compare",
         [*names, *headline[:2]]),
    ]
    try:
        for what, url, shot, texts in pages:
            check(url, screens / f"{shot}.png", texts, what, failures)
    finally:
        ui.terminate()
        ui.wait(30)
    print(f"screenshots: {screens}\nthe cells' runs side by side: {cells}&compareRunsMode=CHART "
          "(while `mlflow ui` runs on that port)")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("all expected text found")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
