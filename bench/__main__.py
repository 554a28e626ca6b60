"""`python -m bench [--quick]`: every benchmark (scalar micro, tensor micro, then the models)."""
import sys

from . import micro, models, tensors

argv = [a for a in sys.argv[1:] if a == "--quick"]
sys.exit(micro.main(argv) or tensors.main(argv) or models.main(argv))
