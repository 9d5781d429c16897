"""Judge-corrected on-policy collection (``ac-train collect``).

A policy runs on tasks, ``rollouts_per_task`` times each; before each proposed step executes, a
judge reviews it (``ac_train.judge``) and may replace it; the env executes what the judge let
through or wrote, so each trajectory holds what really happened after a correction (its model
calls carry ``produced_by``, the rejected candidate and the correction type).

``out_dir`` holds ``config.json`` (a rerun with another configuration is refused),
``trajectories/``, ``episodes.jsonl`` (one ``CollectedEpisode`` per finished episode, appended
as it finishes: a rerun skips those), and at the end ``summary.json`` (filter counts, the
correction-type mix) and ``dataset/`` (the kept trajectories cut into segments:
``segments.jsonl`` and a Hugging Face dataset, ``datasets.load_from_disk``). Nothing is
written before the whole configuration checks out (``validate_collect``).

Filters (a trajectory is kept only when it hits none; each is counted):

- ``infra_error``: the sandbox, grading or the model server failed (such an episode is run
  again once; ``error`` says why);
- ``malformed``: more than ``max_malformed_fraction`` of the executed outputs are format errors;
- ``summary_loop``: two compactions with no command executed between them;
- ``off_task``: after a compaction, none of the next ``off_task_window`` commands touches a file
  the summary names, runs the tests, or submits;
- ``no_command``: the episode ended without one command run (a policy that submits at once:
  its three-token trajectory passes every filter above, and cloning it teaches giving up).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field, field_validator
from tqdm import tqdm

import ac_env  # noqa: F401  (registers the env id)
from ac_env.agents.errors import ModelServerError
from ac_env.agents.rollout import rollout
from ac_env.analysis.audit import SummaryAudit, SummaryWorkspace, audit_trajectory
from ac_env.analysis.continuation import Continuation, continuations
from ac_env.analysis.metrics import root_cause_step
from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.config import TaskSelection, env_field
from ac_env.paths import safe_child
from ac_env.policy import Policy, PolicyOutput, SamplingConfig
from ac_env.records import append_jsonl, read_jsonl
from ac_env.runs.checks import check_env_kwargs, check_sandbox, check_worker_usable, checked
from ac_env.runs.retry import recorded_infra_error, run_episode_with_retries
from ac_env.runs.run_dir import claim_directory
from ac_env.runs.workers import policy_factory, require_token_records
from ac_env.strategies import Strategy, get_strategy
from ac_env.tasks import Task, load_tasks
from ac_env.trajectory import Trajectory
from ac_train.judge.llm import LLMJudge, ServedVerdicts
from ac_train.judge.oracle import OracleJudge
from ac_train.judge.review import CORRECTION_TYPES, Judge, Verdict, apply_verdict, judge_view
from ac_train.models.checkpoints import load_tokenizer

logger = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"
FILTERS = ("infra_error", "malformed", "summary_loop", "off_task", "no_command")
_PATH = re.compile(r"[\w.-]+(?:/[\w.-]+)*\.py\b")


JUDGES = ("oracle", "oracle:ground-truth", "none", "llm:<worker>")


class CollectConfig(TaskSelection):
    """One collection run. ``worker``: ``reference``, ``hf:<path|smollm2>`` or
    ``openai:<model>@<url>``; ``judge`` (``make_judge``): ``oracle`` (from the execution
    history), ``oracle:ground-truth`` (privileged: from the gold patch), ``none`` or
    ``llm:<worker>``."""

    model_config = ConfigDict(extra="forbid")

    limit: int | None = Field(default=None, gt=0)
    rollouts_per_task: int = Field(default=2, gt=0)
    worker: str = "hf:smollm2"
    judge: str = "oracle"
    judge_mode: Literal["correct", "shadow"] = Field(
        default="correct",
        description="'shadow': verdicts are recorded but the candidate executes (evaluation)",
    )
    strategy: str = "learned"
    fallback_threshold: int | None = Field(default=6_000, gt=0)
    env_options: dict[str, Any] = Field(
        default_factory=dict, description="more gym.make keywords, over the strategy's"
    )
    max_steps: int = Field(default=30, gt=0)
    temperature: float = Field(default=0.7, ge=0)
    max_new_tokens: int = Field(default=256, gt=0)
    seed: int = 0
    sandbox: str = env_field("sandbox")
    tokenizer: str | None = Field(
        default=None, description="for the dataset export; default: the hf worker's own"
    )
    max_malformed_fraction: float = Field(default=0.5, ge=0, le=1)
    off_task_window: int = Field(default=3, gt=0)

    @field_validator("judge")
    @classmethod
    def _known_judge(cls, judge: str) -> str:
        if judge not in JUDGES and not judge.startswith("llm:"):
            raise ValueError(f"unknown judge {judge!r}; valid: {', '.join(JUDGES)}")
        return judge

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, name: str) -> str:
        get_strategy(name)
        return name


class VerdictRecord(BaseModel):
    step: int
    candidate: str = Field(description="the candidate's kind: bash, compact, submit, format_error")
    forced: bool = Field(description="the candidate answered a forced compaction request")
    decision: Literal["accept", "correct"]
    correction: str | None
    reason: str


class CollectedEpisode(BaseModel):
    instance_id: str
    rollout: int
    status: Literal["ok", "infra_error"]
    reward: float | None
    exit_reason: str | None
    steps: int
    format_errors: int
    compactions: int
    corrections: dict[str, int]
    verdicts: list[VerdictRecord]
    filters: list[str]
    trajectory: str
    error: str | None = None
    audits: list[SummaryAudit] = Field(
        default_factory=list, description="each summary the policy wrote (ac_env.analysis.audit)"
    )
    continuations: list[Continuation] = Field(
        default_factory=list, description="how the episode went on after each summary"
    )

    @property
    def key(self) -> tuple[str, int]:
        return (self.instance_id, self.rollout)

    @property
    def kept(self) -> bool:
        return not self.filters


class CollectSummary(BaseModel):
    """``corrections`` count the judge's corrections (in shadow mode: those it would have
    made). Of the policy's own outputs: ``valid_action_rate`` (not a format error),
    ``right_time_rate`` (proactive compactions the judge did not correct for timing) and
    ``summary_pass_rate`` (summaries it wrote, proactive or forced, and forced requests it did
    not answer with one, that the judge did not correct for working state)."""

    episodes: int
    kept: int
    filtered: dict[str, int]
    success_rate: float | None
    reviewed_calls: int
    corrections: dict[str, int]
    correction_mix: dict[str, float]
    valid_action_rate: float | None
    proactive_compactions: int
    right_time_rate: float | None
    summaries: int
    summary_pass_rate: float | None
    segments: int | None = None


# ---- judging one step ------------------------------------------------------------------------


class ReviewLog:
    """The ``review`` hook of ``rollout``: asks the judge, records its verdict, returns what
    the env executes (the candidate itself when ``shadow``)."""

    def __init__(self, judge: Judge | None, shadow: bool = False) -> None:
        self.judge = judge
        self.shadow = shadow
        self.verdicts: list[VerdictRecord] = []

    def __call__(
        self, env: gym.Env[Any, Any], observation: Any, candidate: PolicyOutput
    ) -> PolicyOutput:
        if self.judge is None:
            return candidate
        view = judge_view(self.judge, env, observation)
        verdict: Verdict = self.judge.review(view, candidate)
        self.verdicts.append(
            VerdictRecord(
                step=view.step,
                candidate=view.parse(candidate).kind,
                forced=bool(observation) and observation[-1]["content"] == COMPACTION_REQUEST,
                decision=verdict.decision,
                correction=verdict.correction,
                reason=verdict.reason,
            )
        )
        return candidate if self.shadow else apply_verdict(candidate, verdict)


def worker_policies(config: CollectConfig, strategy: Strategy) -> Callable[[int], Policy]:
    """``seed -> Policy`` for ``config.worker``. A served worker (``openai:``) gets
    ``config.tokenizer`` for its token records; when there is one (the collection exports a
    dataset to train on) the server must give the sampled ids and their log-probs: one probe
    call checks it, and ValueError names what is missing. A probe the server fails
    (``ModelServerError``) decides nothing: the episodes then meet the same failure and are
    recorded as infrastructure errors. Without a tokenizer (an evaluation) nothing is probed."""
    sampling = SamplingConfig(temperature=config.temperature, max_new_tokens=config.max_new_tokens)
    served = config.worker.startswith("openai:")
    tokenizer = load_tokenizer(config.tokenizer) if served and config.tokenizer else None
    make = policy_factory(config.worker, strategy, sampling, tokenizer)
    if tokenizer is not None:
        try:
            require_token_records(make(config.seed), f"collect with worker {config.worker}")
        except ModelServerError as error:
            logger.warning("the token-record probe failed: %s", error)
    return make


JUDGE_MAX_NEW_TOKENS = 768
"""An LLM judge's answer may carry a whole summary."""


def make_judge(spec: str, seed: int = 0) -> Judge | None:
    """The judge ``spec`` names (``CollectConfig.judge``). ``llm:openai:<model>@<url>``
    asks the server for schema-constrained JSON verdicts (``ServedVerdicts``); other
    ``llm:`` workers sample greedily."""
    if spec == "none":
        return None
    if spec in ("oracle", "oracle:ground-truth"):
        return OracleJudge(ground_truth=spec == "oracle:ground-truth")
    worker = spec.removeprefix("llm:")
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=JUDGE_MAX_NEW_TOKENS)
    if worker.startswith("openai:"):
        model, _, url = worker.removeprefix("openai:").partition("@")
        if not model or not url:
            raise ValueError(f"judge: {spec!r} is not llm:openai:<model>@<base url>")
        return LLMJudge(ServedVerdicts.served(url, model, greedy))
    return LLMJudge(policy_factory(worker, get_strategy("none"), greedy)(seed))


# ---- filters ---------------------------------------------------------------------------------


def filter_reasons(trajectory: Trajectory, config: CollectConfig) -> list[str]:
    end = trajectory.end
    reasons = []
    if end is None or end.infra_error:
        reasons.append("infra_error")
    calls = trajectory.model_calls()
    malformed = sum(1 for c in calls if c.action.get("kind") == "format_error")
    if calls and malformed / len(calls) > config.max_malformed_fraction:
        reasons.append("malformed")
    if _has_summary_loop(trajectory):
        reasons.append("summary_loop")
    if _has_off_task_continuation(trajectory, config.off_task_window):
        reasons.append("off_task")
    if end is not None and not end.infra_error and not trajectory.tool_results():
        reasons.append("no_command")
    return reasons


def _has_summary_loop(trajectory: Trajectory) -> bool:
    steps = sorted(e.step for e in trajectory.compactions() if e.trigger != "masking")
    commands = {r.step for r in trajectory.tool_results()}
    return any(not any(a < s < b for s in commands) for a, b in pairwise(steps))


def _has_off_task_continuation(trajectory: Trajectory, window: int) -> bool:
    calls = trajectory.model_calls()
    for event in trajectory.compactions():
        if event.trigger == "masking" or not event.summary:
            continue
        named = set(_PATH.findall(event.summary))
        following = [c for c in calls if c.step > event.step][:window]
        if len(following) < window:
            continue
        on_task = False
        for call in following:
            kind = call.action.get("kind")
            command = str(call.action.get("command", ""))
            if kind in ("submit", "compact") or "pytest" in command:
                on_task = True
            if any(path in command for path in named):
                on_task = True
        if not on_task:
            return True
    return False


# ---- the run ---------------------------------------------------------------------------------


def select_tasks(config: CollectConfig) -> list[Task]:
    tasks = load_tasks(
        config.task_source,
        config.split,
        config.task_ids,
        config.subset,
        hide_fail_to_pass_tests=config.hide_fail_to_pass_tests,
    )
    if not tasks:
        raise ValueError(f"no tasks in {config.task_source!r} split {config.split!r}")
    return tasks[: config.limit]


def validate_collect(
    config: CollectConfig, env_kwargs: dict[str, Any], policy_given: bool, judge_given: bool
) -> list[Task]:
    """The tasks of the run, once the env keywords, sandbox, worker and LLM judge (those not
    given as objects) check out; raises ``ConfigurationError`` (one line) otherwise."""
    tasks = checked("tasks", lambda: select_tasks(config))
    check_env_kwargs(env_kwargs)
    check_sandbox(config.sandbox)
    if not policy_given:
        check_worker_usable("worker", config.worker)
    if not judge_given and config.judge.startswith("llm:"):
        check_worker_usable("judge", config.judge.removeprefix("llm:"))
    return tasks


def read_episodes(out: Path) -> list[CollectedEpisode]:
    return read_jsonl(out / EPISODES_FILE, CollectedEpisode)


def collect(
    config: CollectConfig,
    out_dir: str | Path,
    *,
    policy: Policy | None = None,
    judge: Judge | None = None,
    progress: bool = True,
) -> CollectSummary:
    """Run every (task, rollout) of ``config`` not yet in ``out_dir``, then write the summary
    and the dataset. ``policy`` / ``judge`` override the ones ``config`` names (for callers
    that hold a model already)."""
    out = Path(out_dir)
    strategy = get_strategy(config.strategy)
    env_kwargs = {**strategy.env_kwargs(config.fallback_threshold), **config.env_options}
    tasks = validate_collect(
        config,
        {
            "task_source": config.task_source,
            "split": config.split,
            "sandbox": config.sandbox,
            **env_kwargs,
        },
        policy is not None,
        judge is not None,
    )
    claim_directory(config, out)
    (out / "trajectories").mkdir(exist_ok=True)
    done = {e.key: e for e in read_episodes(out)}
    todo = [
        (task, k)
        for task in tasks
        for k in range(config.rollouts_per_task)
        if (task.instance_id, k) not in done
    ]
    policy_for: Callable[[int], Policy] = (
        (lambda seed: policy) if policy is not None else worker_policies(config, strategy)
    )
    active_judge = judge if judge is not None else make_judge(config.judge, config.seed)
    env = SummaryWorkspace(
        gym.make(
            "AutoCompact-SWE-v0",
            task_source=config.task_source,
            split=config.split,
            task_ids=[task.instance_id for task in tasks],
            sandbox=config.sandbox,
            **env_kwargs,
        )
    )
    total = len(tasks) * config.rollouts_per_task
    bar = tqdm(
        total=total, initial=total - len(todo), desc="collect", unit="ep", disable=not progress
    )
    try:
        with bar:
            for task, k in todo:
                seed = config.seed + 1000 * k + tasks.index(task)
                episode = _run_episode(env, policy_for, active_judge, task, k, seed, config, out)
                append_jsonl(out / EPISODES_FILE, episode)
                done[episode.key] = episode
                bar.update(1)
                bar.set_postfix_str(f"{task.instance_id} r={episode.reward}")
    finally:
        env.close()
    episodes = [
        done[(task.instance_id, k)] for task in tasks for k in range(config.rollouts_per_task)
    ]
    summary = summarize(episodes)
    tokenizer_name = config.tokenizer or (
        config.worker.removeprefix("hf:") if config.worker.startswith("hf:") else None
    )
    if tokenizer_name is not None:
        summary.segments = export_kept(episodes, out, tokenizer_name)
    (out / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return summary


def _run_episode(
    env: SummaryWorkspace,
    policy_for: Callable[[int], Policy],
    judge: Judge | None,
    task: Task,
    k: int,
    seed: int,
    config: CollectConfig,
    out: Path,
) -> CollectedEpisode:
    """One episode with a policy made for it, under the one infrastructure-retry policy
    (``ac_env.runs.retry``; the last run's record stands). Every episode shares ``env``, so an
    exception from it propagates (``crashed=None``)."""
    return run_episode_with_retries(
        lambda policy, attempt: _run_once(env, policy, judge, task, k, seed, config, out),
        make_policy=lambda: policy_for(seed),
        infra_error=recorded_infra_error,
        crashed=None,
        label=f"{task.instance_id} r{k}",
    ).result


def _run_once(
    env: SummaryWorkspace,
    policy: Policy,
    judge: Judge | None,
    task: Task,
    k: int,
    seed: int,
    config: CollectConfig,
    out: Path,
) -> CollectedEpisode:
    log = ReviewLog(judge, shadow=config.judge_mode == "shadow")
    trajectory = rollout(
        env,
        policy,
        seed=seed,
        options={"task_id": task.instance_id},
        max_steps=config.max_steps,
        review=log,
    )
    name = f"trajectories/{task.instance_id}__r{k}.jsonl"
    trajectory.write(safe_child(out, name))
    end = trajectory.end
    calls = trajectory.model_calls()
    root = root_cause_step(trajectory.tool_results(), task)
    corrections = Counter(v.correction for v in log.verdicts if v.correction)
    return CollectedEpisode(
        instance_id=task.instance_id,
        rollout=k,
        status="infra_error" if end is None or end.infra_error else "ok",
        reward=trajectory.reward,
        exit_reason=end.exit_reason if end else None,
        steps=len(calls),
        format_errors=sum(1 for c in calls if c.action.get("kind") == "format_error"),
        compactions=len([e for e in trajectory.compactions() if e.trigger != "masking"]),
        corrections={t: corrections.get(t, 0) for t in CORRECTION_TYPES},
        verdicts=log.verdicts,
        filters=filter_reasons(trajectory, config),
        trajectory=name,
        error=None if end is None else end.infra_error,
        audits=audit_trajectory(trajectory, task, env.changed, root),
        continuations=continuations(trajectory),
    )


def summarize(episodes: list[CollectedEpisode]) -> CollectSummary:
    corrections = {t: sum(e.corrections.get(t, 0) for e in episodes) for t in CORRECTION_TYPES}
    total = sum(corrections.values())
    graded = [e.reward for e in episodes if e.reward is not None]
    verdicts = [v for e in episodes for v in e.verdicts]
    proactive = [v for v in verdicts if v.candidate == "compact" and not v.forced]
    summaries = [
        v for v in verdicts if (v.candidate == "compact" or v.forced) and v.correction != "trigger"
    ]
    return CollectSummary(
        valid_action_rate=_rate([v.candidate != "format_error" for v in verdicts]),
        proactive_compactions=len(proactive),
        right_time_rate=_rate([v.correction != "trigger" for v in proactive]),
        summaries=len(summaries),
        summary_pass_rate=_rate([v.correction != "working_state" for v in summaries]),
        episodes=len(episodes),
        kept=sum(1 for e in episodes if e.kept),
        filtered={f: sum(1 for e in episodes if f in e.filters) for f in FILTERS},
        success_rate=sum(graded) / len(graded) if graded else None,
        reviewed_calls=sum(len(e.verdicts) for e in episodes),
        corrections=corrections,
        correction_mix={t: (n / total if total else 0.0) for t, n in corrections.items()},
    )


def _rate(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def export_kept(episodes: list[CollectedEpisode], out: Path, tokenizer_name: str) -> int:
    """Cut the kept trajectories into segments (``prefix_mismatch="split"``: a sampled output
    need not re-tokenize to its own ids) and write ``dataset/``. Format errors are not trained."""
    from ac_train.models.checkpoints import load_tokenizer
    from ac_train.segments import segment_trajectory
    from ac_train.sft import export_dataset

    tokenizer = load_tokenizer(tokenizer_name)
    segments = []
    for episode in episodes:
        if not episode.kept:
            continue
        trajectory = Trajectory.read(safe_child(out, episode.trajectory))
        segments.extend(
            segment_trajectory(
                trajectory, tokenizer, run_id=Path(episode.trajectory).stem, prefix_mismatch="split"
            )
        )
    export_dataset(segments, out / "dataset")
    return len(segments)
