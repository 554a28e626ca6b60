"""Test settings: verify the IR after every pass, and use a private disk cache."""
import os
import tempfile

os.environ.setdefault("JITAD_VERIFY", "1")
os.environ.setdefault("JITAD_CACHE_DIR", tempfile.mkdtemp(prefix="jitad-test-cache-"))
