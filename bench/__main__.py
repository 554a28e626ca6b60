"""`python -m bench`: every benchmark (today the scalar microbenchmarks)."""
import sys

from .micro import main

sys.exit(main())
