"""``AutoCompact-SWE-v0``: a coding agent fixes a bug by shell commands and may compact its
own context.

One step is one model turn. The action is the model's text (or an ``Action``, or a
``PolicyOutput`` carrying token ids and log-probs); the observation is the chat context the
next turn sees. ``AutoCompactSWEEnv.reset`` and ``AutoCompactSWEEnv.step`` document every
``info`` key; ``EnvConfig`` every ``gym.make`` keyword; ``docs/architecture.md`` the whole.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import gymnasium as gym

from ac_env.actions import Bash, Compact, CompactCall, FormatError, Submit, make_parser
from ac_env.compaction import CommandRecord, Compactor, Turn, extractive_summary
from ac_env.compaction.when import Moment, TokenThreshold
from ac_env.config import EnvConfig, SandboxFactory, parse_config
from ac_env.context import Context
from ac_env.cost import CallCost, CostMeter, make_pricing
from ac_env.grading import GradeResult, grade
from ac_env.grading.cache import GradeSettings, grade_cached
from ac_env.policy import PolicyOutput
from ac_env.prompts import format_error_message, system_prompt, task_message, tool_message
from ac_env.sandbox import make_sandbox_factory
from ac_env.sandbox.base import Sandbox, WorkspaceError
from ac_env.snapshot import EpisodeSnapshot, copy_trajectory
from ac_env.spaces import Messages, UnicodeText
from ac_env.tasks import Task, load_tasks
from ac_env.tokens import make_token_counter
from ac_env.trajectory import (
    CompactionEvent,
    EpisodeEnd,
    ModelCall,
    ToolResult,
    Trajectory,
    TrajectoryHeader,
)

Observation = tuple[dict[str, str], ...]


class AutoCompactSWEEnv(gym.Env[Observation, Any]):
    """A coding agent fixes one task's bug by shell commands and may compact its own context.

    Every ``gym.make("AutoCompact-SWE-v0", ...)`` keyword is a field of ``EnvConfig`` (an
    unknown keyword or a bad value raises ``ConfigError`` naming the field).

    - **Observation** (``Messages``): a tuple of ``{"role", "content"}`` messages. Message 0
      is the system prompt, message 1 the task; after a compaction the summary follows as
      its own (user) message, then the last ``keep_recent`` interactions.
    - **Action** (``UnicodeText``): the model's text exactly as written (terminal format: one
      ```` ```bash ```` block runs a command; a bash block holding only ``submit`` ends the
      episode; a response starting with ``# Auto Context Summary`` compacts), an ``Action``
      (``Bash``, ``Compact``, ``Submit``), or a ``PolicyOutput`` (text plus token ids,
      log-probs and who produced it, all recorded). A malformed action is a format-error
      observation and a counted step; it never raises.
    - **Reward**: 0 until the episode ends; then the workspace diff is graded (``grade``):
      1.0 when every FAIL_TO_PASS and PASS_TO_PASS test passes, 0.0 otherwise, ``nan`` on an
      infrastructure error (``info["infra_error"]`` says which).

    Attributes: ``task`` (the current ``Task``), ``trajectory`` (the append-only
    ``Trajectory`` of the episode), ``context``, ``meter`` (the ``CostMeter``), ``sandbox``.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, render_mode: str | None = None, **config: Any) -> None:
        self.config: EnvConfig = parse_config(config)
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: {render_mode!r} is not one of [None, 'ansi']")
        self.render_mode = render_mode
        self.tasks: list[Task] = load_tasks(
            self.config.task_source,
            self.config.split,
            self.config.task_ids,
            self.config.subset,
            hide_fail_to_pass_tests=self.config.hide_fail_to_pass_tests,
        )
        if not self.tasks:
            raise ValueError(f"no tasks in source {self.config.task_source!r}")
        self._make_sandbox: SandboxFactory = make_sandbox_factory(
            self.config.sandbox, self.config.disk_quota_mb, self.config.command_cache
        )
        self._counter = make_token_counter(self.config.token_counter)
        self._parser = make_parser(self.config.action_parser)
        self._pricing = make_pricing(self.config.pricing)
        self.observation_space = Messages()
        self.action_space = UnicodeText()
        self.sandbox: Sandbox | None = None
        self.task: Task = self.tasks[0]
        self.trajectory: Trajectory | None = None
        self.compaction = self._compactor()
        self._done = True

    # ---- episode lifecycle ---------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start an episode: pick a task, start a fresh sandbox holding its repository, and show
        the system prompt and the task.

        Args:
            seed: seeds the env's generator, so ``reset(seed=s)`` always picks the same task
                (and shows the same first observation).
            options: ``{"task_id": instance_id}`` picks that task (``ValueError`` if this
                env's task list lacks it); otherwise the task is drawn from the generator.

        Returns:
            observation: the system prompt and the task message.
            info: the keys every ``step`` returns (``step`` 0, ``exit_reason`` None, no
                cost), plus ``instance_id``: the task's id. ``timings["sandbox_s"]`` is the
                sandbox's start-up time.
        """
        super().reset(seed=seed)
        started = time.perf_counter()
        self.task = self._pick_task(options or {})
        self._close_sandbox()
        sandbox = self._make_sandbox()
        sandbox.start(self.task)
        self.sandbox = sandbox
        sandbox_s = time.perf_counter() - started
        system = self.config.system_prompt or system_prompt(
            protocol=self.config.compaction_protocol
        )
        self.context = Context(self._counter, system, task_message(self.task.problem_statement))
        self.meter = CostMeter(self._pricing)
        self.trajectory = Trajectory(
            TrajectoryHeader(
                instance_id=self.task.instance_id,
                split=self.task.split,
                config=self.config.describe(),
                seed=seed,
            )
        )
        self._steps = 0
        self._commands: list[CommandRecord] = []
        self.compaction = self._compactor()
        self._episode_started = time.monotonic()
        self._done = False
        self._last_render = ""
        info = self._info(CallCost(), None, None, sandbox_s, 0.0, started)
        info["instance_id"] = self.task.instance_id
        return self.context.observation(), info

    def step(self, action: Any) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Charge the model call that wrote ``action``, then execute it: run the command,
        compact (``ac_env.compaction`` decides how), or end the episode.

        Before the action runs the call is priced against the budget: a call that passes
        ``budget_usd`` is paid for but not executed (``exit_reason`` ``"budget"``). When the
        context passes ``forced_compaction_threshold`` after a step, the observation ends with
        a request for a summary; the next action is taken as that summary, and if it is not a
        valid one an extractive summary of the real workspace replaces it
        (``summarizer`` ``"fallback"``). Under ``compaction_protocol="tool_call"`` a bare
        ``compact`` call is answered the same way (a request, then the summary). With
        ``skip_compaction`` (summary-ignored) a proactive compaction is skipped: no summary is
        generated, billed or kept (an inline reply is cut at the summary heading), the turn is
        answered by ``COMPACTION_SKIPPED`` and nothing is rewritten; with
        ``mask_observations_keep`` older command outputs become placeholders (a rewrite of
        ``kind`` ``"masking"``).

        Args:
            action: the model's text, an ``Action`` or a ``PolicyOutput``.

        Returns:
            observation: the context the next model turn sees.
            reward: 0.0 while running; at the end 1.0 (resolved), 0.0, or ``nan`` on an
                infrastructure error.
            terminated: the policy submitted.
            truncated: the episode ended otherwise (``max_steps``, ``budget``,
                ``context_overflow``, ``wall_clock``); the workspace is graded either way.
            info: on every step
                - ``step``: model turns so far;
                - ``exit_reason``: None while running, else ``"submitted"``,
                  ``"max_steps"``, ``"budget"``, ``"context_overflow"`` or ``"wall_clock"``;
                - ``prefix_rewritten``: this step rewrote the context (a summary applied, or
                  old outputs masked); ``rewrite_from``: the first message index that
                  changed (None otherwise);
                - ``segment``: how many rewrites the episode has had;
                - ``context_tokens``: tokens of the observation returned;
                - ``compaction_requested``: the next action must be a summary;
                - ``cost``: ``{"step": ..., "total": ...}``, each with ``input_uncached``,
                  ``input_cached``, ``output`` (tokens) and ``usd``;
                - ``timings``: ``sandbox_s`` (commands), ``grading_s`` (the final test run),
                  ``env_overhead_s`` (the env's own work, excluding the other two);

                on a step that rewrote, ``compaction``: ``kind`` (``"proactive"``,
                ``"forced"``, or ``"masking"``), ``summarizer`` (``"policy"``, ``"judge"``,
                ``"fallback"``; ``"none"`` for masking), ``tokens_before``,
                ``tokens_after``, ``summary``;

                at the end, ``submitted`` (the policy asked for it), ``reward_detail``
                (test id -> outcome of the grading run; ``tampered``: what grading found
                aimed at the grader, ``flags``: what the detectors reported, ``rejected``:
                the capability gate's refusals as ``{file, line, capability, detail}``, each
                when there is any) and ``infra_error`` (None, or what failed on the host
                side).

        Raises:
            RuntimeError: the episode has ended or never started (call ``reset``).
        """
        if self._done or self.trajectory is None:
            raise RuntimeError("the episode has ended (or never started): call reset()")
        started = time.perf_counter()
        turn = self._turn(action)
        step_cost = self.meter.charge(
            self.context.prompt_fingerprint(), self._output_tokens(turn.output)
        )
        self._record_call(turn, step_cost)
        self._steps += 1
        sandbox_s = 0.0
        event: CompactionEvent | None = None
        exit_reason: str | None = None
        if self._over_budget():
            exit_reason = "budget"  # the call is paid for, but its action is not executed
        elif turn.compacts:
            event = self.compaction.act(turn, self.context, self._steps - 1, self._fallback)
        elif isinstance(turn.action, Submit):
            self.context.append("assistant", turn.output, "action")
            exit_reason = "submitted"
        elif isinstance(turn.action, Bash):
            sandbox_s = self._run_command(turn.output, turn.action)
        else:
            assert isinstance(turn.action, FormatError)  # compaction's actions went to act()
            self._format_error(turn.output, turn.action.message)
        if event is None and exit_reason is None:
            event = self.compaction.mask(self.context, self._steps - 1)
        if event is not None:
            self.trajectory.append(event)
        exit_reason = exit_reason or self._truncation_reason()
        if exit_reason is None:
            self.compaction.request_if_due(self.context, self.moment())
        self._last_render = _render_step(turn.output, self.context)
        if exit_reason is None:
            info = self._info(step_cost, event, None, sandbox_s, 0.0, started)
            return self.context.observation(), 0.0, False, False, info
        reward, info = self._end(exit_reason, step_cost, event, sandbox_s, started)
        terminated = exit_reason == "submitted"
        return self.context.observation(), reward, terminated, not terminated, info

    def quote(self, action: Any) -> CallCost:
        """What the model call that produced ``action`` costs if it is stepped next, without
        charging it (``step`` charges exactly this)."""
        if self._done:
            raise RuntimeError("the episode has ended (or never started): call reset()")
        output = self._turn(action).output
        return self.meter.quote(self.context.prompt_fingerprint(), self._output_tokens(output))

    def abort(
        self, exit_reason: str, infra_error: str | None = None
    ) -> tuple[float, dict[str, Any]]:
        """End the episode from outside (the policy failed, a driver's own step cap): the
        workspace is graded and the end recorded like any other exit reason. With
        ``infra_error`` (the model server was unreachable: no fault of the agent) nothing is
        graded: the reward is ``nan`` and ``info["infra_error"]`` says why. Returns the
        reward and the final info."""
        if self._done:
            raise RuntimeError("the episode has ended (or never started): call reset()")
        return self._end(exit_reason, CallCost(), None, 0.0, time.perf_counter(), infra_error)

    def moment(self) -> Moment:
        """The episode now, as a timing rule reads it (``ac_env.compaction.when``): the
        context's messages and exact token count, the turns since the last summary rewrite."""
        if self.trajectory is None:
            raise RuntimeError("no episode: call reset()")
        context = self.context
        return Moment(context.observation(), context.tokens, self.trajectory.turns_since_rewrite())

    def snapshot(self) -> EpisodeSnapshot:
        """The running episode's whole state (see ``ac_env.snapshot``), to ``restore`` later
        in this env or another one."""
        if self._done or self.trajectory is None or self.sandbox is None:
            raise RuntimeError("no episode is running: call reset()")
        return EpisodeSnapshot(
            task=self.task,
            workspace=self.sandbox.snapshot(),
            context=self.context.copy(),
            meter=copy.deepcopy(self.meter),
            trajectory=copy_trajectory(self.trajectory),
            steps=self._steps,
            compaction_pending=self.compaction.pending,
            commands=tuple(self._commands),
            elapsed_s=time.monotonic() - self._episode_started,
            np_random=copy.deepcopy(self._np_random),
            np_random_seed=self._np_random_seed,
            last_render=self._last_render,
        )

    def restore(self, snapshot: EpisodeSnapshot) -> Observation:
        """Continue the episode of ``snapshot`` here, in a fresh sandbox holding its workspace
        (whatever episode this env was running is dropped). Returns the observation the next
        step answers. The episode goes on under this env's configuration; with the
        configuration it was snapshotted under, a deterministic policy continues it exactly as
        the original went on. Through ``gym.make``'s wrappers, ``reset`` once before the
        first restore (the order enforcer asks for it)."""
        self._done = True  # until the new sandbox holds the workspace
        self._close_sandbox()
        sandbox = self._make_sandbox()
        try:
            sandbox.start(snapshot.task)
            sandbox.restore(snapshot.workspace)
        except BaseException:
            sandbox.close()
            raise
        self.sandbox = sandbox
        self.task = snapshot.task
        self.context = snapshot.context.copy()
        self.meter = copy.deepcopy(snapshot.meter)
        self.trajectory = copy_trajectory(snapshot.trajectory)
        self._steps = snapshot.steps
        self.compaction = self._compactor()
        self.compaction.pending = snapshot.compaction_pending
        self._commands = list(snapshot.commands)
        self._episode_started = time.monotonic() - snapshot.elapsed_s
        self._np_random = copy.deepcopy(snapshot.np_random)
        self._np_random_seed = snapshot.np_random_seed
        self._last_render = snapshot.last_render
        self._done = False
        return self.context.observation()

    def render(self) -> str | None:
        return self._last_render if self.render_mode == "ansi" else None

    def close(self) -> None:
        self._close_sandbox()
        super().close()

    # ---- actions -------------------------------------------------------------------------

    def _run_command(self, output: str, action: Bash) -> float:
        assert self.sandbox is not None and self.trajectory is not None
        self.context.append("assistant", output, "action")
        result = self.sandbox.exec(
            action.command, self.config.command_timeout, self.config.output_limit
        )
        self.trajectory.append(
            ToolResult(
                step=self._steps - 1,
                command=action.command,
                output=result.output,
                exit_code=result.exit_code,
                timed_out=result.timed_out,
                truncated=result.truncated,
                duration_s=result.duration_s,
            )
        )
        self._commands.append(CommandRecord(action.command, result.output, result.exit_code))
        self.context.append(
            "user", tool_message(result, self.config.command_timeout), "observation"
        )
        return result.duration_s

    def _format_error(self, output: str, problem: str) -> None:
        self.context.append("assistant", output, "action")
        self.context.append("user", format_error_message(problem), "format_error")

    def _fallback(self) -> str:
        """The fallback summarizer's summary of the episode so far."""
        assert self.sandbox is not None
        try:
            diff = self.sandbox.diff()
        except WorkspaceError as err:  # the agent's doing: the summary says so
            diff = f"(the workspace diff cannot be read: {err})"
        return extractive_summary(self.task.problem_statement, self._commands, diff)

    def _turn(self, action: Any) -> Turn:
        """The action as this step executes, records and bills it (compaction reads it)."""
        output, generation = _unpack(action)
        parsed = self._parser.parse(action.text if isinstance(action, PolicyOutput) else action)
        return self.compaction.read(parsed, output, generation)

    def _record_call(self, turn: Turn, cost: CallCost) -> None:
        assert self.trajectory is not None
        self.trajectory.append(
            ModelCall.model_construct(
                step=self._steps,
                segment=self.context.segment,
                messages=list(self.context.observation()),
                message_kinds=self.context.kinds(),
                output=turn.recorded,
                action=turn.action.model_dump(),
                forced_compaction_request=turn.answers == "forced",
                context_tokens=self.context.tokens,
                cost=cost,
                **turn.generation,
            )
        )

    # ---- limits and the end --------------------------------------------------------------

    def _over_budget(self) -> bool:
        budget = self.config.budget_usd
        return budget is not None and self.meter.total.usd > budget

    def _truncation_reason(self) -> str | None:
        if self.context.tokens > self.config.context_window:
            return "context_overflow"
        if self._steps >= self.config.max_steps:
            return "max_steps"
        wall = self.config.wall_clock_s
        if wall is not None and time.monotonic() - self._episode_started > wall:
            return "wall_clock"
        return None

    def _end(
        self,
        exit_reason: str,
        step_cost: CallCost,
        event: CompactionEvent | None,
        sandbox_s: float,
        started: float,
        infra_error: str | None = None,
    ) -> tuple[float, dict[str, Any]]:
        result, grading_s = self._finish(exit_reason, infra_error)
        info = self._info(step_cost, event, exit_reason, sandbox_s, grading_s, started)
        info["reward_detail"] = dict(result.tests)
        if result.tampered:
            info["reward_detail"]["tampered"] = result.tampered
        if result.flags:
            info["reward_detail"]["flags"] = list(result.flags)
        if result.rejected:
            info["reward_detail"]["rejected"] = [use.model_dump() for use in result.rejected]
        info["infra_error"] = result.infra_error
        info["submitted"] = exit_reason == "submitted"
        return (math.nan if result.reward is None else result.reward), info

    def _finish(self, exit_reason: str, infra_error: str | None) -> tuple[GradeResult, float]:
        assert self.sandbox is not None and self.trajectory is not None
        started = time.perf_counter()
        self._done = True
        patch = ""
        if infra_error is not None:
            result = GradeResult.infra(infra_error)
        else:
            try:
                patch = self.sandbox.diff()
            except WorkspaceError as err:  # what the agent did to its workspace: its failure
                reason = f"the workspace cannot be graded: {err}"
                result = GradeResult(resolved=False, reward=0.0, reason=reason)
            except Exception as err:  # the sandbox is gone: an infrastructure failure
                result = GradeResult.infra(f"could not read the workspace diff: {err}")
            else:
                result = self._grade(patch)
        self.trajectory.append(
            EpisodeEnd(
                step=self._steps,
                exit_reason=exit_reason,
                submitted=exit_reason == "submitted",
                reward=result.reward,
                resolved=result.resolved,
                infra_error=result.infra_error,
                patch=patch,
                tests=result.tests,
                cost=self.meter.total,
            )
        )
        return result, time.perf_counter() - started

    # ---- helpers -------------------------------------------------------------------------

    def _grade(self, patch: str) -> GradeResult:
        config = self.config
        timeout = config.grading_timeout
        settings = GradeSettings(config.capability_gate, config.flagged_reward)
        if config.command_cache is None:
            return grade(self.task, patch, self._make_sandbox(), timeout, **settings._asdict())
        cache = config.command_cache
        return grade_cached(self.task, patch, self._make_sandbox, timeout, cache, settings)

    def _compactor(self) -> Compactor:
        threshold = self.config.forced_compaction_threshold
        return Compactor(
            protocol=self.config.compaction_protocol,
            skip=self.config.skip_compaction,
            keep_recent=self.config.keep_recent,
            mask_keep=self.config.mask_observations_keep,
            force_when=None if threshold is None else TokenThreshold(threshold),
        )

    def _output_tokens(self, output: str) -> int:
        return self._counter.count(output) + self._counter.message_overhead("assistant")

    def _pick_task(self, options: dict[str, Any]) -> Task:
        task_id = options.get("task_id")
        if task_id is None:
            return self.tasks[int(self.np_random.integers(len(self.tasks)))]
        for task in self.tasks:
            if task.instance_id == task_id:
                return task
        raise ValueError(f"options.task_id: unknown task {task_id!r} in this env's task list")

    def _info(
        self,
        step_cost: CallCost,
        event: CompactionEvent | None,
        exit_reason: str | None,
        sandbox_s: float,
        grading_s: float,
        started: float,
    ) -> dict[str, Any]:
        info: dict[str, Any] = {
            "step": self._steps,
            "exit_reason": exit_reason,
            "prefix_rewritten": event is not None,
            "rewrite_from": event.rewrite_from if event else None,
            "segment": self.context.segment,
            "context_tokens": self.context.tokens,
            "compaction_requested": self.compaction.pending is not None,
            "cost": {"step": step_cost.model_dump(), "total": self.meter.total.model_dump()},
        }
        if event is not None:
            info["compaction"] = {
                "kind": event.trigger,
                "summarizer": event.summarizer,
                "tokens_before": event.tokens_before,
                "tokens_after": event.tokens_after,
                "summary": event.summary,
            }
        total_s = time.perf_counter() - started
        info["timings"] = {
            "sandbox_s": sandbox_s,
            "grading_s": grading_s,
            "env_overhead_s": max(0.0, total_s - sandbox_s - grading_s),
        }
        return info

    def _close_sandbox(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None


def _unpack(action: Any) -> tuple[str, dict[str, Any]]:
    """The text to record for an action, and generation details a PolicyOutput carries."""
    if isinstance(action, PolicyOutput):
        details = action.model_dump(exclude={"text"})
        return action.text, details
    if isinstance(action, Bash | Compact | CompactCall | Submit):
        return action.render(), {}
    if isinstance(action, str):
        return action, {}
    return repr(action), {}


def _render_step(output: str, context: Context) -> str:
    last = context.messages[-1]
    return f">>> assistant\n{output}\n>>> {last.role} ({last.kind})\n{last.content}\n"


__all__ = ["AutoCompactSWEEnv", "FormatError"]
