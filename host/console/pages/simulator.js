// Simulator: what a policy would do to a cluster before it goes live
// (POST /api/v1/simulations, docs/simulator.md). A generated workload of
// arrivals and departures is replayed against each chosen policy on a copy
// of a cluster's held inventory, with claims and the same units; the report
// is drawn here from its JSON (the same report `sandpiper simulate -o json`
// prints): a table per policy, the spread of memory and CPU utilisation
// over hosts through time, hosts left empty, and placements per host.

import * as api from '../api.js';
import { h, s, mount, num, showError } from '../dom.js';

/** Colours of up to eight policies, in the order chosen. */
const COLOURS = ['#1f6fb2', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];

/** The size mix the generator draws from, as people write it: MiB×vCPUs:weight. */
const DEFAULT_SIZES = '2048x1:4, 4096x2:3, 8192x4:2, 16384x8:1';

export async function page(view) {
  const [clusters, policies] = await Promise.all([api.get('/clusters'), api.get('/schedulingpolicies')]);
  const error = h('div', { id: 'sim-error', class: 'error-box', role: 'alert', hidden: true });
  const status = h('p', { id: 'sim-status', class: 'live', role: 'status', 'aria-live': 'polite' });
  const report = h('div', { id: 'sim-report' });

  const cluster = h('select', { id: 'sim-cluster', required: true },
    clusters.map((c) => h('option', { value: c.id }, c.name)));
  const field = (id, label, attrs, hint) => h('div', { class: 'field' },
    h('label', { for: id }, label), h('input', { id, ...attrs }),
    hint ? h('p', { class: 'hint muted' }, hint) : null);
  const seed = field('sim-seed', 'Seed', { type: 'number', min: '0', step: '1', value: '7', required: true });
  const arrivals = field('sim-arrivals', 'VMs arriving', { type: 'number', min: '1', max: '5000', step: '1', value: '300', required: true });
  const rate = field('sim-rate', 'Arrivals per hour', { type: 'number', min: '0.01', step: 'any', value: '120', required: true });
  const lifetime = field('sim-lifetime', 'Mean lifetime, hours', { type: 'number', min: '0.01', step: 'any', value: '4', required: true });
  const balance = field('sim-balance', 'Balance every, minutes', { type: 'number', min: '0', step: '1', value: '5', required: true }, '0: never');
  const sizes = field('sim-sizes', 'Size mix', { type: 'text', value: DEFAULT_SIZES, required: true, class: 'wide' },
    'MiB×vCPUs:weight, comma separated');
  const choices = h('fieldset', { class: 'choices', id: 'sim-policies' },
    h('legend', {}, 'Policies to compare (1 to 8)'),
    policies.map((p, i) => h('label', { class: 'choice' },
      h('input', { type: 'checkbox', value: p.id, dataset: { name: p.name }, checked: ['evenly_distributed', 'power_saving'].includes(p.name) || (i === 0 && policies.length === 1) }),
      ' ', p.name)));
  const run = h('button', { type: 'submit', class: 'primary', id: 'sim-run' }, 'Run simulation');
  const form = h('form', { class: 'card', 'aria-labelledby': 'sim-form-title' },
    h('h2', { id: 'sim-form-title' }, 'Workload'),
    h('div', { class: 'form-row' },
      h('div', { class: 'field grow' }, h('label', { for: 'sim-cluster' }, 'Cluster (a copy of its held inventory)'), cluster),
      seed, arrivals, rate, lifetime, balance),
    h('div', { class: 'form-row' }, h('div', { class: 'field grow2' }, sizes)),
    choices,
    h('div', { class: 'form-row' }, h('div', { class: 'field actions' }, run), status),
    error);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showError(error, null);
    const value = (f) => f.querySelector('input').value;
    const chosen = [...choices.querySelectorAll('input:checked')].map((c) => c.value);
    let mix;
    try { mix = parseSizes(value(sizes)); } catch (e) { showError(error, e); return; }
    const body = {
      cluster_id: cluster.value,
      policies: chosen,
      balance_every_s: Math.round(Number(value(balance)) * 60),
      trace: { generate: {
        seed: Number(value(seed)),
        arrivals: Number(value(arrivals)),
        arrivals_per_hour: Number(value(rate)),
        mean_lifetime_s: Number(value(lifetime)) * 3600,
        sizes: mix,
      } },
    };
    run.disabled = true;
    status.textContent = 'Simulating…';
    mount(report);
    try {
      const result = await api.post('/simulations', body);
      status.textContent = `Simulated ${result.trace.events} events on ${result.hosts} hosts.`;
      draw(report, result);
    } catch (e) {
      status.textContent = '';
      showError(error, e);
    } finally {
      run.disabled = false;
    }
  });

  mount(view,
    h('div', { class: 'page-head' }, h('h1', {}, 'Simulator'),
      h('p', { class: 'muted' }, 'Replays a generated workload against each policy on a copy of a cluster, with claims and the same units, and shows what each would do. Nothing in the cluster changes.')),
    clusters.length ? form : h('section', { class: 'card' }, h('p', { class: 'muted' }, 'No cluster yet: create one and push its inventory first.')),
    report);
}

/** "2048x1:4, 4096x2" into the generator's sizes. */
function parseSizes(text) {
  return text.split(',').map((part) => part.trim()).filter(Boolean).map((part) => {
    const m = /^(\d+(?:\.\d+)?)\s*[x×]\s*(\d+)(?:\s*:\s*(\d+(?:\.\d+)?))?$/.exec(part);
    if (!m) throw new Error(`size mix: \`${part}\` is not MiB×vCPUs:weight (for example 4096x2:3)`);
    return { memory_mib: Number(m[1]), vcpus: Number(m[2]), weight: m[3] ? Number(m[3]) : 1 };
  });
}

/** The report: a table per policy, then the charts. */
function draw(el, result) {
  const rows = result.policies.map((p, i) => {
    const f = p.final;
    return h('tr', { dataset: { policy: p.policy } },
      h('th', { scope: 'row' }, h('span', { class: 'swatch-inline', style: { background: COLOURS[i % COLOURS.length] } }), ' ', p.policy),
      h('td', { class: 'num' }, String(p.placed)),
      h('td', { class: 'num' }, String(p.refused)),
      h('td', { class: 'num' }, String(p.migrations)),
      h('td', { class: 'num' }, triple(f.memory)),
      h('td', { class: 'num' }, triple(f.cpu)),
      h('td', { class: 'num empty-hosts' }, `${f.empty_hosts} / ${result.hosts}`));
  });
  const refusals = result.policies.filter((p) => p.refusals.length);
  mount(el,
    h('section', { class: 'card', 'aria-labelledby': 'sim-result-title' },
      h('h2', { id: 'sim-result-title' }, 'Result'),
      h('p', { class: 'muted' }, `${result.trace.events} events over ${num(result.trace.duration_s / 3600, 1)} h of trace time`,
        result.trace.seed !== null && result.trace.seed !== undefined ? ` (seed ${result.trace.seed})` : '',
        `, ${result.hosts} hosts. Figures at the end of the trace; utilisation as fractions 0–1, mean / stddev / max over hosts.`),
      h('table', { class: 'data', id: 'sim-table' },
        h('thead', {}, h('tr', {}, ['Policy', 'Placed', 'Refused', 'Migrations', 'Memory', 'CPU', 'Empty hosts']
          .map((t, i) => h('th', { scope: 'col', class: i ? 'num' : null }, t)))),
        h('tbody', {}, rows)),
      refusals.length ? h('div', {}, h('h3', {}, 'Why VMs were refused'),
        h('ul', {}, refusals.map((p) => h('li', {}, h('strong', {}, p.policy), ': ',
          p.refusals.map((r) => `${r.reason} (${r.count})`).join('; '))))) : null),
    h('section', { class: 'card' }, h('h2', {}, 'Memory utilisation spread over hosts'),
      lineChart(result, (x) => x.memory.stddev, 'stddev of memory used', 'sim-memory-chart')),
    h('section', { class: 'card' }, h('h2', {}, 'CPU utilisation spread over hosts'),
      lineChart(result, (x) => x.cpu.stddev, 'stddev of CPU used', 'sim-cpu-chart')),
    h('section', { class: 'card' }, h('h2', {}, 'Hosts left empty (could be powered off)'),
      lineChart(result, (x) => x.empty_hosts, 'empty hosts', 'sim-empty-chart')),
    h('section', { class: 'card' }, h('h2', {}, 'Placements per host'),
      barChart(result, 'sim-hosts-chart')));
}

function triple(u) {
  return `${u.mean.toFixed(3)} / ${u.stddev.toFixed(3)} / ${u.max.toFixed(3)}`;
}

const W = 760;
const H = 220;
const PAD = { left: 48, right: 150, top: 10, bottom: 32 };

/** One line per policy of `pick(sample)` over trace time. */
function lineChart(result, pick, what, id) {
  const series = result.policies.map((p) => p.samples.map((x) => [x.at_s, pick(x)]));
  const xs = series.flat().map(([x]) => x);
  const ys = series.flat().map(([, y]) => y);
  const xmax = Math.max(1, ...xs);
  const ymax = Math.max(1e-9, ...ys) * 1.05;
  const x = (v) => PAD.left + (v / xmax) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / ymax) * (H - PAD.top - PAD.bottom);
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((t) => t * ymax);
  return s('svg', { class: 'chart', id, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `${what} over trace time, per policy` },
    s('title', {}, `${what} over trace time, per policy`),
    ticks.map((t) => s('g', {},
      s('line', { x1: PAD.left, x2: W - PAD.right, y1: y(t), y2: y(t), class: 'grid' }),
      s('text', { x: PAD.left - 6, y: y(t) + 4, 'text-anchor': 'end', class: 'figure' }, fmt(t)))),
    s('line', { x1: PAD.left, x2: W - PAD.right, y1: y(0), y2: y(0), class: 'axis' }),
    s('text', { x: (PAD.left + W - PAD.right) / 2, y: H - 6, 'text-anchor': 'middle', class: 'figure' },
      `trace time (0 to ${num(xmax / 3600, 1)} h)`),
    series.map((points, i) => s('polyline', {
      points: points.map(([a, b]) => `${x(a).toFixed(1)},${y(b).toFixed(1)}`).join(' '),
      fill: 'none', stroke: COLOURS[i % COLOURS.length], 'stroke-width': 2,
    })),
    legend(result));
}

/** Placements per host, grouped by policy: the hosts most placed on first. */
function barChart(result, id) {
  const totals = new Map();
  for (const p of result.policies) {
    for (const e of p.placements_per_host) totals.set(e.host_id, (totals.get(e.host_id) || 0) + e.placements);
  }
  const hosts = [...totals.keys()].sort((a, b) => totals.get(b) - totals.get(a) || a.localeCompare(b)).slice(0, 30);
  const counts = result.policies.map((p) => new Map(p.placements_per_host.map((e) => [e.host_id, e.placements])));
  const ymax = Math.max(1, ...counts.flatMap((c) => hosts.map((host) => c.get(host) || 0)));
  const band = (W - PAD.left - PAD.right) / Math.max(1, hosts.length);
  const bw = Math.max(1, (band * 0.8) / counts.length);
  const y = (v) => H - PAD.bottom - (v / ymax) * (H - PAD.top - PAD.bottom);
  return s('svg', { class: 'chart', id, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'VMs placed per host, per policy' },
    s('title', {}, `VMs placed per host, per policy${totals.size > hosts.length ? ` (the ${hosts.length} hosts placed on most)` : ''}`),
    s('line', { x1: PAD.left, x2: W - PAD.right, y1: y(0), y2: y(0), class: 'axis' }),
    s('text', { x: PAD.left - 6, y: y(ymax) + 4, 'text-anchor': 'end', class: 'figure' }, String(ymax)),
    hosts.map((host, j) => s('g', {},
      counts.map((c, i) => {
        const v = c.get(host) || 0;
        return s('rect', { x: PAD.left + j * band + band * 0.1 + i * bw, y: y(v), width: bw, height: y(0) - y(v), fill: COLOURS[i % COLOURS.length] },
          s('title', {}, `${host}: ${v} (${result.policies[i].policy})`));
      }),
      hosts.length <= 30 ? s('text', { x: PAD.left + (j + 0.5) * band, y: H - PAD.bottom + 14, 'text-anchor': 'middle', class: 'colsub' }, host.length > 8 ? `${host.slice(0, 7)}…` : host) : null)),
    legend(result));
}

function legend(result) {
  return s('g', {}, result.policies.map((p, i) => s('g', {},
    s('rect', { x: W - PAD.right + 12, y: PAD.top + i * 18, width: 14, height: 10, fill: COLOURS[i % COLOURS.length] }),
    s('text', { x: W - PAD.right + 32, y: PAD.top + i * 18 + 9 }, p.policy))));
}

function fmt(v) {
  return v >= 10 ? String(Math.round(v)) : v.toFixed(v >= 1 ? 1 : 2);
}
