"""jitad's version (JAX's `jax.version`): `jitad.version.__version__`, also `jitad.__version__`."""
__version__ = "0.1.0"
_version = __version__
