"""Parse + plan time for generated specs of 10, 100 and 1,000 task groups (~3 deps each).

Prints one line per size with the median of several runs and the time per group, so that
growth is visible: planning should grow roughly linearly with the number of groups.
Run: python bench/plan_scale.py
"""

from __future__ import annotations

import random
import statistics
import time

from agentrun.plan import build_plan
from agentrun.spec import parse_spec


def make_spec(groups: int, deps: int = 3, seed: int = 7) -> str:
    rng = random.Random(seed)
    rows = []
    for i in range(1, groups + 1):
        earlier = list(range(max(1, i - 20), i))
        chosen = sorted(rng.sample(earlier, min(deps, len(earlier))))
        dep_text = ", ".join(f"G{d}" for d in chosen) or "—"
        rows.append(f"| G{i} | Implement part {i} in `src/part_{i}.py` with tests in "
                    f"`tests/test_part_{i}.py` | {dep_text} | ~{rng.randint(5, 20)}% |")
    table = "\n".join(rows)
    return f"""---
id: SPEC-BENCH
type: feature
status: audited
complexity: large
---
# SPEC-BENCH: generated

## Context

A generated specification with {groups} task groups.

## Task

Build everything.

## Acceptance Criteria

- [ ] all parts exist

## Implementation Tasks

### Task Groups

| Group | Tasks | Dependencies | Est. Context |
|-------|-------|--------------|--------------|
{table}
"""


def measure(groups: int, repeats: int) -> tuple[float, float, int]:
    text = make_spec(groups)
    parse_times, plan_times = [], []
    waves = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        spec = parse_spec(text, "SPEC-BENCH.md")
        t1 = time.perf_counter()
        plan = build_plan(spec)
        t2 = time.perf_counter()
        parse_times.append(t1 - t0)
        plan_times.append(t2 - t1)
        waves = len(plan.waves)
    return statistics.median(parse_times), statistics.median(plan_times), waves


def main() -> None:
    print(f"{'groups':>7} {'parse ms':>10} {'plan ms':>9} {'total ms':>9} "
          f"{'us/group':>9} {'waves':>6}")
    for groups, repeats in ((10, 20), (100, 10), (1000, 5)):
        parse_s, plan_s, waves = measure(groups, repeats)
        total = parse_s + plan_s
        print(f"{groups:>7} {parse_s * 1e3:>10.1f} {plan_s * 1e3:>9.2f} {total * 1e3:>9.1f} "
              f"{total / groups * 1e6:>9.0f} {waves:>6}")


if __name__ == "__main__":
    main()
