"""The `review` use case: the reviewer agent judges the last run of a spec against it, and its
verdict concludes that run (review/reviewer.py, run/review_step.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrun.audit.runner import ModelAccess
    from agentrun.project import Project
    from agentrun.report.execution_state import RunState
    from agentrun.review.reviewer import SpecReview


@dataclass(frozen=True)
class ReviewRequest:
    """`agentrun review`'s flags (None: not given; the reviewer's own defaults apply)."""

    spec: str | None = None
    provider: str | None = None
    model: str | None = None
    script: Path | None = None
    max_steps: int | None = None
    token_budget: int | None = None
    sandbox: str | None = None  # auto | on | off; None: the config's `sandbox.mode`

    def limits(self) -> dict[str, int]:
        """The reviewer's limits the flags set."""
        return {k: v for k, v in {"max_steps": self.max_steps,
                                  "token_budget": self.token_budget}.items() if v is not None}


@dataclass
class ReviewOutcome:
    result: SpecReview
    sandbox: str  # the reviewer's sandbox, as the summary says it
    concluded: RunState | None = None  # the run it concluded (stopped during its review)


def review(request: ReviewRequest, *, warn: Callable[[str], None],
           note: Callable[[str], None]) -> ReviewOutcome:
    """Review the spec's last run, write the verdict into the spec, STATE.md and the run's
    record, and conclude a run that stopped during its review."""
    from agentrun.app.loading import pin_to_last_run
    from agentrun.core.fsutil import relpath
    from agentrun.project import project_for_spec
    from agentrun.review.reviewer import ReviewOptions, review_spec
    from agentrun.run.review_step import conclude_review
    from agentrun.run.session import check_writable
    from agentrun.sandbox.choice import resolve
    from agentrun.spec import load_spec

    project, path = project_for_spec(request.spec)
    project = pin_to_last_run(project, load_spec(path), warn, "the review")
    # the verdict is written into the spec and STATE.md: a read-only checkout is found before
    # the reviewer spends anything
    check_writable([path.resolve().parent, project.specflow])
    settings, choice = resolve(request.sandbox, False, project.config.sandbox)
    note(f"reviewing {relpath(path)} (sandbox {choice.describe()})")
    access = model_access(project, request.provider, request.model, request.script)
    result = review_spec(path, project, access, ReviewOptions(limits=request.limits(),
                                                              sandbox=settings.mode))
    concluded = conclude_review(project, result.spec_id, result,
                                project.config.price_overrides())
    return ReviewOutcome(result, choice.describe(), concluded)


def model_access(project: Project, provider: str | None, model: str | None,
                 script: Path | None) -> ModelAccess:
    """The reviewer's provider and model as `run` resolves them (flags > environment > config
    > the agent definition), resolved on first use. Reviews of one command run one after
    another and share one provider (a scripted reviewer's turns follow on from each other)."""
    from agentrun.audit.runner import ModelAccess
    from agentrun.provider_choice import create_provider

    def resolve() -> Any:
        from agentrun.agent.definitions import load_agent
        from agentrun.provider_choice import resolve_provider_config
        from agentrun.review.reviewer import REVIEWER

        return resolve_provider_config(flag_provider=provider, flag_model=model,
                                       config=project.config,
                                       agent_model=load_agent(REVIEWER,
                                                              project.overrides_root).model,
                                       script=script)

    made: list[Any] = []

    def make(cfg: Any) -> Any:
        if not made:
            made.append(create_provider(cfg))
        return made[0]

    return ModelAccess(resolve, make)
