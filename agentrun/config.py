"""`.specflow/config.yaml`: every project setting, its type and its default, checked once.

The file is validated when the project is loaded, so a typo or a wrong type stops a command with
one message naming the file, the key and the fix — before any model call or worktree. Commands
then read attributes; the limits' defaults come from core/limits.py, their only copies.
Precedence stays flags > environment > this file > the defaults; the file is the third layer,
so the commands apply flags and the environment on top of it.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, get_args, get_origin

import yaml
from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from agentrun.core.config_section import ConfigSection
from agentrun.core.errors import BadInput
from agentrun.core.limits import (
    DEFAULT_MAX_WRITE_BYTES,
    DEFAULT_REQUEST_RETRIES,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_RETRIES,
    DEFAULT_TOKEN_BUDGET,
    DEFAULT_WORKER_TIMEOUT_S,
    SandboxLimits,
)
from agentrun.providers.catalog import provider_names
from agentrun.yamlload import safe_load

CONFIG_FILE = ".specflow/config.yaml"

DEFAULT_ON_FAILURE: Final = "continue"  # core/status.py's OnFailure.CONTINUE

_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Settings that would send requests, and keys, where a file in the repository says: any change
# merged into the repository (a worker's included) could redirect the next run's API key.
_ENDPOINT_KEY = re.compile(r"(?i)(^|_)(base_url|url|endpoint|api_?key|key|token|secret|password)$")
# Old spellings still read, each with a warning naming the new key: `max_retries` was easily
# taken for `retries` (fresh attempts after a failure), while it meant the SDK's request retries.
RENAMED_KEYS = {"max_retries": "request_retries"}
RENAMED_MEANING = {"request_retries": "agentrun's retries of a model request on 429/5xx; "
                                      "`retries` is fresh attempts after a failure"}
USER_CONFIG_HINT = ("set it in the environment (e.g. OPENAI_BASE_URL, ANTHROPIC_API_KEY), or in "
                    "your user-level config file {path}, outside any repository")


class AuditConfig(ConfigSection):
    """`audit:` — settings of `agentrun audit` that differ from `run`'s."""

    max_parallel: int | None = Field(None, ge=1)  # specs audited at once
    max_steps: int | None = Field(None, ge=1)  # auditor model turns
    token_budget: int | None = Field(None, ge=1)  # auditor tokens per spec
    # Shares of the context window above which a spec needs decomposition (None: the audit's
    # own defaults).
    group_context_max: float | None = Field(None, gt=0, le=1)
    total_context_max: float | None = Field(None, gt=0, le=1)


class SandboxConfig(ConfigSection):
    """`sandbox:` — how model-issued commands are confined (README "Sandbox")."""

    mode: Literal["auto", "on", "off"] = "auto"
    network: bool = False  # let commands reach the network (package installs)
    setup_network: bool = False  # let `setup_command` reach the network (nothing else)
    home_allow: list[str] = Field(default_factory=list)  # paths under home shown read-only
    limits: SandboxLimits = Field(default_factory=SandboxLimits)


class ModelPrice(ConfigSection):
    """`pricing: {model: ...}` — USD per million tokens; cache prices default to `input`."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)


class ProjectConfig(ConfigSection):
    """The whole file. Unknown keys are errors: a misspelt key would otherwise do nothing."""

    provider: str | None = None  # anthropic | openai | scripted
    model: str | None = None
    script: str | None = None  # the scripted provider's script
    validation_command: str | None = None
    max_parallel: int | None = Field(None, ge=1)  # workers at once (None: the whole wave)
    on_failure: Literal["continue", "abort"] = DEFAULT_ON_FAILURE  # core/status.py's OnFailure
    max_steps: int | None = Field(None, ge=1)  # model turns per attempt
    token_budget: int = Field(DEFAULT_TOKEN_BUDGET, ge=1)
    worker_timeout_s: float = Field(DEFAULT_WORKER_TIMEOUT_S, gt=0)
    retries: int = Field(DEFAULT_RETRIES, ge=0)  # fresh attempts after a failed one
    request_retries: int = Field(DEFAULT_REQUEST_RETRIES, ge=0)  # agent/modelcall.py's
    timeout_s: float = Field(DEFAULT_REQUEST_TIMEOUT_S, gt=0)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    pricing: dict[str, ModelPrice] = Field(default_factory=dict)
    command_env: list[str] = Field(default_factory=list)  # more variables commands may see
    max_write_bytes: int = Field(DEFAULT_MAX_WRITE_BYTES, ge=1)  # one write_file call
    executor: Literal["builtin", "claude-code", "codex"] | None = None  # who works in a worktree
    setup_command: str | None = None  # run in every new worktree before its worker starts
    worktree_copy: list[str] = Field(default_factory=list)  # untracked paths copied in
    max_cost_usd: float | None = Field(None, gt=0)  # the whole run's spending cap
    _deprecations: tuple[str, ...] = PrivateAttr(default=())

    @property
    def deprecations(self) -> tuple[str, ...]:
        """One line per old key the file still uses, for the command to print once."""
        return self._deprecations

    @field_validator("provider", "model", "script", "validation_command", "setup_command")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return (value.strip() or None) if value is not None else None

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str | None) -> str | None:
        if value is not None and value.lower() not in provider_names():
            raise ValueError(f"must be one of {', '.join(provider_names())}")
        return value.lower() if value else None

    @field_validator("command_env")
    @classmethod
    def _variable_names(cls, value: list[str]) -> list[str]:
        bad = [name for name in value if not _VAR_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"must list environment variable names ({bad[0]!r} is not one)")
        return value

    @field_validator("pricing", mode="before")
    @classmethod
    def _model_names_are_text(cls, value: Any) -> Any:
        return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else value

    def price_overrides(self) -> dict[str, dict[str, float]]:
        """`pricing:` as the plain mapping a worker assignment carries."""
        return {name: price.model_dump(exclude_none=True) for name, price in self.pricing.items()}


def parse_config(data: Mapping[str, Any] | None, source: str = CONFIG_FILE) -> ProjectConfig:
    """Validate settings read from `source`; the first problem is `BadInput` naming the key."""
    if data is None:
        return ProjectConfig()
    if not isinstance(data, Mapping):
        raise BadInput(f"invalid config {source}: expected a mapping of settings",
                       hint="write settings as `key: value` lines")
    _refuse_endpoints(data, source)
    data, renamed = _renamed(data, source)
    try:
        config = ProjectConfig.model_validate(data)
    except ValidationError as exc:
        raise _bad_input(exc.errors(include_url=False)[0], source, renamed) from None
    config._deprecations = tuple(
        f"{source}: `{old}` is deprecated; rename it to `{new}` ({RENAMED_MEANING[new]})"
        for old, new in renamed.items())
    return config


def _renamed(data: Mapping[str, Any], source: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings with old key names replaced by new ones, and which were replaced."""
    settings, renamed = dict(data), {}
    for old, new in RENAMED_KEYS.items():
        if old not in settings:
            continue
        if new in settings:
            raise BadInput(f"invalid config {source}: both `{old}` and `{new}` are set "
                           f"(`{old}` is the old name of `{new}`)",
                           hint=f"keep only `{new}`")
        settings[new] = settings.pop(old)
        renamed[old] = new
    return settings, renamed


def _refuse_endpoints(data: Mapping[str, Any], source: str) -> None:
    """A server URL or a key in the project's file is refused, naming where it belongs."""
    for key in data:
        if isinstance(key, str) and _ENDPOINT_KEY.search(key):
            raise BadInput(f"invalid config {source}: `{key}` does not belong in the repository "
                           "(a change to a repository file must not choose where requests, and "
                           "your API key, go)",
                           hint="remove it from the project's config and "
                                + USER_CONFIG_HINT.format(path=user_config_path()))


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/agentrun/config.yaml` (default `~/.config/...`): the user's own
    settings, where endpoints and keys belong (project.py reads it)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "agentrun" / "config.yaml"


def read_config(path: Path) -> ProjectConfig:
    """The settings in `path` (defaults if it does not exist). Invalid YAML is a clear error."""
    if not path.is_file():
        return ProjectConfig()
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise BadInput(f"invalid config {path}: {exc}",
                       hint="fix the YAML syntax or remove the file") from None
    return parse_config(data, _shown(path))


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# -- messages ----------------------------------------------------------------------------------

def _keys_under(parent: tuple[Any, ...]) -> list[str]:
    """The keys allowed where an unknown one was found: the model at `parent`, followed from
    the file's top through sections (`sandbox.limits`) and maps of them (`pricing.<model>`)."""
    model: Any = ProjectConfig
    for part in parent:
        fields = getattr(model, "model_fields", None)
        if fields is not None and part in fields:
            model = fields[part].annotation
        elif get_origin(model) is dict:  # a map's key (a model's name under `pricing:`)
            model = get_args(model)[1]
        else:
            return []
    return list(getattr(model, "model_fields", {}))


def _bad_input(error: Mapping[str, Any], source: str,
               renamed: Mapping[str, str] | None = None) -> BadInput:
    written = {new: old for old, new in (renamed or {}).items()}  # name the key as written
    loc = tuple(error["loc"])
    if loc and loc[0] in written:
        loc = (written[loc[0]], *loc[1:])
    key = ".".join(str(part) for part in loc)
    if error["type"] == "extra_forbidden":
        known = _keys_under(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        guess = f" — did you mean `{'.'.join(map(str, (*loc[:-1], close[0])))}`?" if close \
            else ""
        return BadInput(f"invalid config {source}: unknown key `{key}`{guess}",
                        hint=f"remove it or correct its spelling; the keys here are: "
                             f"{', '.join(known)}")
    if error["type"] == "missing":
        return BadInput(f"invalid config {source}: `{key}` is missing",
                        hint=f"add `{loc[-1]}:` under `{'.'.join(map(str, loc[:-1]))}`")
    return BadInput(f"invalid config {source}: `{key}` {_what(error)} "
                    f"(got {error['input']!r})",
                    hint=f"correct `{key}` in {source}, or remove it to use the default")


def _what(error: Mapping[str, Any]) -> str:
    """Pydantic's "Input should be a valid integer" as "must be a whole number"."""
    kind = error["type"]
    if kind in ("model_type", "dict_type"):
        return "must be a mapping of settings"
    if kind == "string_type":
        return "must be a string"
    if kind == "int_type":
        return "must be a whole number"
    if kind == "float_type":
        return "must be a number"
    msg = str(error["msg"]).removeprefix("Value error, ")
    return msg.replace("Input should be", "must be")
