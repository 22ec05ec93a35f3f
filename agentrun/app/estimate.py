"""What a run will cost, said before `Proceed?`: measured contexts priced by the price table.

A worker's first request carries its assignment (the group, the shared spec sections,
PROJECT.md and the files it names); `audit/estimates.py` counts exactly that. What comes after
depends on the model, so the figure is a floor, and the token budget gives the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrun.audit.estimates import Estimator, Thresholds, estimate_context, shared_parts
from agentrun.providers.pricing import price_for

if TYPE_CHECKING:
    from agentrun.plan import Plan
    from agentrun.project import Project
    from agentrun.spec.model import Spec


@dataclass
class RunEstimate:
    model: str
    workers: int
    context_tokens: int | None  # all workers' first requests together (None: not measured)
    budget_tokens: int  # every worker spending its whole token budget
    first_cost: float | None  # None: no price for the model
    budget_cost: float | None

    def describe(self) -> str:
        if self.context_tokens is None:  # nobody is asked: the ceiling only
            ceiling = "" if self.budget_cost is None else f" (≈ ${self.budget_cost:.2f} at " \
                "input prices)"
            return (f"Estimate: {self.workers} worker(s) · at most {self.budget_tokens:,} tokens "
                    f"under the token budget{ceiling}")
        head = (f"Estimate: {self.workers} worker(s) · measured context "
                f"{self.context_tokens:,} tokens")
        if self.first_cost is None:
            return (f"{head} · cost unknown: no price for {self.model} (add it under "
                    "`pricing:` in .specflow/config.yaml)")
        return (f"{head} (first requests ≈ ${self.first_cost:.4f} on {self.model}) · at most "
                f"{self.budget_tokens:,} tokens under the token budget "
                f"(≈ ${self.budget_cost:.2f} at input prices)")

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "workers": self.workers,
                "context_tokens": self.context_tokens, "budget_tokens": self.budget_tokens,
                "first_requests_usd": self.first_cost, "budget_usd": self.budget_cost}


def run_estimate(project: Project, spec: Spec, plan: Plan, model: str, token_budget: int,
                 pricing: dict[str, Any] | None, *, measure: bool = True) -> RunEstimate:
    """The measured context of every worker the plan starts, and what it costs on `model`.
    Measuring loads the model's tokenizer (about 0.3 s, bench/tokenizer_load.py): only when
    someone is about to decide (`Proceed?`, `--dry-run`), not in unattended runs."""
    batches = [b for wave in plan.waves for b in wave.batches]
    budget = token_budget * len(batches)
    price = price_for(model, pricing)
    per_token = None if price is None else price.input / 1_000_000
    if not measure:
        return RunEstimate(model=model, workers=len(batches), context_tokens=None,
                           budget_tokens=budget, first_cost=None,
                           budget_cost=None if per_token is None else budget * per_token)
    project_md = project.project_text()
    measured = estimate_context(spec, spec.groups, root=project.root, project_md=project_md,
                                model=model, thresholds=Thresholds(), source="spec",
                                single_context=plan.mode == "single")
    if plan.mode == "single" or not spec.groups:
        context = measured.total.tokens * len(batches)
    else:
        # a batch of several groups carries the shared parts once, not once per group
        shared = sum(p.tokens for p in shared_parts(spec, project_md,
                                                    Estimator(project.root, model)))
        units = {u.id: u.tokens for u in measured.groups}
        context = sum(sum(units.get(g, 0) for g in b.ids) - shared * (len(b.ids) - 1)
                      for b in batches)
    return RunEstimate(model=model, workers=len(batches), context_tokens=context,
                       budget_tokens=budget,
                       first_cost=None if per_token is None else context * per_token,
                       budget_cost=None if per_token is None else budget * per_token)
