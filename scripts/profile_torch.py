#!/usr/bin/python3
"""Profile a PyTorch model into a pulse.model/v1 profile: `pulse-profile` without installing
the package (python/pulse_runtime/profiler.py has the code and the options).

    /usr/bin/python3 scripts/profile_torch.py --model examples/small_unet.py:build \
        --sizes 1,2,4,8 -o profiles/models/small-unet-cpu.json
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from pulse_runtime.profiler import main  # noqa: E402

if __name__ == "__main__":
    main()
