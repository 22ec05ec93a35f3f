"""GitHub Actions: a markdown job summary and `::error`/`::warning` annotations.

When `GITHUB_STEP_SUMMARY` is set, a run (or audit) appends its summary there; when
`GITHUB_ACTIONS` is `true`, failed groups and audit findings become annotations on the spec
file (with the line where it is known). Annotations are written to stderr: the runner reads
workflow commands from both streams, and stdout stays free for `--json`. Step outputs a later
job acts on (`aggregate --github-output`) are written here too, each checked against what it
may hold, so that no text a worker chose becomes an output.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from agentrun.core.errors import BadInput
from agentrun.core.fsutil import relpath
from agentrun.core.status import RunStatus
from agentrun.report.escape import inline
from agentrun.report.execution_state import RunState
from agentrun.report.summary import STATUS_MARK, format_cost, review_outcome, review_words


class Stream(Protocol):
    """Where annotations go: stderr, or what the command's output layer gives for its log."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


GROUP_LEVEL = {"failed": "error", "interrupted": "error", "partial": "warning",
               "blocked": "warning"}
FINDING_LEVEL = {"critical": "error", "warning": "warning", "info": "notice"}


# --- workflow commands -----------------------------------------------------------------------

def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, message: str, *, file: str | None = None, line: int | None = None,
               title: str | None = None) -> str:
    """One workflow command line: `::error file=F,line=N,title=T::message`."""
    props = [f"{k}={escape_property(str(v))}"
             for k, v in (("file", file), ("line", line), ("title", title)) if v]
    return f"::{level} {','.join(props)}::{escape_data(message)}" if props \
        else f"::{level}::{escape_data(message)}"


def run_annotations(state: RunState, group_lines: Mapping[str, int | None] | None = None
                    ) -> list[str]:
    """An error for each failed group, a warning for each partial or blocked one, and an
    error for a review that did not approve the run."""
    lines = group_lines or {}
    out = []
    for g in state.groups.values():
        level = GROUP_LEVEL.get(g.status)
        if level is None:
            continue
        message = g.error or f"{g.id} ended {g.status}"
        out.append(annotation(level, message, file=state.spec_path or None,
                              line=lines.get(g.id),
                              title=f"{state.spec_id} {g.id} {g.status}"))
    if review_outcome(state) == "failure":
        out.append(annotation("error", f"{review_words(state)}; fix it with `agentrun fix "
                                       f"{state.spec_id}`", file=state.spec_path or None,
                              title=f"{state.spec_id} review"))
    return out


def audit_annotations(results: Iterable[Any], root: Path | None = None) -> list[str]:
    """One annotation per audit finding (critical → error, warning → warning, info → notice)."""
    out = []
    for item in results:
        doc = item.to_dict() if hasattr(item, "to_dict") else dict(item)
        path = _relative(doc.get("path"), root)
        spec = doc.get("spec") or path or "spec"
        if doc.get("error"):
            out.append(annotation("error", doc["error"], file=path, title=f"{spec} invalid"))
        for f in doc.get("findings") or []:
            level = FINDING_LEVEL.get(f.get("severity", ""), "warning")
            out.append(annotation(level, f.get("message", ""), file=path, line=f.get("line"),
                                  title=f"{spec} {f.get('code', '')}".strip()))
    return out


def _relative(path: Any, root: Path | None) -> str | None:
    if not path:
        return None
    return relpath(path, Path(root or os.environ.get("GITHUB_WORKSPACE") or Path.cwd()))


# --- markdown --------------------------------------------------------------------------------

def _cell(text: Any) -> str:
    return inline(text)


def commit_link_base(env: Mapping[str, str]) -> str | None:
    server, repo = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY")
    return f"{server.rstrip('/')}/{repo}/commit/" if server and repo else None


def run_summary_markdown(state: RunState, title: str = "",
                         env: Mapping[str, str] | None = None) -> str:
    """The job summary of a run: headline, per-group table with commit links, totals."""
    env = os.environ if env is None else env
    link = commit_link_base(env)
    usage = state.usage
    mark = STATUS_MARK.get(state.status, state.status)
    lines = [f"### agentrun {state.spec_id}: {mark}", ""]
    if title:
        lines += [_cell(title), ""]
    model = f" · model {state.provider}/{state.model}" if state.provider else ""
    lines += [f"Run `{state.run_id}` · {state.mode} mode · {len(state.waves)} wave(s) · "
              f"tokens {usage.total:,} (input {usage.input_tokens:,}, output "
              f"{usage.output_tokens:,}) · cost {format_cost(state.cost_usd)}{model}", "",
              "| Group | Title | Wave | Status | Commits | Tokens | Cost | Note |",
              "|-------|-------|------|--------|---------|--------|------|------|"]
    for g in state.groups.values():
        commits = ", ".join(f"[`{c[:7]}`]({link}{c})" if link else f"`{c[:7]}`"
                            for c in g.commits) or "—"
        note = g.error or g.summary or ""
        if len(note) > 200:
            note = note[:197] + "..."
        cost = "—" if g.cost_usd is None else f"${g.cost_usd:.4f}"
        lines.append(f"| {_cell(g.id)} | {_cell(g.title)} | {_cell(g.wave)} | "
                     f"{STATUS_MARK.get(g.status, g.status)} | {commits} | "
                     f"{g.usage.total:,} | {cost} | {_cell(note)} |")
    counts = ", ".join(f"{n} {s}" for s, n in sorted(state.counts().items()))
    lines += ["", f"**Result:** {state.status} ({counts})"]
    if state.trace_id:
        lines += ["", f"**Trace:** `{_cell(state.trace_id)}` (OpenTelemetry trace id)"]
    if state.finished:
        lines += ["", f"**Review:** {_cell(review_words(state))}"]
    if state.warnings:
        lines += ["", "**Warnings:**", *(f"- {_cell(w)}" for w in state.warnings)]
    return "\n".join(lines) + "\n\n"


def audit_summary_markdown(results: Iterable[Any]) -> str:
    docs = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in results]
    lines = ["### agentrun audit", "", "| Spec | Verdict | Critical | Warnings |",
             "|------|---------|----------|----------|"]
    for doc in docs:
        counts = doc.get("counts") or {}
        lines.append(f"| {_cell(doc.get('spec', ''))} | {_cell(doc.get('verdict', ''))} | "
                     f"{counts.get('critical', '—')} | {counts.get('warning', '—')} |")
    return "\n".join(lines) + "\n\n"


# --- publishing ------------------------------------------------------------------------------

def publish(markdown: str, annotations: list[str], env: Mapping[str, str] | None = None,
            stream: Stream | None = None) -> None:
    """Append `markdown` to the step summary and print `annotations`, each only on GitHub.

    The summary file belongs to the runner and is appended to (not replaced), as it expects.
    """
    env = os.environ if env is None else env
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(markdown)
    if env.get("GITHUB_ACTIONS") == "true" and annotations:
        stream = stream or sys.stderr
        for line in annotations:
            stream.write(line + "\n")
        stream.flush()


def publish_run(state: RunState, title: str = "", group_lines: Mapping[str, int | None] | None
                = None, env: Mapping[str, str] | None = None,
                stream: Stream | None = None) -> None:
    publish(run_summary_markdown(state, title, env), run_annotations(state, group_lines), env,
            stream)


def publish_audit(results: Iterable[Any], env: Mapping[str, str] | None = None,
                  stream: Stream | None = None, root: Path | None = None) -> None:
    items = list(results)
    publish(audit_summary_markdown(items), audit_annotations(items, root), env, stream)


# --- step outputs ----------------------------------------------------------------------------

OUTPUT_HINT = "run it as a GitHub Actions step (the runner sets GITHUB_OUTPUT), or drop the flag"
_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # sha-1 or sha-256
OUTPUT_VALUES: dict[str, Callable[[str], object]] = {  # name: the values it may hold
    "status": lambda v: v in tuple(RunStatus),
    "commit": _COMMIT.fullmatch,
}


def outputs_file(env: Mapping[str, str] | None = None) -> Path:
    """The runner's step-outputs file, checked before any work: BadInput (exit 2) outside
    a step."""
    env = os.environ if env is None else env
    path = env.get("GITHUB_OUTPUT")
    if not path:
        raise BadInput("--github-output needs GITHUB_OUTPUT, the step-outputs file the "
                       "runner names", hint=OUTPUT_HINT)
    return Path(path)


def write_outputs(values: Mapping[str, str], env: Mapping[str, str] | None = None) -> None:
    """Append `name=value` lines to the step-outputs file, each value checked against what its
    output may hold (a status of the fixed set, a commit id): a value that is not one is a
    ValueError, never a line."""
    for name, value in values.items():
        check = OUTPUT_VALUES.get(name)
        if check is None or not isinstance(value, str) or not check(value):
            raise ValueError(f"not a valid step output: {name}={value!r}")
    lines = "".join(f"{name}={value}\n" for name, value in values.items())
    with open(outputs_file(env), "a", encoding="utf-8") as fh:
        fh.write(lines)
