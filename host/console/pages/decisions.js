// Decisions: the log (newest first, filtered by cluster, VM and time, read
// a page at a time), and one decision's explain record as pictures.

import * as api from '../api.js';
import { h, mount, when, showError } from '../dom.js';
import { picks, pictures } from '../explain.js';

const PAGE = 25;

export async function list(view, _params, { query }) {
  const clusters = await api.get('/clusters');
  const names = new Map(clusters.map((c) => [c.id, c.name]));
  const cluster = h('select', { id: 'filter-cluster' },
    h('option', { value: '' }, 'All clusters'),
    clusters.map((c) => h('option', { value: c.id, selected: query.get('cluster') === c.id }, c.name)));
  const vm = h('input', { id: 'filter-vm', value: query.get('vm') || '', autocomplete: 'off', placeholder: 'VM id' });
  const since = h('input', { id: 'filter-since', type: 'datetime-local', value: query.get('since') || '' });
  const until = h('input', { id: 'filter-until', type: 'datetime-local', value: query.get('until') || '' });
  const error = h('div', { id: 'decisions-error', class: 'error-box', role: 'alert', hidden: true });
  const form = h('form', { class: 'card filters', role: 'search', 'aria-label': 'Filter decisions' },
    h('div', { class: 'form-row' },
      h('div', { class: 'field' }, h('label', { for: 'filter-cluster' }, 'Cluster'), cluster),
      h('div', { class: 'field' }, h('label', { for: 'filter-vm' }, 'VM'), vm),
      h('div', { class: 'field' }, h('label', { for: 'filter-since' }, 'Since'), since),
      h('div', { class: 'field' }, h('label', { for: 'filter-until' }, 'Until'), until),
      h('div', { class: 'field actions' }, h('button', { type: 'submit', id: 'decisions-filter', class: 'primary' }, 'Apply'))),
    error);
  const tbody = h('tbody');
  const more = h('button', { type: 'button', id: 'decisions-older', class: 'ghost', hidden: true }, 'Older decisions');
  const status = h('p', { class: 'live', role: 'status', 'aria-live': 'polite' });
  mount(view,
    h('div', { class: 'page-head' }, h('h1', {}, 'Decisions'),
      h('p', { class: 'muted' }, 'Every schedule and balance decision, with the claims it made. Open one to see why its host won.')),
    form,
    h('section', { class: 'card' },
      h('table', { id: 'decisions-table', class: 'data' },
        h('caption', { class: 'visually-hidden' }, 'Decisions, newest first'),
        h('thead', {}, h('tr', {}, ['Time', 'Cluster', 'Kind', 'VM', 'Host', 'Outcome', ''].map((t) => h('th', { scope: 'col' }, t)))),
        tbody),
      h('div', { class: 'pager' }, more, status)));

  const iso = (local) => (local ? new Date(local).toISOString() : null);
  // The next page starts after the last decision shown (the API's keyset
  // cursor), so decisions logged in the same millisecond are all listed.
  let after = null;
  async function load(append) {
    showError(error, null);
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (cluster.value) q.set('cluster_id', cluster.value);
    if (vm.value.trim()) q.set('vm_id', vm.value.trim());
    if (since.value) q.set('since', iso(since.value));
    if (until.value) q.set('until', iso(until.value));
    if (after) q.set('after', after);
    let page;
    try {
      page = await api.get(`/decisions?${q}`);
    } catch (e) { showError(error, e); return; }
    const rows = page.decisions.map((d) => {
      const a = d.answer || {};
      const degraded = (a.degraded || []).length;
      const outcome = d.kind === 'balance'
        ? (a.vm_to_migrate || a.vm ? 'move proposed' : 'nothing to move')
        : (d.host_id ? 'placed' : (a.reason || 'no host'));
      return h('tr', {},
        h('td', { class: 'when' }, when(d.created_at)),
        h('td', {}, h('a', { href: `#/clusters/${d.cluster_id}` }, names.get(d.cluster_id) || d.cluster_id.slice(0, 8))),
        h('td', {}, h('span', { class: `chip ${d.kind === 'balance' ? 'balance' : 'filter'}` }, d.kind)),
        h('td', {}, d.vm_id ? h('code', {}, d.vm_id) : h('span', { class: 'muted' }, '—')),
        h('td', {}, d.host_id ? h('code', {}, d.host_id) : h('span', { class: 'muted' }, '—')),
        h('td', {}, outcome, degraded ? h('span', { class: 'badge off' }, `degraded ×${degraded}`) : null),
        h('td', {}, h('a', { href: `#/decisions/${d.cluster_id}/${d.id}`, class: 'button ghost small', dataset: { decision: d.id } }, 'Explain')));
    });
    if (append) tbody.append(...rows); else mount(tbody, rows.length ? rows : h('tr', {}, h('td', { colspan: '7', class: 'muted' }, 'No decisions match.')));
    const last = page.decisions[page.decisions.length - 1];
    after = last ? last.id : after;
    more.hidden = page.decisions.length < PAGE;
    status.textContent = `${tbody.querySelectorAll('tr').length} decisions shown.`;
  }
  form.addEventListener('submit', (e) => { e.preventDefault(); after = null; load(false); });
  more.addEventListener('click', () => load(true));
  await load(false);
}

export async function detail(view, { cluster, id }) {
  const entry = await api.get(`/clusters/${cluster}/decisions/${id}`);
  let answer = entry.answer;
  if (entry.full_answer) {
    try { answer = await api.get(entry.full_answer.replace(/^\/api\/v1/, '')); } catch { /* keep the summary */ }
  }
  const [clusterInfo, policies] = await Promise.all([
    api.get(`/clusters/${cluster}`).catch(() => null),
    api.get('/schedulingpolicies').catch(() => []),
  ]);
  const policy = policies.find((p) => p.id === answer.policy_id);
  const instances = picks(answer);
  const picture = h('div', { id: 'explain' });
  const degraded = answer.degraded || [];

  const facts = h('dl', { class: 'facts' },
    h('dt', {}, 'Kind'), h('dd', {}, entry.kind),
    h('dt', {}, 'Cluster'), h('dd', {}, clusterInfo ? h('a', { href: `#/clusters/${cluster}` }, clusterInfo.name) : cluster),
    h('dt', {}, 'Policy'), h('dd', {}, policy ? h('a', { href: `#/policies/${policy.id}` }, policy.name) : (answer.policy_id || '—')),
    h('dt', {}, 'VM'), h('dd', {}, entry.vm_id || '—'),
    h('dt', {}, 'Chosen host'), h('dd', {}, entry.host_id || answer.chosen_host || 'none'),
    h('dt', {}, 'Decided'), h('dd', {}, when(entry.created_at)),
    h('dt', {}, 'Hosts from'), h('dd', {}, answer.explain ? 'the request (inline)' : 'the held inventory'));

  mount(view,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/decisions' }, 'Decisions'), ' / ', id.slice(0, 8)),
    h('div', { class: 'page-head' }, h('h1', {}, entry.vm_id ? `Decision for ${entry.vm_id}` : `${entry.kind} decision`)),
    h('section', { class: 'card' }, facts,
      degraded.length ? h('p', { class: 'notice' }, `Degraded: ${degraded.map((d) => `${d.unit} (${d.role}, ${d.kind})`).join(', ')} left out.`) : null,
      answer.reason ? h('p', { class: 'notice' }, answer.reason) : null),
    entry.kind === 'schedule' && !answer.explain ? replayCard(cluster, id, policies, clusterInfo) : null,
    picture,
    h('details', { class: 'card raw' }, h('summary', {}, 'The answer as JSON'), h('pre', {}, JSON.stringify(answer, null, 2))));

  if (!instances.length) {
    mount(picture, h('p', { class: 'card muted' }, 'This decision has no explain record to draw (a balance decision, or one whose answer was summarized away).'));
    return;
  }
  function show(i) {
    mount(picture, instances.length > 1 ? chooser(i) : null, pictures(instances[i].explain));
  }
  function chooser(current) {
    const select = h('select', { id: 'instance' }, instances.map((x, i) =>
      h('option', { value: String(i), selected: i === current }, `${x.vm_id} → ${x.host || 'no host'}`)));
    select.addEventListener('change', () => show(Number(select.value)));
    return h('div', { class: 'card field' }, h('label', { for: 'instance' }, 'Instance'), select);
  }
  show(0);
}

/**
 * What if: the same request decided again, now, as a dry run (another
 * policy or the cluster's own), drawn beside the original
 * (POST .../decisions/{id}/replay, docs/what-if.md).
 */
function replayCard(cluster, id, policies, clusterInfo) {
  const select = h('select', { id: 'replay-policy' },
    h('option', { value: '' }, `The cluster's policy${clusterInfo ? ` (${clusterInfo.scheduling_policy.name})` : ''}`),
    policies.map((p) => h('option', { value: p.id }, p.name)));
  const run = h('button', { type: 'button', id: 'replay-run', class: 'primary' }, 'Replay');
  const error = h('div', { id: 'replay-error', class: 'error-box', role: 'alert', hidden: true });
  const status = h('p', { class: 'live', role: 'status', 'aria-live': 'polite' });
  const out = h('div', { id: 'replay' });
  run.addEventListener('click', async () => {
    showError(error, null);
    run.disabled = true;
    status.textContent = 'Deciding again…';
    try {
      const q = select.value ? `?policy=${encodeURIComponent(select.value)}` : '';
      const both = await api.post(`/clusters/${cluster}/decisions/${id}/replay${q}`);
      const name = (pid) => (policies.find((p) => p.id === pid) || {}).name || pid;
      const before = picks(both.original.answer)[0];
      const after = picks(both.replay)[0];
      status.textContent = `Replayed with ${name(both.replay.policy_id)}: ${both.replay.chosen_host || 'no host'} (was ${both.original.answer.chosen_host || 'no host'}).`;
      mount(out, h('div', { class: 'side-by-side' },
        h('div', { class: 'side' },
          h('h3', {}, `Original — ${name(both.original.answer.policy_id)} → ${both.original.answer.chosen_host || 'no host'}`),
          before ? pictures(before.explain, 'original-') : h('p', { class: 'muted' }, 'No explain record kept.')),
        h('div', { class: 'side' },
          h('h3', {}, `Replay now — ${name(both.replay.policy_id)} → ${both.replay.chosen_host || 'no host'}`),
          after ? pictures(after.explain, 'replay-') : h('p', { class: 'muted' }, 'No explain record.'))));
    } catch (e) {
      status.textContent = '';
      showError(error, e);
    } finally {
      run.disabled = false;
    }
  });
  return h('section', { class: 'card', 'aria-labelledby': 'whatif-title' },
    h('h2', { id: 'whatif-title' }, 'What if?'),
    h('p', { class: 'hint' }, 'Decide this request again now, over the inventory held now, as a dry run: nothing is claimed or logged. The original is shown beside it.'),
    h('div', { class: 'form-row' },
      h('div', { class: 'field grow' }, h('label', { for: 'replay-policy' }, 'Policy'), select),
      h('div', { class: 'field actions' }, run)),
    status, error, out);
}
