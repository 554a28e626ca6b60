"""The one device jitad's arrays live on, their sharding (every array whole on it) and
their one shard,
with JAX's names: what `jitad.devices()` lists and `jitad.numpy.Array.device` and
`.sharding` return. A leaf module (imports nothing of jitad)."""
import abc
import sys


class Device:
    """The CPU device this process runs on (JAX's `CpuDevice`): `id` 0, `platform` 'cpu'."""
    id = 0
    platform = "cpu"
    device_kind = "cpu"
    process_index = 0
    host_id = 0
    client = None

    def __repr__(self):
        return "CpuDevice(id=0)"

    def __str__(self):
        return "cpu:0"

    def __eq__(self, other):
        return isinstance(other, Device)

    def __hash__(self):
        return hash(Device)


CPU = Device()


class Sharding(metaclass=abc.ABCMeta):   # noqa: B024 (an ABC for `register`: the JAX-based sharding, see below)
    """Where an array's pieces live; every jitad array lives whole on the one device."""
    memory_kind = "device"
    num_devices = 1
    is_fully_replicated = True
    is_fully_addressable = True

    @property
    def device_set(self):
        return {CPU}

    def addressable_devices_indices_map(self, global_shape):
        return {CPU: tuple(slice(None) for _ in global_shape)}

    devices_indices_map = addressable_devices_indices_map

    def shard_shape(self, global_shape):
        return tuple(global_shape)

    def __eq__(self, other):
        return (isinstance(other, Sharding) and type(self).__name__ == type(other).__name__
                and vars(self) == vars(other))

    def __hash__(self):
        return hash(type(self).__name__)


class SingleDeviceSharding(Sharding):
    """The sharding of every jitad array: whole, on the CPU device."""

    def __init__(self, device=None, *, memory_kind=None):
        self._device = device if device is not None else CPU

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind=device)"


_ARRAY_SHARDINGS = {}


def array_sharding():
    """The `.sharding` of a jitad array: a `SingleDeviceSharding` on the CPU device. Where JAX
    is loaded it is also an instance of JAX's `Sharding` base class, so JAX, which reads an
    argument's `.sharding`, takes a jitad array as an uncommitted array on one device (a
    NumPy array to place) instead of failing on a sharding it does not know."""
    base = getattr(sys.modules.get("jax._src.sharding"), "Sharding", None)
    if base not in _ARRAY_SHARDINGS:
        _ARRAY_SHARDINGS[base] = SingleDeviceSharding() if base is None else _on_jax_base(base)()
    return _ARRAY_SHARDINGS[base]


def _on_jax_base(base):
    """`SingleDeviceSharding` remade on JAX's `Sharding` (a compiled class: the only base)."""
    attrs = {}
    for klass in reversed(SingleDeviceSharding.__mro__[:-1]):
        attrs.update((k, v) for k, v in vars(klass).items() if k not in ("__dict__", "__weakref__"))
    cls = type("SingleDeviceSharding", (base,), attrs)
    Sharding.register(cls)
    return cls


class Shard:
    """One piece of an array on one device: here the whole array (`data`) on the CPU."""

    def __init__(self, data):
        self.data, self.device, self.replica_id = data, CPU, 0
        self.index = tuple(slice(None) for _ in getattr(data, "shape", ()))

    def __repr__(self):
        return f"Shard(device={self.device!r}, index={self.index}, replica_id=0, data={self.data!r})"
