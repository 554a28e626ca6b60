"""JAX's `jax.memory`: the memory spaces an array may live in. jitad's arrays live in
host memory, which is the CPU device's memory: `Device` and `Host` are the same place.

>>> jitad.memory.Space.Device.name
'Device'
"""
import enum

__all__ = ["Space"]


class Space(enum.Enum):
    """Where an array lives: `Device`, `Host`, or `Any`."""
    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()
