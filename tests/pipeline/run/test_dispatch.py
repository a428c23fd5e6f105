"""The driver's own state while a sweep runs: what it holds does not grow with the episodes it has
finished (the measured curve: perf/driver_rss.py)."""

from __future__ import annotations

from pipeline.config.sweep import expand
from pipeline.run.actors import EpisodeSummary
from pipeline.run.dispatch import EpisodeQueue, Progress, status_line
from tests.pipeline.config.test_sweep import job


class CountingEpisodes(list):
    """A sweep's episodes that count how many specs were built (read)."""

    built = 0

    def __iter__(self):
        for spec in super().__iter__():
            CountingEpisodes.built += 1
            yield spec


def test_the_queue_builds_each_spec_as_it_goes_out_then_gives_the_retries_in_order():
    specs = list(expand(job()).episodes)
    queue = EpisodeQueue(CountingEpisodes(specs))
    assert CountingEpisodes.built == 0 and queue
    first, second = queue.pop(), queue.pop()
    assert (first, second) == ((specs[0], 1), (specs[1], 1)) and CountingEpisodes.built == 2
    queue.append((specs[1], 2))
    queue.append((specs[0], 2))
    rest = [queue.pop() for _ in range(len(specs))]
    assert rest == [(s, 1) for s in specs[2:]] + [(specs[1], 2), (specs[0], 2)]
    assert not queue


def test_progress_keeps_a_mean_reward_not_every_reward():
    progress = Progress(total=4, skipped=0)
    for reward in (1.0, 0.0, None, 0.5):
        progress.add(EpisodeSummary(episode_id="e", status="completed", termination="done", reward=reward, steps=1,
                                    duration_s=0.1))
    assert (progress.completed, progress.rewarded, progress.reward_sum) == (4, 3, 1.5)
    assert "mean reward 0.500" in status_line(progress)
    assert not any(isinstance(value, list) for value in vars(progress).values())


def test_the_status_line_counts_the_sweeps_episodes_and_says_grading_failed_as_the_sql_does():
    """A resumed sweep: 5 episodes done by an earlier run, 96 by this one — 101 on disk, and 101 said
    (the line once said 96/96); its outcomes use pass_rate's words (grading_failed, not "ungraded")."""
    progress = Progress(total=101, skipped=5)
    for status in ["completed"] * 95 + ["grading_failed"]:
        progress.add(EpisodeSummary(episode_id="e", status=status, termination="done", reward=None, steps=1,
                                    duration_s=0.1))
    line = status_line(progress)
    assert line.startswith("episodes 101/101 done (5 by earlier runs, 95 ok, 0 failed, 1 grading failed)"), line
    assert status_line(Progress(total=4, skipped=0)).startswith("episodes 0/4 done (0 ok, 0 failed, 0 grading failed)")
