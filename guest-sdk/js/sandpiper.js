// Sandpiper's JavaScript helper layer: the Rust SDK's friendly view of a call
// (hosts by index, the VM, typed parameters, rejections grouped by reason)
// over the bindings componentize-js generates from `wit/0.2.0/policy.wit`
// (`sandpiper:policy@0.2.0`).
//
// A unit is an ES module that exports the world's interfaces (`metadata` and
// any of `filter`, `score`, `balance`) and, in each call, wraps the request in
// a `Context`:
//
//   import { Context, Rejections, param, unitInfo } from './sandpiper.js';
//
//   const INFO = unitInfo('Example', 'Says no to hosts that are down.');
//   export const metadata = { info: () => INFO };
//   export const filter = {
//     filter(request, candidates) {
//       const cx = new Context(request, INFO);
//       const rejections = new Rejections();
//       for (const host of cx.hosts.candidates(candidates)) {
//         if (!host.isUp) rejections.reject(host.index, 'not up');
//       }
//       return rejections.build();
//     },
//   };
//
// Columns are fetched from the host the first time a call reads them and kept
// for the rest of the call (the snapshot never changes within a call). WIT
// enums are their case names as strings ('memory-free-mib'), records are
// objects with camelCase fields, `option` none is `undefined`. Every number
// in the contract is an f64 or u32, so nothing here needs BigInt.

import * as inventory from 'sandpiper:policy/inventory@0.2.0';

/** The largest value `Params.u32` accepts, as in the Rust SDK. */
const U32_MAX = 4294967295;

// What the Rust SDK reads as a number or an unsigned integer (Rust's own
// `f64`/`u32` syntax), so a value means the same in every language:
// `Number()` alone would also accept `0x10` and the empty string.
const DECIMAL = /^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
const UNSIGNED = /^\+?[0-9]+$/;

/** Declares a parameter; `pattern` must match the whole value. */
export function param(name, description, defaultValue, pattern) {
  return { name, description, defaultValue, pattern };
}

/** The unit has something to say about every request (the default). */
export function everyRequest() {
  return { tag: 'every-request' };
}

/**
 * The unit has something to say only about requests with at least one of
 * `properties` (`types.request-property` values: `{ tag: 'cpu-flags' }`,
 * `{ tag: 'hint', val: 'same_host' }`): for any other request its filter
 * would reject nothing and its score would give every candidate the same
 * value, so the host skips the call (`types.applies-to`).
 */
export function requestsWith(...properties) {
  if (properties.length === 0) {
    throw new Error('requestsWith needs at least one property (an empty list would mean never)');
  }
  return { tag: 'requests-with', val: properties };
}

/**
 * What the unit says about itself; also where parameter defaults come from
 * when a caller did not fill them in. `scoreOrder` is 'lower-is-better'
 * (costs) or 'higher-is-better' (merits); `appliesTo` is `everyRequest()`
 * unless given; `perHost: true` promises the unit judges each host on its
 * own (`types.unit-info.per-host`), so the host may reuse its answers for
 * hosts that did not change.
 */
export function unitInfo(
  name,
  description,
  { params = [], scoreOrder = 'lower-is-better', appliesTo = everyRequest(), perHost = false } = {},
) {
  return { name, description, params, scoreOrder, appliesTo, perHost };
}

/** A score unit's answer: one finite value per candidate, in order. */
export function scores(values, { floor, ceiling } = {}) {
  return { values: Float64Array.from(values), floor, ceiling };
}

/**
 * A parameter is neither given nor declared, or does not parse as the type
 * asked for. The message reads like the Rust SDK's.
 */
export class ParamError extends Error {
  constructor(name, value, expected) {
    super(
      value === undefined
        ? `parameter \`${name}\` is neither given nor declared`
        : `parameter \`${name}\` is "${value}", not ${expected}`,
    );
    this.name = 'ParamError';
    this.param = name;
  }
}

/**
 * The unit's parameters for one call: the request's value, else the declared
 * default. The host has already checked every value against its pattern, so
 * errors here are the unit's own mistakes.
 */
export class Params {
  constructor(given, info) {
    this.given = new Map();
    for (const { key, value } of given) {
      if (!this.given.has(key)) this.given.set(key, value);
    }
    this.info = info;
  }

  /** The raw value, or undefined when neither given nor declared. */
  get(name) {
    if (this.given.has(name)) return this.given.get(name);
    const spec = this.info.params.find((p) => p.name === name);
    return spec === undefined ? undefined : spec.defaultValue;
  }

  str(name) {
    const value = this.get(name);
    if (value === undefined) throw new ParamError(name);
    return value;
  }

  /** A finite number (NaN and infinities mean nothing as thresholds). */
  f64(name) {
    const value = this.str(name);
    const text = value.trim();
    const number = DECIMAL.test(text) ? Number(text) : NaN;
    if (!Number.isFinite(number)) throw new ParamError(name, value, 'a finite number');
    return number;
  }

  /** An unsigned 32-bit integer, written in decimal digits. */
  u32(name) {
    const value = this.str(name);
    const text = value.trim();
    if (!UNSIGNED.test(text) || Number(text) > U32_MAX) {
      throw new ParamError(name, value, 'an unsigned 32-bit integer');
    }
    return Number(text);
  }

  /** Exactly `true` or `false`. */
  bool(name) {
    const value = this.str(name);
    const word = value.trim();
    if (word !== 'true' && word !== 'false') throw new ParamError(name, value, '`true` or `false`');
    return word === 'true';
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A WIT `strings` table (one UTF-8 text plus byte offsets) read as strings:
 * `table.get(i)`. Each string is decoded the first time it is read and kept,
 * so a column of 10,000 hosts naming four racks decodes four.
 */
export class StringTable {
  constructor({ text, offsets }) {
    this.text = text;
    this.offsets = offsets;
    this.decoded = new Map();
  }

  get length() {
    return Math.max(this.offsets.length - 1, 0);
  }

  get(index) {
    let value = this.decoded.get(index);
    if (value === undefined) {
      if (!(index >= 0 && index < this.length)) return undefined;
      value = UTF8.decode(this.text.subarray(this.offsets[index], this.offsets[index + 1]));
      this.decoded.set(index, value);
    }
    return value;
  }
}

/** An interned column with its strings decoded on first read. */
function interned(column) {
  return { values: new StringTable(column.values), indices: column.indices };
}

/** A key/value column with its strings decoded on first read. */
function labelColumn(column) {
  return { ...column, strings: new StringTable(column.strings) };
}

/** Row `row`'s positions in a compressed-row `offsets` list, as [start, end). */
function rowRange(offsets, row) {
  return row + 1 < offsets.length ? [offsets[row], offsets[row + 1]] : [0, 0];
}

/** Row `row`'s [key, value] pairs of a key/value column. */
function labelsRow(labels, row) {
  const { strings, offsets, keys, values } = labels;
  const pairs = [];
  const [start, end] = rowRange(offsets, row);
  for (let j = start; j < end; j++) {
    pairs.push([strings.get(keys[j]), strings.get(values[j])]);
  }
  return pairs;
}

/** The first value of `key` in row `row`, or undefined. */
function labelsFirst(labels, row, key) {
  const { strings, keys, values } = labels;
  const [start, end] = rowRange(labels.offsets, row);
  for (let j = start; j < end; j++) {
    if (strings.get(keys[j]) === key) return strings.get(values[j]);
  }
  return undefined;
}

/** A per-call cache: `fetch(key)` runs once per key. */
class Columns {
  constructor(fetch) {
    this.fetch = fetch;
    this.columns = new Map();
  }

  get(key) {
    let column = this.columns.get(key);
    if (column === undefined) {
      column = this.fetch(key);
      this.columns.set(key, column);
    }
    return column;
  }
}

/**
 * All hosts of the snapshot, by index. Whole columns for tight loops
 * (`hosts.metric('memory-free-mib')`), or one host at a time through
 * `HostRef`.
 */
export class Hosts {
  constructor() {
    this.count = undefined;
    this.metrics = new Columns(inventory.hostMetrics);
    this.flagColumns = new Columns(inventory.hostFlags);
    this.textColumns = new Columns((text) => interned(inventory.hostTexts(text)));
    this.labelColumns = new Columns((kind) => labelColumn(inventory.hostLabels(kind)));
    this.namedMetrics = new Columns(inventory.hostNamedMetric);
    this.statusColumn = undefined;
    this.cellMetrics = new Columns(inventory.numaCellMetrics);
    this.pcpuFlagColumns = new Columns(inventory.numaPcpuFlags);
    this.hardware = new Columns((part) => HARDWARE[part]());
  }

  get length() {
    if (this.count === undefined) this.count = inventory.hostCount();
    return this.count;
  }

  /** The host at `index`, or undefined when the snapshot has none there. */
  get(index) {
    return index >= 0 && index < this.length ? new HostRef(this, index) : undefined;
  }

  *[Symbol.iterator]() {
    for (let index = 0; index < this.length; index++) yield new HostRef(this, index);
  }

  /** The hosts behind `candidates`, in order; indices outside the snapshot are skipped. */
  *candidates(candidates) {
    const count = this.length;
    for (const index of candidates) {
      if (index < count) yield new HostRef(this, index);
    }
  }

  /** A numeric column, one value per host. */
  metric(metric) {
    return this.metrics.get(metric);
  }

  statuses() {
    if (this.statusColumn === undefined) this.statusColumn = inventory.hostStatuses();
    return this.statusColumn;
  }

  /** A yes/no column as a `Uint8Array`: 1 for yes, 0 for no. */
  flags(flag) {
    return this.flagColumns.get(flag);
  }

  /** An interned string column: `values[indices[host]]`. */
  texts(text) {
    return this.textColumns.get(text);
  }

  /** A key/value column in compressed-row form (see `types.labels`). */
  labels(kind) {
    return this.labelColumns.get(kind);
  }

  /** An engine-defined metric, NaN where a host does not report it. */
  namedMetric(name) {
    return this.namedMetrics.get(name);
  }

  // Hardware (new in 0.2.0): flat columns in compressed rows over the
  // cluster's NUMA cells, their CPUs and the hosts' device pools, as the WIT
  // sends them (`types.numa-topology` and after). Cells, CPUs and pools are
  // numbered across the cluster; `HostRef.cells` and `HostRef.devicePools`
  // give one host's.

  /** Every host's cells: `offsets`, `nodeIds`, `sockets`. */
  numaCells() {
    return this.hardware.get('cells');
  }

  /** A numeric column, one value per cell ('memory-free-mib', 'dedicated-cpus', ...). */
  cellMetric(metric) {
    return this.cellMetrics.get(metric);
  }

  /** Every cell's CPUs: `offsets` (per cell), `cpus`, `cores`. */
  cellCpus() {
    return this.hardware.get('cpus');
  }

  /** A yes/no `Uint8Array` over the entries of `cellCpus()` ('dedicated', 'pinned'). */
  pcpuFlags(flag) {
    return this.pcpuFlagColumns.get(flag);
  }

  /** Pages per cell and size: `offsets`, `sizeKib`, `total`, `free`. */
  cellPages() {
    return this.hardware.get('pages');
  }

  /** Each cell's distances to the cells of its host. */
  cellDistances() {
    return this.hardware.get('distances');
  }

  /** Every host's PCI device pools, `strings` as a `StringTable`. */
  devicePools() {
    return this.hardware.get('pools');
  }

  /** Each pool's tags, a key/value column with one row per pool. */
  devicePoolLabels() {
    return this.hardware.get('poolLabels');
  }

  /** Every host's mediated device types, `strings` as a `StringTable`. */
  mdevOffers() {
    return this.hardware.get('mdevs');
  }
}

/** How each hardware part is fetched (and its strings wrapped). */
const HARDWARE = {
  cells: () => inventory.numaCells(),
  cpus: () => inventory.numaCellCpus(),
  pages: () => inventory.numaCellPages(),
  distances: () => inventory.numaCellDistances(),
  pools: () => {
    const pools = inventory.devicePools();
    return { ...pools, strings: new StringTable(pools.strings) };
  },
  poolLabels: () => labelColumn(inventory.devicePoolLabels()),
  mdevs: () => {
    const offers = inventory.mdevTypes();
    return { ...offers, strings: new StringTable(offers.strings) };
  },
};

/** Turns 'memory-free-mib' into 'memoryFreeMib'. */
function camelCase(witName) {
  return witName.replace(/-([a-z])/g, (_, letter) => letter.toUpperCase());
}

/** The numeric host columns, in WIT order (`types.host-metric`). */
const HOST_METRICS = [
  'cpu-sockets', 'cpu-cores', 'cpu-threads', 'cpu-usage-percent', 'cpu-pending-percent',
  'cpu-overloaded-minutes', 'vcpus-used', 'vcpus-pending', 'memory-total-mib', 'memory-free-mib',
  'memory-pending-mib', 'memory-committed-mib', 'memory-reserved-mib', 'swap-total-mib',
  'swap-free-mib', 'vm-count', 'vm-pending-count', 'disk-total-gib', 'disk-free-gib', 'io-ops',
  'build-failures', 'ha-score', 'hypervisor-version', 'tsc-frequency-hz',
];

/**
 * One host. Each getter reads the host's row of a column the call fetches
 * once. Every numeric column is a getter named after its metric in camelCase:
 * `host.memoryFreeMib`, `host.cpuUsagePercent`, ...
 */
export class HostRef {
  constructor(hosts, index) {
    this.hosts = hosts;
    this.index = index;
  }

  metric(metric) {
    return this.hosts.metric(metric)[this.index];
  }

  get status() {
    return this.hosts.statuses()[this.index];
  }

  get isUp() {
    return this.status === 'up';
  }

  flag(flag) {
    return this.hosts.flags(flag)[this.index] !== 0;
  }

  get isSpm() {
    return this.flag('spm');
  }

  text(text) {
    const column = this.hosts.texts(text);
    return column.values.get(column.indices[this.index]);
  }

  get id() {
    return this.text('id');
  }

  get name() {
    return this.text('name');
  }

  get address() {
    return this.text('address');
  }

  get zone() {
    return this.text('zone');
  }

  /** This host's [key, value] pairs of a key/value column. */
  labels(kind) {
    return labelsRow(this.hosts.labels(kind), this.index);
  }

  get networks() {
    return this.labels('networks').map(([name]) => name);
  }

  hasNetwork(network) {
    return this.networks.includes(network);
  }

  /** The host's capability `key` (its first value if it repeats), or undefined. */
  capability(key) {
    return labelsFirst(this.hosts.labels('capabilities'), this.index, key);
  }

  get capabilities() {
    return this.labels('capabilities');
  }

  get aggregates() {
    return this.labels('aggregates').map(([name]) => name);
  }

  /** Every value the host's aggregates set for `key`. */
  aggregateMetadata(key) {
    return this.labels('aggregate-metadata').filter(([k]) => k === key).map(([, v]) => v);
  }

  /** An engine-defined metric, undefined when the host does not report it. */
  namedMetric(name) {
    const value = this.hosts.namedMetric(name)[this.index];
    return Number.isNaN(value) ? undefined : value;
  }

  get cpuModel() {
    return this.text('cpu-model');
  }

  /** The host CPU's feature flags. */
  get cpuFlags() {
    return this.labels('cpu-flags').map(([name]) => name);
  }

  hasCpuFlag(flag) {
    return this.cpuFlags.includes(flag);
  }

  /** This host's NUMA cells as cluster-wide indices, [start, end). */
  get cells() {
    return rowRange(this.hosts.numaCells().offsets, this.index);
  }

  /** This host's PCI device pools as cluster-wide indices, [start, end). */
  get devicePools() {
    return rowRange(this.hosts.devicePools().offsets, this.index);
  }

  /** This host's entries of `mdevOffers()`, [start, end). */
  get mdevOffers() {
    return rowRange(this.hosts.mdevOffers().offsets, this.index);
  }
}

// One getter per numeric column (the Rust SDK's `metric_accessors!`),
// generated from the WIT case names so none can be missed.
for (const metric of HOST_METRICS) {
  Object.defineProperty(HostRef.prototype, camelCase(metric), {
    get() {
      return this.hosts.metric(metric)[this.index];
    },
  });
}

/** The VMs already running (or pending) in the cluster, by index. */
export class Vms {
  constructor() {
    this.count = undefined;
    this.hostColumn = undefined;
    this.metrics = new Columns(inventory.vmMetrics);
    this.flagColumns = new Columns(inventory.vmFlags);
    this.textColumns = new Columns((text) => interned(inventory.vmTexts(text)));
  }

  get length() {
    if (this.count === undefined) this.count = inventory.vmCount();
    return this.count;
  }

  get(index) {
    return index >= 0 && index < this.length ? new VmRef(this, index) : undefined;
  }

  *[Symbol.iterator]() {
    for (let index = 0; index < this.length; index++) yield new VmRef(this, index);
  }

  /** Host index of every VM. */
  hosts() {
    if (this.hostColumn === undefined) this.hostColumn = inventory.vmHosts();
    return this.hostColumn;
  }

  /** The VMs placed on `host`, in index order. */
  onHost(host) {
    const placed = [];
    const hosts = this.hosts();
    for (let index = 0; index < hosts.length; index++) {
      if (hosts[index] === host) placed.push(new VmRef(this, index));
    }
    return placed;
  }

  metric(metric) {
    return this.metrics.get(metric);
  }

  /** A yes/no column as a `Uint8Array`: 1 for yes, 0 for no. */
  flags(flag) {
    return this.flagColumns.get(flag);
  }

  texts(text) {
    return this.textColumns.get(text);
  }
}

/** One running VM. */
export class VmRef {
  constructor(vms, index) {
    this.vms = vms;
    this.index = index;
  }

  get host() {
    return this.vms.hosts()[this.index];
  }

  metric(metric) {
    return this.vms.metric(metric)[this.index];
  }

  get memoryMib() {
    return this.metric('memory-mib');
  }

  get memoryGuaranteedMib() {
    return this.metric('memory-guaranteed-mib');
  }

  get vcpus() {
    return this.metric('vcpus');
  }

  get cpuUsagePercent() {
    return this.metric('cpu-usage-percent');
  }

  flag(flag) {
    return this.vms.flags(flag)[this.index] !== 0;
  }

  get isMigratable() {
    return this.flag('migratable');
  }

  get isPending() {
    return this.flag('pending');
  }

  text(text) {
    const column = this.vms.texts(text);
    return column.values.get(column.indices[this.index]);
  }

  get id() {
    return this.text('id');
  }

  get name() {
    return this.text('name');
  }
}

/**
 * Everything one filter or score call can read: the VM being placed
 * (`cx.vm`, the generated record; `cx.vm.hardware` is what it needs of the
 * hosts' hardware), the unit's parameters, the request's
 * hints, the hosts and the running VMs.
 */
export class Context {
  constructor(request, info) {
    this.request = request;
    this.vm = request.vm;
    this.params = new Params(request.params, info);
    this.hosts = new Hosts();
    this.vms = new Vms();
  }

  /** The request's hints called `key` (a list-valued hint repeats). */
  hints(key) {
    return this.request.hints.filter((pair) => pair.key === key).map((pair) => pair.value);
  }

  /** The VM's extra spec `key` (its first value), or undefined. */
  extraSpec(key) {
    const pair = this.vm.extraSpecs.find((p) => p.key === key);
    return pair === undefined ? undefined : pair.value;
  }
}

/**
 * A filter's answer: rejected hosts grouped by reason, reasons in the order
 * they first appeared. A host already rejected keeps its first reason. A
 * reason whose figures vary by host is best sent as a template and figures
 * (`rejectWith`): the host writes the sentences only when someone reads them.
 */
export class Rejections {
  constructor() {
    // One map per kind: the same text is a plain sentence without figures
    // and a template with them. Each group is { order, reason, hosts, figures }.
    this.plain = new Map();
    this.templates = new Map();
    this.count = 0;
    this.rejected = new Set();
  }

  add(host, groups, reason, figures) {
    if (this.rejected.has(host)) return false;
    this.rejected.add(host);
    let group = groups.get(reason);
    if (group === undefined) {
      group = { order: this.count++, reason, hosts: [], figures: [] };
      groups.set(reason, group);
    }
    group.hosts.push(host);
    for (const figure of figures) group.figures.push(figure);
    return true;
  }

  /** Rejects `host` for `reason`; false when it was already rejected. */
  reject(host, reason) {
    return this.add(host, this.plain, reason, []);
  }

  /**
   * Rejects `host` for `template` with its own `figures`, one per `{}` of
   * the template (a doubled brace is a brace); false when it was already
   * rejected.
   */
  rejectWith(host, template, ...figures) {
    return this.add(host, this.templates, template, figures);
  }

  rejectAll(hosts, reason) {
    for (const host of hosts) this.reject(host, reason);
  }

  isRejected(host) {
    return this.rejected.has(host);
  }

  get length() {
    return this.rejected.size;
  }

  /** The groups, ready to return from `filter.filter`. */
  build() {
    return [...this.plain.values(), ...this.templates.values()]
      .sort((a, b) => a.order - b.order)
      .map(({ reason, hosts, figures }) => ({
        reason,
        hosts: Uint32Array.from(hosts),
        figures: Float64Array.from(figures),
      }));
  }
}
