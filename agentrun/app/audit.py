"""The `audit` request: what `agentrun audit` is asked to do, and the settings it resolves from
the flags and `.specflow/config.yaml`'s `audit:` section (flag, then `audit:`, then the run's
setting where one applies, then the default)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentrun.core.errors import BadInput

if TYPE_CHECKING:
    from agentrun.audit.runner import AuditOptions, ModelAccess
    from agentrun.config import ProjectConfig
    from agentrun.project import Project

DEFAULT_MAX_PARALLEL = 4  # specs audited at once when neither flag nor config says


@dataclass(frozen=True)
class AuditRequest:
    """`agentrun audit`'s flags (None: not given)."""

    spec: str | None = None
    static: bool = False
    write: bool = False  # the auditor's proposed task groups into the spec
    dry_run: bool = False
    max_parallel: int | None = None
    group_context_max: float | None = None
    total_context_max: float | None = None
    provider: str | None = None
    model: str | None = None
    script: Path | None = None
    max_steps: int | None = None
    token_budget: int | None = None
    sandbox: str | None = None

    def __post_init__(self) -> None:
        if self.static and self.write:
            raise BadInput("--write needs the auditor's proposals; --static runs no model",
                           hint="drop --static to run the auditor, or drop --write")

    def parallel(self, config: ProjectConfig) -> int:
        """Specs audited at once: the flag, `audit.max_parallel`, `max_parallel`, or 4."""
        return (self.max_parallel or config.audit.max_parallel or config.max_parallel
                or DEFAULT_MAX_PARALLEL)

    def options(self, project: Project) -> tuple[AuditOptions, str]:
        """The audit's options, and its sandbox in words ("on (bubblewrap)", "off (why)")."""
        from agentrun.audit.estimates import thresholds_from
        from agentrun.audit.runner import AuditOptions
        from agentrun.sandbox.choice import resolve

        config = project.config
        limits = {"max_steps": self.max_steps or config.audit.max_steps,
                  "token_budget": self.token_budget or config.audit.token_budget}
        settings, choice = resolve(self.sandbox, False, config.sandbox)
        thresholds = thresholds_from(config.model_dump(exclude_none=True),
                                     self.group_context_max, self.total_context_max)
        return AuditOptions(write_groups=self.write, dry_run=self.dry_run,
                            sandbox=settings.mode, thresholds=thresholds,
                            limits={k: v for k, v in limits.items() if v is not None}), \
            choice.describe()

    def model_access(self, project: Project) -> ModelAccess:
        """Provider and model as `run` resolves them (flags > environment > config > the
        agent definition), resolved only when a spec first needs the model."""
        from agentrun.audit.auditor import AUDITOR
        from agentrun.audit.runner import ModelAccess
        from agentrun.providers.catalog import ProviderConfig

        def resolve() -> ProviderConfig:
            from agentrun.agent.definitions import load_agent
            from agentrun.providers.errors import NotConfigured
            from agentrun.providers.registry import resolve_provider_config

            agent = load_agent(AUDITOR, project.root)
            try:
                return resolve_provider_config(flag_provider=self.provider,
                                               flag_model=self.model, config=project.config,
                                               agent_model=agent.model, script=self.script)
            except NotConfigured as exc:
                raise NotConfigured(exc.message, f"{exc.hint} The checks that need no model: "
                                                 "`agentrun audit --static`.") from None

        return ModelAccess(resolve)
