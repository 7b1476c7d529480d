"""HeadroomAffinity in Python: the example unit every supported language
implements identically (see policies/examples/README.md).

* filter: rejects a host that lacks a CPU flag the VM requires, or has
  fewer NUMA cells than the VM asks for, or whose free memory minus the VM's
  memory is below ``HeadroomMib`` (and, with its own reason, a host that
  cannot hold the VM at all);
* score: prefers hosts whose capability ``LabelKey`` equals the VM's extra
  spec of the same key (1 for a match, else 0; higher is better).

Build: ``scripts/build-unit.sh python filter-score-unit out.wasm
policies/examples/python/headroom_affinity.py``.
"""

import sandpiper
from sandpiper import ScoreOrder
from wit_world import exports

INFO = sandpiper.unit_info(
    "HeadroomAffinityPython",
    "Keeps HeadroomMib of memory free on the chosen host and prefers hosts "
    "whose capability LabelKey matches the VM's extra spec LabelKey.",
    params=[
        sandpiper.param(
            "HeadroomMib",
            "Memory (MiB) that must stay free on a host after placing the VM.",
            "512",
            "^[0-9]{1,9}$",
        ),
        sandpiper.param(
            "LabelKey",
            "Host capability compared with the VM's extra spec of the same key.",
            "rack",
            "^[A-Za-z0-9_.:/-]{1,64}$",
        ),
    ],
    score_order=ScoreOrder.HIGHER_IS_BETTER,
    # A host's verdict and score read only that host (types.unit-info.per-host).
    per_host=True,
)


class Metadata(exports.Metadata):
    def info(self):
        return INFO


class Filter(exports.Filter):
    def filter(self, request, candidates):
        cx = sandpiper.Context(request, INFO)
        rejections = sandpiper.Rejections()
        try:
            headroom = cx.params.u32("HeadroomMib")
        except sandpiper.ParamError as error:
            # A misconfigured unit fails closed, and says why.
            rejections.reject_all(candidates, str(error))
            return rejections.build()
        hardware = cx.vm.hardware
        needed = cx.vm.memory_mib
        cells_wanted = len(hardware.numa_cells)
        too_tight = f"would leave less than {headroom} MiB free"
        for host in cx.hosts.candidates(candidates):
            free = host.memory_free_mib
            missing = None
            if hardware.required_cpu_flags:
                flags = host.cpu_flags
                missing = next((flag for flag in hardware.required_cpu_flags if flag not in flags), None)
            cells = len(host.cells) if cells_wanted else 0
            if missing is not None:
                rejections.reject(host.index, f"lacks CPU flag {missing}")
            elif cells < cells_wanted:
                rejections.reject_with(host.index, "has {} NUMA cells, the VM needs {}", cells, cells_wanted)
            elif free < needed:
                rejections.reject_with(host.index, "needs {} MiB, {} MiB free", needed, free)
            elif free - needed < headroom:
                rejections.reject(host.index, too_tight)
        return rejections.build()


class Score(exports.Score):
    def score(self, request, candidates):
        cx = sandpiper.Context(request, INFO)
        key = cx.params.str("LabelKey")
        wanted = cx.extra_spec(key)
        if wanted is None:
            return sandpiper.scores([0.0] * len(candidates))
        return sandpiper.scores(
            1.0 if host.capability(key) == wanted else 0.0 for host in cx.hosts.candidates(candidates)
        )
