"""The branch a run lands on: the one checked out when the run (or this session of it) started.

A run merges into the main checkout's branch over minutes or hours, while the user may keep
working in that checkout. So before every merge and before the report commit the target is
checked: the same branch is checked out, and its tip still holds the commit the run last left
there. If the user switched branches (or detached HEAD, or reset the branch under the run), the
run stops landing — nothing is merged or committed elsewhere, the finished work stays on its
branches, and the run ends unfinished (`stop_reason: target_moved`, exit 1); `--resume` on the
run's branch merges that work instead of redoing it.

Commits the user adds on top of the run's branch meanwhile are allowed: the tip still holds
everything the run merged, so nothing is lost either way. They are kept, named in the run's
warnings, and part of what the integration check and the review see; an integration failure
then leaves the wave's merges in place rather than resetting the user's commits away.
"""

from __future__ import annotations

from pathlib import Path

from agentrun import gitcli, workspace
from agentrun.core.events import TargetMovedEvent, WarningEvent
from agentrun.core.status import StopReason
from agentrun.report.execution_state import RunState
from agentrun.run.record import Recorder


class Target:
    """The run's target branch and the tip it last left there (`state.target_head`)."""

    def __init__(self, root: Path, state: RunState, record: Recorder) -> None:
        self.root = root
        self.state = state
        self.record = record
        self.head = ""  # HEAD's sha when `ready` last looked

    @property
    def stopped(self) -> bool:
        return self.state.stop_reason == StopReason.TARGET_MOVED

    def left_at(self, commit: str | None = None) -> None:
        """The run itself moved the branch (a merge, an undo, its report commit) to `commit`
        (default: HEAD now)."""
        self.state.target_head = commit or workspace.head_commit(self.root)

    def ready(self) -> bool:
        """Whether the run may land on its branch now; when not, the run stops landing (once,
        with a warning naming both branches)."""
        if self.stopped:
            return False
        problem = self.problem()
        if problem is None:
            return True
        self.stop(problem)
        return False

    def problem(self) -> str | None:
        """Why landing on the target would land elsewhere or drop the run's merges; None when
        it may go on (the user's own commits on top are noted and kept)."""
        state, root = self.state, self.root
        branch, sha = workspace.checked_out(root)
        if branch != state.target_branch:  # in the spelling the run recorded its branch
            branch = workspace.current_branch(root)
        head = self.head = sha or ""
        if branch != state.target_branch:
            now = (f"{branch} is checked out now" if branch
                   else f"HEAD is detached at {head[:12]} now")
            return f"the run merges into {state.target_branch}, but {now}"
        last = state.target_head
        if not last or head == last:
            return None
        if not workspace.is_ancestor(root, last, head):
            return (f"{branch} no longer holds {last[:12]}, where the run last left it (it was "
                    "reset or rewritten meanwhile)")
        self._note_commits(last, head)
        return None

    def _note_commits(self, last: str, head: str) -> None:
        """Commits made on the run's branch by someone else: kept, and said."""
        shown = gitcli.git("log", "--format=%h %s", "--end-of-options", f"{last}..{head}",
                           cwd=self.root).splitlines()
        text = (f"{len(shown)} commit(s) not made by this run landed on "
                f"{self.state.target_branch} during it, kept: {'; '.join(shown[:5])}"
                + (" ..." if len(shown) > 5 else ""))
        self.state.warnings.append(text)
        self.record.emit(WarningEvent(message=text))
        self.state.target_head = head

    def stop(self, problem: str) -> None:
        state = self.state
        state.stop_reason = StopReason.TARGET_MOVED
        text = (f"stopped landing: {problem}; nothing was merged or committed there — switch "
                f"back (`git switch {state.target_branch}`), then `agentrun run "
                f"{state.spec_path} --resume` merges the finished work")
        state.warnings.append(text)
        self.record.emit(TargetMovedEvent(message=text, target=state.target_branch))
        self.record.emit(WarningEvent(message=text))
