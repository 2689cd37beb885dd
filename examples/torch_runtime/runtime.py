#!/usr/bin/python3
"""Execute a pulse-plan plan with PyTorch: `pulse-run` without installing the package
(python/pulse_runtime/ has the code; `pulse-run --help` the options).

Launch every rank on this host (gloo on loopback), run 3 iterations, write results:
    /usr/bin/python3 examples/torch_runtime/runtime.py --plan plan.json \
        --model examples/small_unet.py:build --iterations 3 --out /tmp/run

Run one rank yourself (e.g. inside a network namespace), torchrun-style:
    ... runtime.py --plan plan.json --model ... --rank 1 --master-addr 10.0.0.1 \
        --master-port 29500 --out /tmp/run
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
from pulse_runtime.cli import main  # noqa: E402
from pulse_runtime.runner import summarize  # noqa: E402,F401  (scripts/fidelity_bench.py)

if __name__ == "__main__":
    sys.exit(main())
