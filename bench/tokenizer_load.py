"""What measuring a context costs up front: building each bundled tokenizer in a fresh process
(read, check, parse the BPE file, build the `tiktoken.Encoding`), the median of several runs.
`--dry-run`, `Proceed?` and `audit` pay this once per process before they count anything.
Run: python bench/tokenizer_load.py [runs]
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CODE = """
import time
from agentrun.providers.tokens import load_encoding
started = time.perf_counter()
load_encoding({name!r}).encode_ordinary("hello")
print(time.perf_counter() - started)
"""


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(f"{'encoding':<12} {'median s':>9} {'min s':>7}   ({runs} fresh processes each)")
    for name in ("o200k_base", "cl100k_base"):
        times = [float(subprocess.run([sys.executable, "-c", CODE.format(name=name)],
                                      capture_output=True, text=True, check=True).stdout)
                 for _ in range(runs)]
        print(f"{name:<12} {statistics.median(times):>9.3f} {min(times):>7.3f}")


if __name__ == "__main__":
    main()
