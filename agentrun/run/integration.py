"""The integration check: the validation command on a wave's merged result.

Each worker's branch passed the validation command on its own; their merge may still not (one
group renames a function another group starts calling). So once a wave has landed, the command
runs in a temporary worktree at the merged commit, through the run's sandbox. When it fails,
the wave's merges are re-checked in subsets on the wave's base — each one alone, then pairs —
to name the group or combination that breaks it, and the run stops before the next wave with
the target branch put back where the wave found it.

Before the first wave the command runs once on the base commit: a base that fails already
would fail every worker and every check, so the run stops before spending tokens — unless the
user allows it, and then merged results pass when they add no new failures (`no_new_failures`).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from agentrun import gitcli, merging, workspace, worktrees
from agentrun.core.errors import EXIT_FAILED, AgentrunError
from agentrun.core.events import (
    BaseCheckDoneEvent,
    BaseCheckStartEvent,
    IntegrationFailedEvent,
    IntegrationPassedEvent,
    IntegrationStartEvent,
    IntegrationStepEvent,
    WarningEvent,
)
from agentrun.core.status import Status, StopReason
from agentrun.plan import Batch
from agentrun.protocol import SandboxSettings
from agentrun.report.execution_state import IntegrationCheck, RunState
from agentrun.run.record import Recorder
from agentrun.sandbox.base import Sandbox
from agentrun.sandbox.choice import make_sandbox
from agentrun.tools.base import CommandPolicy
from agentrun.validation import Validation, run_validation, tail
from agentrun.worktree_setup import LOG_NAME, SetupFailed

T = TypeVar("T")
SandboxFactory = Callable[[Path], Sandbox]  # the sandbox for commands in a worktree
CANCEL_POLL_S = 0.2
_FAILING_TEST = [re.compile(p, re.MULTILINE) for p in (
    r"^(?:FAILED|ERROR) (\S+)",  # pytest's short summary (failures, errors, collection errors)
    r"^\s*--- FAIL: (\S+)",  # go test
    r"^test (\S+) \.\.\. FAILED",  # cargo test
)]
_EXIT_CODE = re.compile(r"^exit code: (-?\d+)", re.MULTILINE)


class BaseFails(AgentrunError):
    """The validation command fails on the commit a run starts from."""

    exit_code = EXIT_FAILED


def sandbox_factory(settings: SandboxSettings) -> SandboxFactory:
    """Integration checks run as confined as the run's workers: the same settings, a jail
    around each check's worktree."""
    def make(worktree: Path) -> Sandbox:
        return make_sandbox(settings.mode, worktree, network=settings.network,
                            home_allow=tuple(settings.home_allow), limits=settings.limits)[0]

    return make


def failing_tests(output: str) -> set[str] | None:
    """The ids of the failing tests an output names (pytest, go test, cargo test), or None
    when it names none in a form we know."""
    found = {m.group(1) for p in _FAILING_TEST for m in p.finditer(output)}
    return found or None


def no_tests_yet(result: Validation) -> bool:
    """pytest found no tests (exit 5): a project whose tests the spec is about to write, not
    a failing one."""
    code = _EXIT_CODE.search(result.output)
    return code is not None and code.group(1) == "5" and "no tests ran" in result.output


def no_new_failures(baseline: Validation, now: Validation) -> bool:
    """Whether `now` fails no worse than the base did: its failing tests are among the base's
    when both outputs name them, otherwise the same exit code. A command that could not run
    at all, or timed out, is no pass."""
    if now.ok:
        return True
    if now.condition is None or now.error and "timed out" in now.error:
        return False
    before, after = failing_tests(baseline.output), failing_tests(now.output)
    if before is not None and after is not None:
        return after <= before
    was, is_now = (_EXIT_CODE.search(v.output) for v in (baseline, now))
    return was is not None and is_now is not None and was.group(1) == is_now.group(1)


@dataclass
class Search(Generic[T]):
    """What the subset search found: the smallest sets of merges that break the command on
    the wave's base (none: only the whole wave does), or that the base fails already."""

    subsets: list[list[T]] = field(default_factory=list)
    base_fails: bool = False


def find_culprits(members: Sequence[T], breaks: Callable[[list[T]], bool]) -> Search[T]:
    """Which of a failing wave's merges break the command.

    `breaks(subset)` merges `subset` (in order) onto the wave's base and runs the command; the
    empty subset is the base itself. Every member that breaks it alone is named; if none does,
    the first pair that does (pairs cost a check each, so the search stops there). When every
    member fails alone the base is checked too: a base that fails already names no culprit.
    """
    # a wave of one merge: that merge is the whole wave, which failed already
    singles = [list(members)] if len(members) == 1 else [[m] for m in members if breaks([m])]
    if singles:
        if len(singles) == len(members) and breaks([]):
            return Search([], base_fails=True)
        return Search(singles)
    for pair in itertools.combinations(members, 2):
        if breaks(list(pair)):
            return Search([list(pair)])
    return Search([])


@dataclass(frozen=True)
class Merge:
    """One batch's work as the wave merged it: `ref` is the tip that was merged."""

    batch: str
    groups: list[str]
    ref: str


class IntegrationChecker:
    """Runs the validation command on merged results in throwaway worktrees."""

    def __init__(self, root: Path, work_dir: Path, branch_for: Callable[[str], str],
                 command: str, timeout_s: float, sandbox: SandboxFactory,
                 cancel: threading.Event, policy: CommandPolicy | None = None,
                 prepare: Callable[[Path, Path], object] | None = None) -> None:
        self.root = root
        self.work_dir = work_dir
        self.branch_for = branch_for
        self.command = command
        self.timeout_s = timeout_s
        self.sandbox = sandbox
        self.cancel = cancel
        self.policy = policy or CommandPolicy()  # the workers' own: the same environment
        self.prepare = prepare  # the worktree set-up (worktree, log): raises SetupFailed
        self.baseline: Validation | None = None  # the base's failure, when the user allows it
        self._count = 0
        # each check of a wave as it starts (its number, the merges on top of the commit): the
        # culprit search's progress
        self.on_check: Callable[[int, list[Merge]], None] = lambda n, merges: None

    def passes(self, result: Validation | None) -> bool:
        """A pass, or with a failing base allowed: no new failures."""
        if result is None:
            return False
        return result.ok or (self.baseline is not None
                             and no_new_failures(self.baseline, result))

    def check(self, label: str, base: str, head: str, merges: list[Merge]) -> IntegrationCheck:
        """Check `head` (the wave merged onto `base`); on a failure, name the culprits."""
        whole = self.run_on(head, [])
        check = IntegrationCheck(wave=label, command=self.command, commit=head, base=base,
                                 ok=self.passes(whole),
                                 output=tail(whole.output) if whole else "")
        if check.ok and whole is not None and not whole.ok:
            check.note = "no new failures: the run's base commit fails it already"
        if check.ok or whole is None or self.cancel.is_set():
            return check
        if whole.error and whole.condition is None:  # the command could not run at all
            check.note = whole.error
            return check
        search = find_culprits(merges, lambda subset: self._breaks(base, subset))
        check.base_fails = search.base_fails
        if search.subsets:
            check.culprits = [[g for m in s for g in m.groups] for s in search.subsets]
        elif not search.base_fails and not self.cancel.is_set():
            check.culprits = [[g for m in merges for g in m.groups]]
        return check

    def _breaks(self, base: str, subset: list[Merge]) -> bool:
        if self.cancel.is_set():
            return False
        result = self.run_on(base, subset)
        return result is not None and not self.passes(result)

    def run_on(self, commit: str, merges: list[Merge]) -> Validation | None:
        """The command's outcome on `commit` with `merges` merged on top, in a temporary
        worktree; None when those merges conflict (the subset tells nothing)."""
        self._count += 1
        name = f"check-{self._count}"
        self.on_check(self._count, merges)
        try:
            wt = worktrees.create_worktree(self.root, self.work_dir / name,
                                           self.branch_for(name), commit)
        except AgentrunError as exc:  # the check cannot run: that is no pass
            return Validation(self.command, False, exc.message, None,
                              f"could not create a worktree to check in: {exc.message}")
        try:
            for m in merges:
                if not merging.merge_branch(wt.path, m.ref, f"Check {m.batch}").ok:
                    return None
            if self.prepare is not None:
                try:
                    self.prepare(wt.path, self.work_dir / f"{name}-{LOG_NAME}")
                except SetupFailed as exc:
                    return Validation(self.command, False, exc.message, None, exc.message)
            sandbox = self.sandbox(wt.path)
            with _killed_on(self.cancel, sandbox):
                return run_validation(sandbox, wt.path, self.policy, self.command,
                                      self.timeout_s)
        finally:
            with contextlib.suppress(gitcli.GitError):
                worktrees.remove_worktree(self.root, wt, delete_branch=True)


@contextlib.contextmanager
def _killed_on(cancel: threading.Event, sandbox: Sandbox) -> Iterator[None]:
    """Stop the sandbox's commands when the run is interrupted while they run."""
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if cancel.wait(CANCEL_POLL_S):
                sandbox.kill_all()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def undo_wave(root: Path, branch: str | None, before: str, after: str,
              own: Collection[str] | None = None) -> tuple[bool, str]:
    """Put the target branch back at `before` when its tip is still the wave's last merge
    `after` (nothing else was committed on top) and, given the wave's `own` merge commits,
    nothing but them lies between (a commit of the user's made between two merges would go
    too); returns (restored, what was done)."""
    between = set(gitcli.git("rev-list", "--first-parent", "--end-of-options",
                             f"{before}..{after}", cwd=root).split()) if own is not None \
        else set()
    if workspace.current_branch(root) != branch or workspace.head_commit(root) != after \
            or not between <= set(own or ()):
        return False, (f"the target branch moved on since the wave merged; its merges were "
                       f"left in place (undo them with `git reset --keep {before[:12]}` "
                       "once nothing else depends on them)")
    proc = gitcli.run_git("reset", "--keep", before, cwd=root)
    if proc.returncode != 0:
        return False, (f"could not reset {branch} to {before[:12]}: "
                       f"{(proc.stderr or proc.stdout).strip()}")
    return True, f"{branch or 'HEAD'} reset to {before[:12]}, as before the wave"


class Integration:
    """The run's integration checks, one after each wave that merged something; a failure
    stops the run (`StopReason.INTEGRATION`) with the wave's merges undone and its branches
    kept. Without a validation command (`checker` None) nothing is checked, and the state
    says so."""

    def __init__(self, root: Path, state: RunState, record: Recorder,
                 checker: IntegrationChecker | None) -> None:
        self.root = root
        self.state = state
        self.record = record
        self.checker = checker

    @property
    def base_fails(self) -> bool:
        """The base fails the command and the user let the run go on: workers cannot be judged
        by it on their own, only merged results against the base's failures."""
        return self.checker is not None and self.checker.baseline is not None

    def check_base(self, base: str, allow_failing: bool) -> None:
        """Run the command once on the run's base commit. A failure stops the run before any
        worker starts (BaseFails, exit 1), or with `allow_failing` becomes the baseline that
        merged results are judged against."""
        if self.checker is None:
            return
        command = self.checker.command
        self.record.emit(BaseCheckStartEvent(command=command, commit=base))
        started = time.monotonic()
        result = self.checker.run_on(base, [])
        self.record.emit(BaseCheckDoneEvent(ok=bool(result and result.ok),
                                            seconds=round(time.monotonic() - started, 3)))
        if self.checker.cancel.is_set() or result is None or result.ok \
                or no_tests_yet(result):
            return
        what = (f"`{command}` fails on the base commit {base[:12]}, before any change: every "
                "worker and every merge would fail it too")
        if not allow_failing:
            raise BaseFails(f"{what}\n{tail(result.error or result.output, 1_500)}",
                            hint="fix the project's tests first, or pass --allow-failing-base "
                                 "to run anyway and judge merged results by no new failures")
        self.checker.baseline = result
        warning = (f"`{command}` fails on the base commit {base[:12]} already; merged results "
                   "are judged by no new failures (--allow-failing-base)")
        self.state.warnings.append(warning)
        self.record.emit(WarningEvent(message=warning))

    def after_wave(self, label: str, base: str, landed: list[Batch]) -> bool:
        """Check the wave `landed` merged onto `base`; True when the run must stop.

        A wave interrupted before its check passed is set aside like a failed one (merges
        undone, groups interrupted), so that `--resume` runs it again instead of adopting
        merges nobody checked."""
        merges = [Merge(b.id, list(b.ids), f"{commit}^2") for b in landed
                  if (commit := self.state.groups[b.ids[0]].merge_commit)]
        if self.checker is None or not merges:
            return False
        cancel, groups = self.checker.cancel, [g for m in merges for g in m.groups]
        # the run's own merged result, even when someone switched the checkout meanwhile
        head = self.state.target_head or workspace.head_commit(self.root)
        if cancel.is_set():
            check = IntegrationCheck(wave=label, command=self.checker.command, commit=head,
                                     base=base, ok=False)
        else:
            self.record.emit(IntegrationStartEvent(wave=label, command=self.checker.command,
                                                   commit=head))
            checks = itertools.count(1)  # the wave's own: the whole, then the search
            self.checker.on_check = lambda _n, merged: self.record.emit(IntegrationStepEvent(
                wave=label, check=next(checks), groups=tuple(g for m in merged for g in m.groups)),
                record=False)
            check = self.checker.check(label, base, head, merges)
        self.state.integration.append(check)
        if check.ok:
            self.record.emit(IntegrationPassedEvent(wave=label, commit=head))
        elif cancel.is_set():
            check.note = "interrupted before the check finished"
            self._set_aside(check, groups, head, Status.INTERRUPTED,
                            f"interrupted before wave {label}'s integration check passed")
        else:
            why = describe_failure(check)
            undo = self._set_aside(check, groups, head, Status.FAILED, why)
            self.state.stop_reason = StopReason.INTEGRATION
            self.state.warnings.append(f"{why}; {undo}")
            self.record.emit(IntegrationFailedEvent(
                wave=check.wave, culprits=tuple(map(tuple, check.culprits)),
                base_fails=check.base_fails,
                restored=check.restored, branches=tuple(check.kept_branches), output=check.output))
            self.record.emit(WarningEvent(message=f"{why}; {undo}"))
        self.record.save()
        return not check.ok and not cancel.is_set()

    def _set_aside(self, check: IntegrationCheck, groups: list[str], head: str,
                   status: Status, why: str) -> str:
        """Undo the wave's merges if nothing is on top, give its merged groups `status` (their
        work is not on the target branch, or must not stay there) and keep their branches;
        returns what became of the target branch."""
        state = self.state
        own = {c for g in groups if (c := state.groups[g].merge_commit)}
        check.restored, undo = undo_wave(self.root, state.target_branch, check.base, head, own)
        if check.restored:
            state.target_head = check.base
        check.note = f"{check.note}; {undo}" if check.note else undo
        check.kept_branches = sorted({b for g in groups if (b := state.groups[g].branch)})
        for gid in groups:
            group = state.groups[gid]
            group.status, group.error = status, why
        return undo


def describe_failure(check: IntegrationCheck) -> str:
    """One line naming the wave, the command and what breaks it."""
    text = f"wave {check.wave}'s merged result fails `{check.command}`"
    if check.base_fails:
        return text + " (the wave's base fails it already)"
    if check.note and not check.culprits:
        return f"{text} ({check.note})"
    if len(check.culprits) == 1 and len(check.culprits[0]) > 1:
        return text + f" (broken by {' + '.join(check.culprits[0])} together)"
    if check.culprits:
        return text + f" (broken by {', '.join(' + '.join(c) for c in check.culprits)})"
    return text
