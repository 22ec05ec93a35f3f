"""One definition per tool: a pydantic arguments model is the single source of its JSON schema.

`ArgsTool` validates the model's arguments against that model and turns every failure into a
`ToolResult`, so a tool never raises into the agent loop.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from agentrun.core.errors import Interrupted
from agentrun.providers.base import ToolSpec
from agentrun.tools.base import (
    INVALID_ARGUMENTS,
    NOT_FOUND,
    PATH_DENIED,
    TOOL_ERROR,
    ToolContext,
    ToolResult,
)
from agentrun.tools.paths import PathDenied


class ToolArgs(BaseModel):
    """Base of every arguments model: unknown arguments are an error the model can correct."""

    model_config = ConfigDict(extra="forbid")


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Strip pydantic's noise from a JSON schema so every provider accepts it as is.

    Removes `title`s and `default: null`, collapses `X | None` (an optional argument needs no
    null branch), inlines `$defs` (not every provider resolves references), and guarantees
    `type: object`, `properties`, `required` and `additionalProperties: false` at the top.
    """
    cleaned = _clean_node(schema)
    defs = cleaned.pop("$defs", {})
    cleaned = _inline_refs(cleaned, defs, ())
    if _has_ref(cleaned):  # a recursive model: its references stay, and their targets
        cleaned["$defs"] = defs
    rest = {k: v for k, v in cleaned.items()
            if k not in ("type", "properties", "required", "additionalProperties")}
    return {"type": "object", "properties": cleaned.get("properties", {}),
            "required": list(cleaned.get("required", [])), "additionalProperties": False,
            **rest}


def _clean_node(node: Any) -> Any:
    if isinstance(node, list):
        return [_clean_node(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "default" and value is None:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _clean_node(prop) for name, prop in value.items()}
            continue
        out[key] = _clean_node(value)
    branches = out.get("anyOf")
    if isinstance(branches, list):
        non_null = [b for b in branches if b != {"type": "null"}]
        if len(non_null) == 1 and len(non_null) < len(branches):
            del out["anyOf"]
            out = {**non_null[0], **out}
    return out


def _inline_refs(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    """`{"$ref": "#/$defs/X", ...}` replaced by X's schema (the other keys win)."""
    if isinstance(node, list):
        return [_inline_refs(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    name = ref.removeprefix("#/$defs/") if isinstance(ref, str) else None
    if name in defs and name not in seen:
        rest = {k: _inline_refs(v, defs, seen) for k, v in node.items() if k != "$ref"}
        return {**_inline_refs(defs[name], defs, (*seen, name)), **rest}
    return {k: _inline_refs(v, defs, seen) for k, v in node.items()}


def _has_ref(node: Any) -> bool:
    if isinstance(node, list):
        return any(_has_ref(item) for item in node)
    return isinstance(node, dict) and ("$ref" in node or any(_has_ref(v) for v in node.values()))


def signature(name: str, args: type[BaseModel]) -> str:
    """`read_file(path, offset?, limit?)`: how the tool is called, for error messages."""
    params = [f if info.is_required() else f"{f}?" for f, info in args.model_fields.items()]
    return f"{name}({', '.join(params)})"


def field_problems(exc: ValidationError) -> list[str]:
    """One readable `field: problem` line per bad field (nested ones as `output.items.0.size`)."""
    problems = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(part) for part in err.get("loc", ())) or "(arguments)"
        kind = err.get("type", "")
        if kind == "missing":
            detail = "missing (required)"
        elif kind == "extra_forbidden":
            detail = "unexpected argument"
        else:
            shown = json.dumps(err.get("input"), default=str, ensure_ascii=False)
            if len(shown) > 80:
                shown = shown[:77] + "..."
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            detail = f"{msg} (got {shown})"
        problems.append(f"{field}: {detail}")
    return problems


def describe_validation_error(name: str, args: type[BaseModel], exc: ValidationError) -> str:
    """One readable line per bad field, then the expected call shape."""
    lines = [f"invalid arguments for {name}:", *(f"- {p}" for p in field_problems(exc)),
             f"expected: {signature(name, args)}"]
    return "\n".join(lines)


@functools.cache
def _parameters(args: type[ToolArgs]) -> dict[str, Any]:
    """A tool's argument schema, generated once per process: pydantic takes milliseconds."""
    return clean_schema(args.model_json_schema())


class ArgsTool:
    """Base of every tool: subclasses set `name`, `description`, `Args` and write `execute`."""

    name: ClassVar[str]
    description: ClassVar[str]
    Args: type[ToolArgs]  # a class attribute; an instance may narrow it (see SubmitResult)

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description,
                        parameters=copy.deepcopy(_parameters(self.Args)))

    def run(self, ctx: ToolContext, arguments: object) -> ToolResult:
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return ToolResult.error(
                INVALID_ARGUMENTS,
                f"invalid arguments for {self.name}: expected a JSON object, got "
                f"{type(arguments).__name__}\nexpected: {signature(self.name, self.Args)}")
        try:
            args = self.Args.model_validate(arguments)
        except ValidationError as exc:
            return ToolResult.error(INVALID_ARGUMENTS,
                                    describe_validation_error(self.name, self.Args, exc),
                                    problems=field_problems(exc))
        try:
            return self.execute(ctx, args)
        except Interrupted:
            raise  # the run is stopping: not a tool failure the model should react to
        except PathDenied as exc:
            return ToolResult.error(PATH_DENIED, f"{self.name}: {exc}")
        except FileNotFoundError as exc:
            return ToolResult.error(NOT_FOUND, f"{self.name}: {_os_message(exc)}")
        except Exception as exc:  # noqa: BLE001 - a tool reports, never raises
            return ToolResult.error(TOOL_ERROR, f"{self.name} failed: {_os_message(exc)}")

    def execute(self, ctx: ToolContext, args: Any) -> ToolResult:
        raise NotImplementedError


def _os_message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    text = str(exc)
    if isinstance(exc, OSError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
