"""`python -m bench [--quick]`: every benchmark (the microbenchmarks, then the models)."""
import sys

from . import micro, models

argv = [a for a in sys.argv[1:] if a == "--quick"]
sys.exit(micro.main(argv) or models.main(argv))
