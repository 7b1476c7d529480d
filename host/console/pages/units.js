// Units: every policy unit with its kind and size, an upload with progress
// and the server's validation errors, and each unit's versions.

import * as api from '../api.js';
import { h, mount, bytes, when, kinds, showError } from '../dom.js';

export async function list(view) {
  const status = h('p', { id: 'upload-status', class: 'live', role: 'status', 'aria-live': 'polite' });
  const error = h('div', { id: 'upload-error', class: 'error-box', role: 'alert', hidden: true });
  const progress = h('progress', { id: 'upload-progress', max: '100', value: '0', hidden: true, 'aria-label': 'Upload progress' });
  const name = h('input', { id: 'unit-name', name: 'name', required: true, autocomplete: 'off', placeholder: 'e.g. HeadroomAffinity' });
  const description = h('input', { id: 'unit-description', name: 'description', autocomplete: 'off', placeholder: 'optional' });
  const file = h('input', { id: 'unit-file', name: 'file', type: 'file', accept: '.wasm,application/wasm', required: true });
  const submit = h('button', { id: 'unit-upload', type: 'submit', class: 'primary' }, 'Upload');
  const form = h('form', { class: 'card upload', id: 'upload-form', 'aria-labelledby': 'upload-title' },
    h('h2', { id: 'upload-title' }, 'Upload a unit'),
    h('p', { class: 'hint' }, 'A WebAssembly component built against wit/policy.wit. The server validates and compiles it in a sandboxed child process before storing anything; uploading new bytes under an existing name makes a new version.'),
    h('div', { class: 'form-row' },
      h('div', { class: 'field' }, h('label', { for: 'unit-name' }, 'Name'), name),
      h('div', { class: 'field' }, h('label', { for: 'unit-description' }, 'Description'), description),
      h('div', { class: 'field' }, h('label', { for: 'unit-file' }, 'Component (.wasm)'), file),
      h('div', { class: 'field actions' }, submit),
    ),
    progress, status, error,
  );

  const search = h('input', { id: 'unit-search', type: 'search', placeholder: 'Filter by name', 'aria-label': 'Filter units by name' });
  const tbody = h('tbody');
  const table = h('table', { id: 'units-table', class: 'data' },
    h('caption', { class: 'visually-hidden' }, 'Policy units'),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'Name'),
      h('th', { scope: 'col' }, 'Kind'),
      h('th', { scope: 'col' }, 'Language'),
      h('th', { scope: 'col' }, 'Parameters'),
      h('th', { scope: 'col', class: 'num' }, 'Size'),
      h('th', { scope: 'col' }, 'Uploaded'),
      h('th', { scope: 'col' }, 'State'),
      h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')),
    )),
    tbody);
  const versions = h('section', { id: 'unit-versions', class: 'card', hidden: true, 'aria-live': 'polite' });
  const count = h('span', { class: 'muted', id: 'units-count' });

  mount(view,
    h('div', { class: 'page-head' }, h('h1', {}, 'Units'),
      h('p', { class: 'muted' }, 'Filters (hard constraints), scores (weighed by factors) and balancers, each a sandboxed WebAssembly component.')),
    form,
    h('section', { class: 'card', 'aria-labelledby': 'units-title' },
      h('div', { class: 'card-head' }, h('h2', { id: 'units-title' }, 'All units ', count), search),
      h('div', { class: 'table-wrap' }, table)),
    versions,
  );

  let all = [];
  async function refresh() {
    all = await api.get('/schedulingpolicyunits');
    draw();
  }
  function draw() {
    const needle = search.value.trim().toLowerCase();
    const shown = all.filter((u) => !needle || u.name.toLowerCase().includes(needle));
    count.textContent = `(${shown.length} of ${all.length})`;
    mount(tbody, shown.map((u) => h('tr', { dataset: { name: u.name } },
      h('th', { scope: 'row', class: 'c-unit' }, h('span', { class: 'unit-name' }, u.name),
        h('span', { class: 'desc', title: u.description || '' }, u.description || '')),
      h('td', { class: 'kind' }, kinds(u).map((k) => h('span', { class: `chip ${k}` }, k))),
      h('td', { class: 'language' }, language(u.module)),
      h('td', {}, u.params.length ? u.params.map((p) => h('code', { class: 'param', title: p.description }, p.name)) : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'num size' }, bytes(u.module && u.module.size_bytes)),
      h('td', { class: 'when' }, when(u.uploaded_at, false), h('br'), h('span', { class: 'muted' }, `by ${u.uploaded_by}`)),
      h('td', {}, u.internal ? h('span', { class: 'badge' }, 'built in') : null,
        h('span', { class: u.enabled ? 'badge ok' : 'badge off' }, u.enabled ? 'enabled' : 'disabled')),
      h('td', {}, h('button', { type: 'button', class: 'ghost small', dataset: { versions: u.id }, onclick: () => showVersions(u) }, 'Versions')),
    )));
  }
  async function showVersions(unit) {
    versions.hidden = false;
    mount(versions, h('h2', {}, `Versions of ${unit.name}`), h('p', { class: 'muted' }, 'Loading…'));
    try {
      const list = await api.get(`/schedulingpolicyunits/${unit.id}/versions`);
      mount(versions,
        h('div', { class: 'card-head' }, h('h2', {}, `Versions of ${unit.name}`),
          h('button', { type: 'button', class: 'ghost small', onclick: () => { versions.hidden = true; } }, 'Close')),
        h('table', { class: 'data' },
          h('thead', {}, h('tr', {}, ['Version', 'Kind', 'Language', 'Parameters', 'Size', 'sha256', 'Uploaded'].map((t) => h('th', { scope: 'col' }, t)))),
          h('tbody', {}, list.map((v) => h('tr', {},
            h('td', {}, String(v.version), v.current ? h('span', { class: 'badge ok' }, 'current') : null),
            h('td', {}, kinds(v).join(', ')),
            h('td', {}, language(v.module)),
            h('td', {}, (v.params || []).map((p) => p.name).join(', ') || '—'),
            h('td', { class: 'num' }, bytes(v.module ? v.module.size_bytes : v.size_bytes)),
            h('td', {}, h('code', {}, ((v.module && v.module.sha256) || v.sha256 || '').slice(0, 12))),
            h('td', {}, when(v.uploaded_at)),
          )))));
      versions.scrollIntoView({ block: 'nearest' });
    } catch (e) {
      const box = h('div', { class: 'error-box', role: 'alert' });
      showError(box, e);
      mount(versions, h('h2', {}, `Versions of ${unit.name}`), box);
    }
  }

  search.addEventListener('input', draw);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showError(error, null);
    const chosen = file.files && file.files[0];
    if (!name.value.trim()) { showError(error, { message: 'Give the unit a name.' }); name.focus(); return; }
    if (!chosen) { showError(error, { message: 'Choose a .wasm file.' }); file.focus(); return; }
    const query = new URLSearchParams({ name: name.value.trim() });
    if (description.value.trim()) query.set('description', description.value.trim());
    submit.disabled = true;
    progress.hidden = false;
    progress.value = 0;
    status.textContent = `Uploading ${chosen.name}…`;
    try {
      const reply = await api.upload(`/schedulingpolicyunits?${query}`, chosen, (p) => {
        progress.value = Math.round(p * 100);
        status.textContent = p < 1 ? `Uploading ${chosen.name}: ${Math.round(p * 100)} %` : 'Validating and compiling…';
      });
      const unit = reply.body;
      status.textContent = reply.status === 201
        ? `Uploaded ${unit.name}: ${kinds(unit).join(' and ')}, ${bytes(unit.module.size_bytes)}.`
        : `Uploaded ${unit.name}: the server already had these bytes.`;
      form.reset();
      await refresh();
      const row = tbody.querySelector(`tr[data-name="${CSS.escape(unit.name)}"]`);
      if (row) { row.classList.add('fresh'); row.scrollIntoView({ block: 'nearest' }); }
    } catch (e) {
      status.textContent = '';
      showError(error, e);
    } finally {
      submit.disabled = false;
      progress.hidden = true;
    }
  });

  await refresh();
}

/** The language a module's producers sections tell, as people write it. */
function language(module) {
  const names = { rust: 'Rust', python: 'Python', javascript: 'JavaScript', c: 'C' };
  const code = module && module.language;
  return code ? (names[code] || code) : h('span', { class: 'muted', title: 'The component does not say' }, 'unknown');
}
