"""The worker pool's server's last preload: one throwaway client of each SDK it imported.

Building a client imports what the SDKs load lazily (their HTTP stack, the TLS trust store):
done here once, it is inherited by every worker instead of costing each one's first model
call. No request is made and no key is involved; the client is dropped at once.
"""

from __future__ import annotations

import contextlib
import sys

if "anthropic" in sys.modules:
    with contextlib.suppress(Exception):  # a preload must never keep workers from starting
        import anthropic

        anthropic.Anthropic(api_key="preload", base_url="http://127.0.0.1:9",
                            max_retries=0).close()
if "openai" in sys.modules:
    with contextlib.suppress(Exception):
        import openai

        openai.OpenAI(api_key="preload", base_url="http://127.0.0.1:9/v1",
                      max_retries=0).close()
