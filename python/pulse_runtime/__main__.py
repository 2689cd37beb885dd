"""`python -m pulse_runtime` is pulse-run (what torchrun starts: `torchrun ... -m pulse_runtime`)."""
import sys

from .cli import main

sys.exit(main())
