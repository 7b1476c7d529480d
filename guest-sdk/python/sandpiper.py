"""Sandpiper's Python helper layer: the Rust SDK's friendly view of a call
(hosts by index, the VM, typed parameters, rejections grouped by reason) over
the bindings componentize-py generates from ``wit/policy.wit``.

A unit is an ordinary componentize-py app: it defines the classes the world
exports (``Metadata`` and any of ``Filter``, ``Score``, ``Balance``) and, in
each call, wraps the request in a :class:`Context`::

    import sandpiper
    from wit_world import exports

    INFO = sandpiper.unit_info("Example", "Says no to hosts that are down.",
                               params=[sandpiper.param("Limit", "...", "4", "[0-9]+")])

    class Metadata(exports.Metadata):
        def info(self):
            return INFO

    class Filter(exports.Filter):
        def filter(self, request, candidates):
            cx = sandpiper.Context(request, INFO)
            rejections = sandpiper.Rejections()
            for host in cx.hosts.candidates(candidates):
                if not host.is_up:
                    rejections.reject(host.index, "not up")
            return rejections.build()

Columns are fetched from the host the first time the call reads them and kept
for the rest of the call (the snapshot never changes within a call), so a unit
pays only for what it reads. The module imports the generated bindings at top
level, as componentize-py requires; it works with every world of the package
because all of them import ``inventory``.
"""

import math
import re

from wit_world.imports import inventory
from wit_world.imports.types import (
    HostFlag,
    HostLabelKind,
    HostMetric,
    HostStatus,
    HostText,
    KeyValue,
    ParamSpec,
    Rejection,
    Request,
    ScoreOrder,
    Scores,
    UnitInfo,
    VmFlag,
    VmMetric,
    VmText,
)

__all__ = [
    "Context",
    "HostFlag",
    "HostLabelKind",
    "HostMetric",
    "HostRef",
    "HostStatus",
    "HostText",
    "Hosts",
    "ParamError",
    "Params",
    "Rejections",
    "ScoreOrder",
    "Scores",
    "VmFlag",
    "VmMetric",
    "VmRef",
    "VmText",
    "Vms",
    "param",
    "scores",
    "unit_info",
]

# The largest value `Params.u32` accepts, as in the Rust SDK.
U32_MAX = 2**32 - 1

# What the Rust SDK reads as a number or an unsigned integer (Rust's own
# `f64`/`u32` syntax), so a value means the same in every language: Python
# alone would also accept `1_000`, JavaScript and C `0x10`.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_UNSIGNED = re.compile(r"\+?[0-9]+")


def param(name: str, description: str, default: str, pattern: str) -> ParamSpec:
    """Declares a parameter; ``pattern`` must match the whole value."""
    return ParamSpec(name=name, description=description, default_value=default, pattern=pattern)


def unit_info(
    name: str,
    description: str,
    params=(),
    score_order: ScoreOrder = ScoreOrder.LOWER_IS_BETTER,
) -> UnitInfo:
    """What the unit says about itself; also where parameter defaults come
    from when a caller did not fill them in."""
    return UnitInfo(name=name, description=description, params=list(params), score_order=score_order)


class ParamError(Exception):
    """A parameter is neither given nor declared, or does not parse as the
    type asked for. The message reads like the Rust SDK's."""

    def __init__(self, name: str, value=None, expected=None):
        self.name = name
        self.value = value
        self.expected = expected
        if value is None:
            message = f"parameter `{name}` is neither given nor declared"
        else:
            message = f'parameter `{name}` is "{value}", not {expected}'
        super().__init__(message)


class Params:
    """The unit's parameters for one call: the request's value, else the
    declared default. The host has already checked every value against its
    pattern, so errors here are the unit's own mistakes."""

    def __init__(self, given, info: UnitInfo):
        self._given = {}
        for pair in given:
            self._given.setdefault(pair.key, pair.value)
        self._info = info

    def get(self, name: str):
        """The raw value, or None when neither given nor declared."""
        value = self._given.get(name)
        if value is not None:
            return value
        for spec in self._info.params:
            if spec.name == name:
                return spec.default_value
        return None

    def str(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise ParamError(name)
        return value

    def float(self, name: str) -> float:
        """A finite number (NaN and infinities mean nothing as thresholds)."""
        value = self.str(name)
        text = value.strip()
        number = float(text) if _DECIMAL.fullmatch(text) else math.nan
        if not math.isfinite(number):
            raise ParamError(name, value, "a finite number")
        return number

    def u32(self, name: str) -> int:
        """An unsigned 32-bit integer, written in decimal digits."""
        value = self.str(name)
        text = value.strip()
        if not _UNSIGNED.fullmatch(text) or int(text) > U32_MAX:
            raise ParamError(name, value, "an unsigned 32-bit integer")
        return int(text)

    def bool(self, name: str) -> bool:
        """Exactly ``true`` or ``false``."""
        value = self.str(name)
        word = value.strip()
        if word not in ("true", "false"):
            raise ParamError(name, value, "`true` or `false`")
        return word == "true"


def _labels_row(labels, row: int):
    """Row ``row``'s (key, value) pairs of a key/value column."""
    offsets = labels.offsets
    if row + 1 >= len(offsets):
        return []
    strings, keys, values = labels.strings, labels.keys, labels.values
    return [(strings[keys[j]], strings[values[j]]) for j in range(offsets[row], offsets[row + 1])]


def _labels_first(labels, row: int, key: str):
    """The first value of ``key`` in row ``row``, or None."""
    offsets = labels.offsets
    if row + 1 >= len(offsets):
        return None
    strings, keys = labels.strings, labels.keys
    for j in range(offsets[row], offsets[row + 1]):
        if strings[keys[j]] == key:
            return strings[labels.values[j]]
    return None


class Hosts:
    """All hosts of the snapshot, by index. Whole columns for tight loops
    (``hosts.metric(HostMetric.MEMORY_FREE_MIB)``), or one host at a time
    through :class:`HostRef`."""

    def __init__(self):
        self._count = None
        self._metrics = {}
        self._statuses = None
        self._flags = {}
        self._texts = {}
        self._labels = {}
        self._named = {}

    def __len__(self) -> int:
        if self._count is None:
            self._count = inventory.host_count()
        return self._count

    def get(self, index: int):
        """The host at ``index``, or None when the snapshot has none there."""
        return HostRef(self, index) if 0 <= index < len(self) else None

    def __iter__(self):
        return (HostRef(self, index) for index in range(len(self)))

    def candidates(self, candidates):
        """The hosts behind ``candidates``, in order; indices outside the
        snapshot are skipped rather than trusted."""
        count = len(self)
        return (HostRef(self, index) for index in candidates if 0 <= index < count)

    def metric(self, metric: HostMetric):
        column = self._metrics.get(metric)
        if column is None:
            column = self._metrics[metric] = inventory.host_metrics(metric)
        return column

    def statuses(self):
        if self._statuses is None:
            self._statuses = inventory.host_statuses()
        return self._statuses

    def flags(self, flag: HostFlag):
        """A yes/no column as ``bytes``: 1 for yes, 0 for no, per host."""
        column = self._flags.get(flag)
        if column is None:
            column = self._flags[flag] = inventory.host_flags(flag)
        return column

    def texts(self, text: HostText):
        """An interned string column: ``values[indices[host]]``."""
        column = self._texts.get(text)
        if column is None:
            column = self._texts[text] = inventory.host_texts(text)
        return column

    def labels(self, kind: HostLabelKind):
        """A key/value column in compressed-row form (see ``types.labels``)."""
        column = self._labels.get(kind)
        if column is None:
            column = self._labels[kind] = inventory.host_labels(kind)
        return column

    def named_metric(self, name: str):
        """An engine-defined metric, NaN where a host does not report it."""
        column = self._named.get(name)
        if column is None:
            column = self._named[name] = inventory.host_named_metric(name)
        return column


class HostRef:
    """One host. Each attribute reads the host's row of a column that the
    call fetches once. Every numeric column is an attribute named after its
    metric: ``host.memory_free_mib``, ``host.cpu_usage_percent``, ..."""

    __slots__ = ("_hosts", "index")

    def __init__(self, hosts: Hosts, index: int):
        self._hosts = hosts
        self.index = index

    def metric(self, metric: HostMetric) -> float:
        return self._hosts.metric(metric)[self.index]

    @property
    def status(self) -> HostStatus:
        return self._hosts.statuses()[self.index]

    @property
    def is_up(self) -> bool:
        return self.status == HostStatus.UP

    def flag(self, flag: HostFlag) -> bool:
        return self._hosts.flags(flag)[self.index] != 0

    @property
    def is_spm(self) -> bool:
        return self.flag(HostFlag.SPM)

    def text(self, text: HostText) -> str:
        column = self._hosts.texts(text)
        return column.values[column.indices[self.index]]

    @property
    def id(self) -> str:
        return self.text(HostText.ID)

    @property
    def name(self) -> str:
        return self.text(HostText.NAME)

    @property
    def address(self) -> str:
        return self.text(HostText.ADDRESS)

    @property
    def zone(self) -> str:
        return self.text(HostText.ZONE)

    def labels(self, kind: HostLabelKind):
        """This host's (key, value) pairs of a key/value column."""
        return _labels_row(self._hosts.labels(kind), self.index)

    @property
    def networks(self):
        return [name for name, _ in self.labels(HostLabelKind.NETWORKS)]

    def has_network(self, network: str) -> bool:
        return network in self.networks

    def capability(self, key: str):
        """The host's capability ``key`` (its first value if it repeats), or None."""
        return _labels_first(self._hosts.labels(HostLabelKind.CAPABILITIES), self.index, key)

    @property
    def capabilities(self):
        return self.labels(HostLabelKind.CAPABILITIES)

    @property
    def aggregates(self):
        return [name for name, _ in self.labels(HostLabelKind.AGGREGATES)]

    def aggregate_metadata(self, key: str):
        """Every value the host's aggregates set for ``key``."""
        return [v for k, v in self.labels(HostLabelKind.AGGREGATE_METADATA) if k == key]

    def named_metric(self, name: str):
        """An engine-defined metric, None when the host does not report it."""
        value = self._hosts.named_metric(name)[self.index]
        return None if math.isnan(value) else value

    def __repr__(self) -> str:
        return f"HostRef({self.index})"


def _metric_attribute(metric: HostMetric):
    return property(lambda host: host._hosts.metric(metric)[host.index], doc=f"The host's `{metric.name.lower()}`.")


# One attribute per numeric column, named after the metric (the Rust SDK's
# `metric_accessors!`): generated from the enum so none can be missed.
for _metric in HostMetric:
    setattr(HostRef, _metric.name.lower(), _metric_attribute(_metric))
del _metric


class Vms:
    """The VMs already running (or pending) in the cluster, by index."""

    def __init__(self):
        self._count = None
        self._hosts = None
        self._metrics = {}
        self._flags = {}
        self._texts = {}

    def __len__(self) -> int:
        if self._count is None:
            self._count = inventory.vm_count()
        return self._count

    def get(self, index: int):
        return VmRef(self, index) if 0 <= index < len(self) else None

    def __iter__(self):
        return (VmRef(self, index) for index in range(len(self)))

    def hosts(self):
        """Host index of every VM."""
        if self._hosts is None:
            self._hosts = inventory.vm_hosts()
        return self._hosts

    def on_host(self, host: int):
        """The VMs placed on ``host``, in index order."""
        return [VmRef(self, index) for index, on in enumerate(self.hosts()) if on == host]

    def metric(self, metric: VmMetric):
        column = self._metrics.get(metric)
        if column is None:
            column = self._metrics[metric] = inventory.vm_metrics(metric)
        return column

    def flags(self, flag: VmFlag):
        """A yes/no column as ``bytes``: 1 for yes, 0 for no, per VM."""
        column = self._flags.get(flag)
        if column is None:
            column = self._flags[flag] = inventory.vm_flags(flag)
        return column

    def texts(self, text: VmText):
        column = self._texts.get(text)
        if column is None:
            column = self._texts[text] = inventory.vm_texts(text)
        return column


class VmRef:
    """One running VM."""

    __slots__ = ("_vms", "index")

    def __init__(self, vms: Vms, index: int):
        self._vms = vms
        self.index = index

    @property
    def host(self) -> int:
        return self._vms.hosts()[self.index]

    def metric(self, metric: VmMetric) -> float:
        return self._vms.metric(metric)[self.index]

    @property
    def memory_mib(self) -> float:
        return self.metric(VmMetric.MEMORY_MIB)

    @property
    def memory_guaranteed_mib(self) -> float:
        return self.metric(VmMetric.MEMORY_GUARANTEED_MIB)

    @property
    def vcpus(self) -> float:
        return self.metric(VmMetric.VCPUS)

    @property
    def cpu_usage_percent(self) -> float:
        return self.metric(VmMetric.CPU_USAGE_PERCENT)

    def flag(self, flag: VmFlag) -> bool:
        return self._vms.flags(flag)[self.index] != 0

    @property
    def is_migratable(self) -> bool:
        return self.flag(VmFlag.MIGRATABLE)

    @property
    def is_pending(self) -> bool:
        return self.flag(VmFlag.PENDING)

    def text(self, text: VmText) -> str:
        column = self._vms.texts(text)
        return column.values[column.indices[self.index]]

    @property
    def id(self) -> str:
        return self.text(VmText.ID)

    @property
    def name(self) -> str:
        return self.text(VmText.NAME)

    def __repr__(self) -> str:
        return f"VmRef({self.index})"


class Context:
    """Everything one filter or score call can read: the VM being placed
    (``cx.vm``, the generated ``Vm`` record), the unit's parameters, the
    request's hints, the hosts and the running VMs."""

    def __init__(self, request: Request, info: UnitInfo):
        self.request = request
        self.vm = request.vm
        self.params = Params(request.params, info)
        self.hosts = Hosts()
        self.vms = Vms()

    def hints(self, key: str):
        """The request's hints called ``key`` (a list-valued hint repeats)."""
        return [pair.value for pair in self.request.hints if pair.key == key]

    def extra_spec(self, key: str):
        """The VM's extra spec ``key`` (its first value), or None."""
        for pair in self.vm.extra_specs:
            if pair.key == key:
                return pair.value
        return None


class Rejections:
    """A filter's answer: rejected hosts grouped by reason, reasons in the
    order they first appeared. A host already rejected keeps its first
    reason."""

    def __init__(self):
        self._groups = {}
        self._rejected = set()

    def reject(self, host: int, reason: str) -> bool:
        """Rejects ``host`` for ``reason``; False when it was already rejected."""
        if host in self._rejected:
            return False
        self._rejected.add(host)
        group = self._groups.get(reason)
        if group is None:
            group = self._groups[reason] = []
        group.append(host)
        return True

    def reject_all(self, hosts, reason: str) -> None:
        for host in hosts:
            self.reject(host, reason)

    def is_rejected(self, host: int) -> bool:
        return host in self._rejected

    def __len__(self) -> int:
        return len(self._rejected)

    def build(self):
        """The groups, ready to return from ``Filter.filter``."""
        return [Rejection(reason=reason, hosts=hosts) for reason, hosts in self._groups.items()]


def scores(values, floor=None, ceiling=None) -> Scores:
    """A score unit's answer: one finite value per candidate, in order."""
    return Scores(values=list(values), floor=floor, ceiling=ceiling)

