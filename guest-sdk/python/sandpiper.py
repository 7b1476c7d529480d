"""Sandpiper's Python helper layer: the Rust SDK's friendly view of a call
(hosts by index, the VM, typed parameters, rejections grouped by reason) over
the bindings componentize-py generates from ``wit/0.2.0/policy.wit``
(``sandpiper:policy@0.2.0``).

A unit is an ordinary componentize-py app: it defines the classes the world
exports (``Metadata`` and any of ``Filter``, ``Score``, ``Balance``) and, in
each call, wraps the request in a :class:`Context`::

    import sandpiper
    from wit_world import exports

    INFO = sandpiper.unit_info("Example", "Says no to hosts that are down.",
                               params=[sandpiper.param("Limit", "...", "4", "[0-9]+")])
    # A unit with nothing to say about most requests declares which ones it
    # concerns, and the host skips the call for the others:
    #   applies_to=sandpiper.requests_with(types.RequestProperty_CpuFlags())

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
from wit_world.imports import types
from wit_world.imports.types import (
    AppliesTo_EveryRequest,
    AppliesTo_RequestsWith,
    CellMetric,
    HostFlag,
    HostLabelKind,
    HostMetric,
    HostStatus,
    HostText,
    KeyValue,
    ParamSpec,
    PcpuFlag,
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
    "CellMetric",
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
    "PcpuFlag",
    "Rejections",
    "ScoreOrder",
    "Scores",
    "StringTable",
    "VmFlag",
    "VmMetric",
    "VmRef",
    "VmText",
    "Vms",
    "every_request",
    "param",
    "requests_with",
    "scores",
    "types",
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


def every_request():
    """The unit has something to say about every request (the default)."""
    return AppliesTo_EveryRequest()


def requests_with(*properties):
    """The unit has something to say only about requests with at least one
    of ``properties`` (``types.RequestProperty_...`` values, e.g.
    ``types.RequestProperty_Hint("same_host")``): for any other request its
    filter would reject nothing and its score would give every candidate the
    same value, so the host skips the call (``types.applies-to``)."""
    if not properties:
        raise ValueError("requests_with needs at least one property (an empty list would mean never)")
    return AppliesTo_RequestsWith(list(properties))


def unit_info(
    name: str,
    description: str,
    params=(),
    score_order: ScoreOrder = ScoreOrder.LOWER_IS_BETTER,
    applies_to=None,
    per_host: bool = False,
) -> UnitInfo:
    """What the unit says about itself; also where parameter defaults come
    from when a caller did not fill them in. ``applies_to`` is
    :func:`every_request` when not given. ``per_host`` promises the unit
    judges each host on its own (``types.unit-info.per-host``), so the host
    may reuse its answers for hosts that did not change."""
    return UnitInfo(
        name=name,
        description=description,
        params=list(params),
        score_order=score_order,
        applies_to=every_request() if applies_to is None else applies_to,
        per_host=per_host,
    )


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


class StringTable:
    """A WIT ``strings`` table (one UTF-8 text plus offsets) read as a
    sequence of ``str``: each string is decoded the first time it is read and
    kept, so a column of 10,000 hosts naming four racks decodes four."""

    __slots__ = ("_text", "_offsets", "_decoded")

    def __init__(self, strings):
        self._text = strings.text
        self._offsets = strings.offsets
        self._decoded = {}

    def __len__(self) -> int:
        return max(len(self._offsets) - 1, 0)

    def __getitem__(self, index: int) -> str:
        value = self._decoded.get(index)
        if value is None:
            if not 0 <= index < len(self):
                raise IndexError(index)
            start, end = self._offsets[index], self._offsets[index + 1]
            value = self._decoded[index] = bytes(self._text[start:end]).decode("utf-8")
        return value

    def __iter__(self):
        return (self[index] for index in range(len(self)))


class _Interned:
    """A string column: ``values[indices[row]]`` is row ``row``'s string."""

    __slots__ = ("values", "indices")

    def __init__(self, column):
        self.values = StringTable(column.values)
        self.indices = column.indices


class _Labels:
    """A key/value column with its strings decoded on first read."""

    __slots__ = ("strings", "offsets", "keys", "values")

    def __init__(self, column):
        self.strings = StringTable(column.strings)
        self.offsets = column.offsets
        self.keys = column.keys
        self.values = column.values


def _row(offsets, row: int):
    """Row ``row``'s positions in a compressed-row ``offsets`` list."""
    if row + 1 >= len(offsets):
        return range(0)
    return range(offsets[row], offsets[row + 1])


def _labels_row(labels, row: int):
    """Row ``row``'s (key, value) pairs of a key/value column."""
    strings, keys, values = labels.strings, labels.keys, labels.values
    return [(strings[keys[j]], strings[values[j]]) for j in _row(labels.offsets, row)]


def _labels_first(labels, row: int, key: str):
    """The first value of ``key`` in row ``row``, or None."""
    strings, keys = labels.strings, labels.keys
    for j in _row(labels.offsets, row):
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
        self._hardware = {}

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
            column = self._texts[text] = _Interned(inventory.host_texts(text))
        return column

    def labels(self, kind: HostLabelKind):
        """A key/value column in compressed-row form (see ``types.labels``)."""
        column = self._labels.get(kind)
        if column is None:
            column = self._labels[kind] = _Labels(inventory.host_labels(kind))
        return column

    def named_metric(self, name: str):
        """An engine-defined metric, NaN where a host does not report it."""
        column = self._named.get(name)
        if column is None:
            column = self._named[name] = inventory.host_named_metric(name)
        return column

    # Hardware (new in 0.2.0): flat columns in compressed rows over the
    # cluster's NUMA cells, their CPUs and the hosts' device pools, as the
    # WIT sends them (``types.numa-topology`` and after). Cells, CPUs and
    # pools are numbered across the cluster: ``HostRef.cells`` and
    # ``HostRef.device_pools`` give one host's.

    def _fetch(self, key, fetch):
        column = self._hardware.get(key)
        if column is None:
            column = self._hardware[key] = fetch()
        return column

    def numa_cells(self):
        """Every host's cells: ``offsets``, ``node_ids``, ``sockets``."""
        return self._fetch("cells", inventory.numa_cells)

    def cell_metric(self, metric: CellMetric):
        """A numeric column, one value per cell."""
        return self._fetch(("cell", metric), lambda: inventory.numa_cell_metrics(metric))

    def cell_cpus(self):
        """Every cell's CPUs: ``offsets`` (per cell), ``cpus``, ``cores``."""
        return self._fetch("cpus", inventory.numa_cell_cpus)

    def pcpu_flags(self, flag: PcpuFlag):
        """A yes/no column as ``bytes`` over the entries of :meth:`cell_cpus`."""
        return self._fetch(("pcpu", flag), lambda: inventory.numa_pcpu_flags(flag))

    def cell_pages(self):
        """Pages per cell and size: ``offsets``, ``size_kib``, ``total``, ``free``."""
        return self._fetch("pages", inventory.numa_cell_pages)

    def cell_distances(self):
        """Each cell's distances to the cells of its host."""
        return self._fetch("distances", inventory.numa_cell_distances)

    def device_pools(self):
        """Every host's PCI device pools; their strings through :meth:`device_text`."""
        return self._fetch("pools", inventory.device_pools)

    def device_text(self, index: int) -> str:
        """String ``index`` of the device pools' table (vendor, product, address)."""
        table = self._fetch("pool-strings", lambda: StringTable(self.device_pools().strings))
        return table[index]

    def device_pool_labels(self):
        """Each pool's tags, a key/value column with one row per pool."""
        return self._fetch("pool-labels", lambda: _Labels(inventory.device_pool_labels()))

    def mdev_offers(self):
        """Every host's mediated device types: ``offsets``, ``names``, ``free``, ``pools``."""
        return self._fetch("mdevs", inventory.mdev_types)

    def mdev_text(self, index: int) -> str:
        """String ``index`` of the mediated device offers' table."""
        table = self._fetch("mdev-strings", lambda: StringTable(self.mdev_offers().strings))
        return table[index]


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

    @property
    def cpu_model(self) -> str:
        return self.text(HostText.CPU_MODEL)

    @property
    def cpu_flags(self):
        """The host CPU's feature flags."""
        return [name for name, _ in self.labels(HostLabelKind.CPU_FLAGS)]

    def has_cpu_flag(self, flag: str) -> bool:
        return flag in self.cpu_flags

    @property
    def cells(self):
        """This host's NUMA cells, as cluster-wide cell indices (a range)."""
        return _row(self._hosts.numa_cells().offsets, self.index)

    @property
    def device_pools(self):
        """This host's PCI device pools, as cluster-wide pool indices (a range)."""
        return _row(self._hosts.device_pools().offsets, self.index)

    @property
    def mdev_offers(self):
        """This host's mediated device entries (a range over ``mdev_offers``)."""
        return _row(self._hosts.mdev_offers().offsets, self.index)

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
            column = self._texts[text] = _Interned(inventory.vm_texts(text))
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
    (``cx.vm``, the generated ``Vm`` record; ``cx.vm.hardware`` is what it
    needs of the hosts' hardware), the unit's parameters, the
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
    reason. A reason whose figures vary by host is best sent as a template
    and figures (:meth:`reject_with`): the host writes the sentences only
    when someone reads them."""

    def __init__(self):
        # (reason, is_template) -> [hosts, figures]: the same text is a plain
        # sentence without figures and a template with them.
        self._groups = {}
        self._rejected = set()

    def _add(self, host: int, key, figures) -> bool:
        if host in self._rejected:
            return False
        self._rejected.add(host)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = ([], [])
        group[0].append(host)
        group[1].extend(float(figure) for figure in figures)
        return True

    def reject(self, host: int, reason: str) -> bool:
        """Rejects ``host`` for ``reason``; False when it was already rejected."""
        return self._add(host, (reason, False), ())

    def reject_with(self, host: int, template: str, *figures) -> bool:
        """Rejects ``host`` for ``template`` with its own ``figures``, one per
        ``{}`` of the template (a doubled brace is a brace); False when it
        was already rejected."""
        return self._add(host, (template, True), figures)

    def reject_all(self, hosts, reason: str) -> None:
        for host in hosts:
            self.reject(host, reason)

    def is_rejected(self, host: int) -> bool:
        return host in self._rejected

    def __len__(self) -> int:
        return len(self._rejected)

    def build(self):
        """The groups, ready to return from ``Filter.filter``."""
        return [
            Rejection(reason=reason, hosts=hosts, figures=figures)
            for (reason, _), (hosts, figures) in self._groups.items()
        ]


def scores(values, floor=None, ceiling=None) -> Scores:
    """A score unit's answer: one finite value per candidate, in order."""
    return Scores(values=list(values), floor=floor, ceiling=ceiling)

