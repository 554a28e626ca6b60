"""JAX's `jax.sharding` on one CPU device: meshes of one device, partition specs, and
shardings that place every array whole on that device.

>>> mesh = jitad.make_mesh((1,), ("batch",))
>>> s = jitad.NamedSharding(mesh, jitad.P("batch"))
>>> s.is_fully_replicated, jitad.device_put(np.ones(4), s).shape
(True, (4,))
"""
import math

import numpy as np

from .cpu_device import CPU, Sharding, SingleDeviceSharding
from .errors import ArgumentError, DeviceError

__all__ = ["AbstractMesh", "AxisType", "Mesh", "NamedSharding", "PartitionSpec", "Sharding",
           "SingleDeviceSharding", "get_abstract_mesh", "get_mesh", "make_mesh", "make_single_device_sharding",
           "reshard", "set_mesh", "use_abstract_mesh"]


class AxisType:
    """How a mesh axis is sharded (accepted for JAX's signatures; one device has no choice)."""
    Auto, Explicit, Manual = "Auto", "Explicit", "Manual"


class PartitionSpec(tuple):
    """Which mesh axis each array dimension is split over (`None`: not split):
    `jitad.P("batch", None)`."""

    def __new__(cls, *partitions):
        return tuple.__new__(cls, partitions)

    def __repr__(self):
        return f"PartitionSpec({', '.join(map(repr, self))})"


class Mesh:
    """Devices arranged on named axes; with one device every axis has size 1."""

    def __init__(self, devices, axis_names, axis_types=None):
        self.devices = np.asarray(devices, dtype=object)
        self.axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if self.devices.ndim != len(self.axis_names):
            raise ArgumentError(f"Mesh: {self.devices.ndim} device axes but {len(self.axis_names)} names "
                                f"{self.axis_names}; give one name per axis")
        self.axis_types = axis_types

    @property
    def shape(self):
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def size(self):
        return self.devices.size

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return f"Mesh({', '.join(f'{n!r}: {s}' for n, s in self.shape.items())})"


AbstractMesh = Mesh


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None):
    """A mesh of the available devices: with one CPU device every axis size must be 1
    (as JAX requires the sizes to multiply to the device count)."""
    shape = tuple(int(s) for s in axis_shapes)
    if math.prod(shape) != 1:
        raise DeviceError(f"make_mesh: axis sizes {shape} need {math.prod(shape)} devices, but there is 1; "
                          "give every axis size 1 (or use vmap for a batch axis)")
    return Mesh(np.full(shape, CPU, dtype=object), axis_names, axis_types)


class NamedSharding(Sharding):
    """An array split over mesh axes by a `PartitionSpec`; on one device, whole."""

    def __init__(self, mesh, spec=PartitionSpec(), *, memory_kind=None):   # noqa: B008 (an immutable default, as JAX's)
        self.mesh = mesh
        self.spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


def make_single_device_sharding(device):
    return SingleDeviceSharding(device)


_MESH = [None]


class _MeshSet:
    """What `set_mesh` returns: leaving its `with` block restores the mesh before."""

    def __init__(self, old, mesh):
        self.old, self.mesh = old, mesh

    def __enter__(self):
        return self.mesh

    def __exit__(self, *exc):
        _MESH[0] = self.old
        return False


def set_mesh(mesh):
    """Make `mesh` the current mesh (in a `with` block, until it ends)."""
    if mesh is not None and not isinstance(mesh, Mesh):
        raise ArgumentError(f"set_mesh takes a Mesh or None, got {type(mesh).__name__}")
    old, _MESH[0] = _MESH[0], mesh
    return _MeshSet(old, mesh)


use_abstract_mesh = set_mesh


def get_mesh():
    """The mesh set by `set_mesh` (None where none is)."""
    return _MESH[0]


get_abstract_mesh = get_mesh


def reshard(xs, out_shardings):
    """`xs` placed by `out_shardings`: on one device, the values themselves as arrays."""
    from .toplevel import device_put
    return device_put(xs)
