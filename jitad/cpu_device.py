"""The one device jitad's arrays live on, their sharding (every array whole on it) and
their one shard,
with JAX's names: what `jitad.devices()` lists and `jitad.numpy.Array.device` and
`.sharding` return. A leaf module (imports nothing of jitad)."""


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


class Sharding:
    """Where an array's pieces live; every jitad array lives whole on the one device."""
    memory_kind = "device"
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
        return isinstance(other, Sharding) and type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self):
        return hash(type(self))


class SingleDeviceSharding(Sharding):
    """The sharding of every jitad array: whole, on the CPU device."""

    def __init__(self, device=None, *, memory_kind=None):
        self._device = device if device is not None else CPU

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind=device)"


class Shard:
    """One piece of an array on one device: here the whole array (`data`) on the CPU."""

    def __init__(self, data):
        self.data, self.device, self.replica_id = data, CPU, 0
        self.index = tuple(slice(None) for _ in getattr(data, "shape", ()))

    def __repr__(self):
        return f"Shard(device={self.device!r}, index={self.index}, replica_id=0, data={self.data!r})"
