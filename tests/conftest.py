"""Test settings: verify the IR after every pass, and use a private disk cache."""
import os
import tempfile

os.environ.setdefault("JITAD_VERIFY", "1")
os.environ.setdefault("JITAD_CACHE_DIR", tempfile.mkdtemp(prefix="jitad-test-cache-"))
# GPU tests run on numba-cuda's CUDA simulator unless a run asks for the real GPU
# (NUMBA_ENABLE_CUDASIM=0); numba reads this when it is first imported.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
