// HeadroomAffinity in JavaScript: the example unit every supported language
// implements identically (see policies/examples/README.md).
//
// * filter: rejects a host that lacks a CPU flag the VM requires, or has
//   fewer NUMA cells than the VM asks for, or whose free memory minus the
//   VM's memory is below `HeadroomMib` (and, with its own reason, a host
//   that cannot hold the VM at all);
// * score: prefers hosts whose capability `LabelKey` equals the VM's extra
//   spec of the same key (1 for a match, else 0; higher is better).
//
// Build: scripts/build-unit.sh js filter-score-unit out.wasm \
//          policies/examples/js/headroom_affinity.js

import {
  Context,
  ParamError,
  Rejections,
  param,
  scores,
  unitInfo,
} from '../../../guest-sdk/js/sandpiper.js';

const INFO = unitInfo(
  'HeadroomAffinityJs',
  'Keeps HeadroomMib of memory free on the chosen host and prefers hosts ' +
    "whose capability LabelKey matches the VM's extra spec LabelKey.",
  {
    params: [
      param(
        'HeadroomMib',
        'Memory (MiB) that must stay free on a host after placing the VM.',
        '512',
        '^[0-9]{1,9}$',
      ),
      param(
        'LabelKey',
        "Host capability compared with the VM's extra spec of the same key.",
        'rack',
        '^[A-Za-z0-9_.:/-]{1,64}$',
      ),
    ],
    scoreOrder: 'higher-is-better',
    // A host's verdict and score read only that host (types.unit-info.per-host).
    perHost: true,
  },
);

export const metadata = {
  info: () => INFO,
};

export const filter = {
  filter(request, candidates) {
    const cx = new Context(request, INFO);
    const rejections = new Rejections();
    let headroom;
    try {
      headroom = cx.params.u32('HeadroomMib');
    } catch (error) {
      if (!(error instanceof ParamError)) throw error;
      // A misconfigured unit fails closed, and says why.
      rejections.rejectAll(candidates, error.message);
      return rejections.build();
    }
    const { hardware } = cx.vm;
    const needed = cx.vm.memoryMib;
    const cellsWanted = hardware.numaCells.length;
    const tooTight = `would leave less than ${headroom} MiB free`;
    for (const host of cx.hosts.candidates(candidates)) {
      const free = host.memoryFreeMib;
      let missing;
      if (hardware.requiredCpuFlags.length > 0) {
        const flags = host.cpuFlags;
        missing = hardware.requiredCpuFlags.find((flag) => !flags.includes(flag));
      }
      const [start, end] = cellsWanted > 0 ? host.cells : [0, 0];
      const cells = end - start;
      if (missing !== undefined) {
        rejections.reject(host.index, `lacks CPU flag ${missing}`);
      } else if (cells < cellsWanted) {
        rejections.rejectWith(host.index, 'has {} NUMA cells, the VM needs {}', cells, cellsWanted);
      } else if (free < needed) {
        rejections.rejectWith(host.index, 'needs {} MiB, {} MiB free', needed, free);
      } else if (free - needed < headroom) {
        rejections.reject(host.index, tooTight);
      }
    }
    return rejections.build();
  },
};

export const score = {
  score(request, candidates) {
    const cx = new Context(request, INFO);
    const key = cx.params.str('LabelKey');
    const wanted = cx.extraSpec(key);
    const values = [];
    for (const host of cx.hosts.candidates(candidates)) {
      values.push(wanted !== undefined && host.capability(key) === wanted ? 1 : 0);
    }
    return scores(values);
  },
};
