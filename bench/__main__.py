"""`python -m bench [--quick] [--gpu]`: every benchmark (scalar micro, tensor micro, then the
models); with --gpu also the GPU benchmarks (`python -m bench.gpu`) at the end."""
import sys

from . import gpu, micro, models, tensors

argv = [a for a in sys.argv[1:] if a == "--quick"]
status = micro.main(argv) or tensors.main(argv) or models.main(argv)
if "--gpu" in sys.argv[1:]:
    status = gpu.main(argv) or status
sys.exit(status)
