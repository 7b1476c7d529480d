// Clusters: the list, and one cluster with its attached policy and its
// held inventory: a utilisation chart per host (memory and CPU in use,
// pending claims shaded) in a table that renders only the rows in view
// and reads the hosts a page at a time (GET .../inventory/hosts).

import * as api from '../api.js';
import { h, mount, mib, num, showError, when } from '../dom.js';
import { virtualTable } from '../vtable.js';
import { picks, pictures } from '../explain.js';

export async function list(view) {
  const error = h('div', { id: 'clusters-error', class: 'error-box', role: 'alert', hidden: true });
  const [clusters, policies] = await Promise.all([api.get('/clusters'), api.get('/schedulingpolicies')]);
  const name = h('input', { id: 'new-cluster-name', required: true, autocomplete: 'off' });
  const policy = h('select', { id: 'new-cluster-policy' },
    policies.map((p) => h('option', { value: p.id, selected: p.default_policy }, p.name)));
  const form = h('form', { class: 'card inline-form', 'aria-labelledby': 'new-cluster-title' },
    h('h2', { id: 'new-cluster-title' }, 'New cluster'),
    h('div', { class: 'form-row' },
      h('div', { class: 'field grow' }, h('label', { for: 'new-cluster-name' }, 'Name'), name),
      h('div', { class: 'field grow' }, h('label', { for: 'new-cluster-policy' }, 'Scheduling policy'), policy),
      h('div', { class: 'field actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create'))),
    error);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showError(error, null);
    try {
      const c = await api.post('/clusters', { name: name.value.trim(), scheduling_policy: { id: policy.value } });
      location.hash = `#/clusters/${c.id}`;
    } catch (e) { showError(error, e); }
  });
  mount(view,
    h('div', { class: 'page-head' }, h('h1', {}, 'Clusters'),
      h('p', { class: 'muted' }, 'Each cluster runs one policy over the inventory its engine reports.')),
    form,
    h('section', { class: 'card' },
      h('table', { id: 'clusters-table', class: 'data' },
        h('caption', { class: 'visually-hidden' }, 'Clusters'),
        h('thead', {}, h('tr', {}, ['Name', 'Policy', 'Balance', 'Created'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, clusters.length ? clusters.map((c) => h('tr', {},
          h('th', { scope: 'row' }, h('a', { href: `#/clusters/${c.id}`, class: 'unit-name' }, c.name), h('span', { class: 'desc' }, c.description || '')),
          h('td', {}, h('a', { href: `#/policies/${c.scheduling_policy.id}` }, c.scheduling_policy.name)),
          h('td', {}, c.balance && c.balance.enabled ? `every ${c.balance.interval_seconds} s` : 'off'),
          h('td', { class: 'when' }, when(c.created_at)),
        )) : h('tr', {}, h('td', { colspan: '4', class: 'muted' }, 'No clusters yet.'))))));
}

/** A bar of used (solid) and pending (hatched) out of a whole, in SVG. */
function bar(used, pending, whole, label) {
  const w = 160;
  const u = whole > 0 ? Math.max(0, Math.min(1, used / whole)) : 0;
  const p = whole > 0 ? Math.max(0, Math.min(1 - u, pending / whole)) : 0;
  const level = u + p > 0.9 ? 'hot' : u + p > 0.7 ? 'warm' : 'cool';
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} 12`);
  svg.setAttribute('width', String(w));
  svg.setAttribute('height', '12');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  svg.setAttribute('class', `ubar ${level}`);
  const rect = (x, width, cls) => {
    const r = document.createElementNS('http://www.w3.org/2000/svg', 'rect');
    r.setAttribute('x', String(x)); r.setAttribute('y', '0');
    r.setAttribute('width', String(Math.max(0, width))); r.setAttribute('height', '12');
    r.setAttribute('rx', '2');
    r.setAttribute('class', cls);
    return r;
  };
  svg.append(rect(0, w, 'track'), rect(0, u * w, 'used'), rect(u * w, p * w, 'pending'));
  return svg;
}

export async function detail(view, { id }) {
  const [cluster, policies] = await Promise.all([api.get(`/clusters/${id}`), api.get('/schedulingpolicies')]);
  const status = h('p', { id: 'cluster-status', class: 'live', role: 'status', 'aria-live': 'polite' },
    `Runs ${cluster.scheduling_policy.name}.`);
  const error = h('div', { id: 'cluster-error', class: 'error-box', role: 'alert', hidden: true });
  const select = h('select', { id: 'cluster-policy' },
    policies.map((p) => h('option', { value: p.id, selected: p.id === cluster.scheduling_policy.id }, p.name)));
  const attach = h('button', { id: 'cluster-attach', type: 'button', class: 'primary' }, 'Attach');
  attach.addEventListener('click', async () => {
    showError(error, null);
    attach.disabled = true;
    try {
      const updated = await api.put(`/clusters/${id}`, { scheduling_policy: { id: select.value } });
      status.textContent = `Runs ${updated.scheduling_policy.name} (attached ${new Date().toLocaleTimeString()}).`;
    } catch (e) {
      showError(error, e);
    } finally {
      attach.disabled = false;
    }
  });

  const summary = h('p', { id: 'hosts-summary', class: 'summary' }, 'Reading the held inventory…');
  const table = virtualTable({
    id: 'hosts-table',
    scrollId: 'hosts-scroll',
    label: `Hosts of ${cluster.name}`,
    empty: 'No hosts held: the engine has not sent an inventory yet (PUT .../inventory).',
    columns: [
      { title: 'Host', className: 'c-host', cell: (r) => [h('span', { class: 'unit-name' }, r.name), r.name !== r.id ? h('span', { class: 'desc' }, r.id) : null] },
      { title: 'Status', className: 'c-status', cell: (r) => h('span', { class: `badge ${r.status === 'up' ? 'ok' : 'off'}` }, r.status) },
      { title: 'VMs', className: 'c-num', cell: (r) => String(r.vms) },
      { title: 'Claims', className: 'c-num', cell: (r) => r.claims ? h('span', { class: 'badge pending' }, String(r.claims)) : '0' },
      { title: 'Memory used (pending shaded)', className: 'c-bar', cell: (r) => [
        bar(r.memory_used_mib, r.memory_pending_mib, r.memory_total_mib,
          `Memory: ${mib(r.memory_used_mib)} used and ${mib(r.memory_pending_mib)} pending of ${mib(r.memory_total_mib)}`),
        h('span', { class: 'bar-text' }, `${mib(r.memory_used_mib)}${r.memory_pending_mib ? ` +${mib(r.memory_pending_mib)}` : ''} / ${mib(r.memory_total_mib)}`)] },
      { title: 'CPU load (pending shaded)', className: 'c-bar', cell: (r) => [
        bar(r.cpu_usage_percent, r.cpu_pending_percent, 100,
          `CPU: ${num(r.cpu_usage_percent)} % used and ${num(r.cpu_pending_percent)} % pending`),
        h('span', { class: 'bar-text' }, `${num(r.cpu_usage_percent)} %${r.cpu_pending_percent ? ` +${num(r.cpu_pending_percent)}` : ''}`)] },
    ],
    fetchPage: async (offset, limit) => {
      const page = await api.get(`/clusters/${id}/inventory/hosts?offset=${offset}&limit=${limit}`);
      return { total: page.total, rows: page.hosts };
    },
  });

  mount(view,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/clusters' }, 'Clusters'), ' / ', cluster.name),
    h('div', { class: 'page-head' }, h('h1', {}, cluster.name),
      cluster.description ? h('p', { class: 'muted' }, cluster.description) : null),
    h('section', { class: 'card', 'aria-labelledby': 'policy-title' },
      h('h2', { id: 'policy-title' }, 'Scheduling policy'),
      h('div', { class: 'form-row' },
        h('div', { class: 'field grow' }, h('label', { for: 'cluster-policy' }, 'Policy'), select),
        h('div', { class: 'field actions' }, attach),
        h('div', { class: 'field actions' }, h('a', { class: 'button ghost', href: `#/decisions?cluster=${id}` }, 'Decisions'))),
      status, error),
    dryRunCard(id, policies, cluster),
    h('section', { class: 'card', 'aria-labelledby': 'hosts-title' },
      h('div', { class: 'card-head' }, h('h2', { id: 'hosts-title' }, 'Held inventory'),
        h('span', { class: 'legend' },
          h('span', { class: 'key used' }), 'in use ', h('span', { class: 'key pending' }, ''), 'pending claims')),
      summary,
      table.element),
  );

  try {
    const inv = await api.get(`/clusters/${id}/inventory`);
    const pending = inv.pending || {};
    summary.textContent = `${inv.hosts} hosts · ${inv.vms} VMs · ${inv.claims} pending claims`
      + (inv.claims ? ` (${mib(pending.memory_mib)}, ${num(pending.vcpus, 0)} vCPUs)` : '')
      + ` · generation ${inv.generation}`;
  } catch (e) {
    summary.textContent = e.code === 'no_inventory' ? 'The engine has not sent an inventory yet.' : `The inventory could not be read: ${e.message}`;
  }
}

/**
 * What if: one VM decided over the held inventory with any policy, as a
 * dry run (POST .../schedule?dry_run=true&policy=ID, docs/what-if.md):
 * nothing is claimed or logged, and the full explain record is drawn.
 */
function dryRunCard(id, policies, cluster) {
  const vm = h('input', { id: 'whatif-vm', value: 'what-if-vm', autocomplete: 'off' });
  const memory = h('input', { id: 'whatif-memory', type: 'number', min: '1', value: '4096' });
  const vcpus = h('input', { id: 'whatif-vcpus', type: 'number', min: '1', value: '2' });
  const policy = h('select', { id: 'whatif-policy' },
    policies.map((p) => h('option', { value: p.id, selected: p.id === cluster.scheduling_policy.id }, p.name)));
  const run = h('button', { type: 'submit', id: 'whatif-run', class: 'primary' }, 'Try');
  const error = h('div', { id: 'whatif-error', class: 'error-box', role: 'alert', hidden: true });
  const status = h('p', { class: 'live', id: 'whatif-status', role: 'status', 'aria-live': 'polite' });
  const out = h('div', { id: 'whatif' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'whatif-title' },
    h('h2', { id: 'whatif-title' }, 'What if?'),
    h('p', { class: 'hint' }, 'Decide one VM over this cluster\u2019s held inventory with any policy, as a dry run: nothing is claimed or logged.'),
    h('div', { class: 'form-row' },
      h('div', { class: 'field' }, h('label', { for: 'whatif-vm' }, 'VM id'), vm),
      h('div', { class: 'field' }, h('label', { for: 'whatif-memory' }, 'Memory, MiB'), memory),
      h('div', { class: 'field' }, h('label', { for: 'whatif-vcpus' }, 'vCPUs'), vcpus),
      h('div', { class: 'field grow' }, h('label', { for: 'whatif-policy' }, 'Policy'), policy),
      h('div', { class: 'field actions' }, run)),
    status, error, out);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showError(error, null);
    run.disabled = true;
    status.textContent = 'Deciding…';
    try {
      const answer = await api.post(`/clusters/${id}/schedule?dry_run=true&policy=${encodeURIComponent(policy.value)}`, {
        vm: { id: vm.value.trim(), memory_mib: Number(memory.value), vcpus: Number(vcpus.value) },
        explain: 'full',
      });
      const name = (policies.find((p) => p.id === answer.policy_id) || {}).name || answer.policy_id;
      status.textContent = answer.chosen_host
        ? `${name} would place ${vm.value.trim()} on ${answer.chosen_host}.`
        : `${name} finds no host: ${answer.reason || 'see the funnel'}.`;
      const pick = picks(answer)[0];
      mount(out, pick ? pictures(pick.explain, 'whatif-') : null);
    } catch (e) {
      status.textContent = '';
      showError(error, e);
    } finally {
      run.disabled = false;
    }
  });
  return form;
}
