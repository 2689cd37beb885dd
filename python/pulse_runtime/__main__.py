"""`python -m pulse_runtime` is pulse-run (torchrun starts `-m pulse_runtime`)."""
import sys

from .cli import main

sys.exit(main())
