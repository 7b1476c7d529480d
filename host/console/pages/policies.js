// Policies: the list (with clone and create) and the editor, in the shape
// of oVirt's policy dialog: filters moved between disabled and enabled
// (with first and last positions), weights with factors, one balancer,
// and the properties the chosen units declare, checked against each
// unit's pattern as they are typed. The server stays the judge: a save
// runs the same checks and its refusal is shown at the field it names.

import * as api from '../api.js';
import { h, mount, kinds, showError, when } from '../dom.js';

const POSITIONS = [['-1', 'First'], ['0', 'Any'], ['1', 'Last']];

export async function list(view) {
  const error = h('div', { id: 'policies-error', class: 'error-box', role: 'alert', hidden: true });
  const name = h('input', { id: 'new-policy-name', required: true, autocomplete: 'off', placeholder: 'e.g. memory-first' });
  const create = h('button', { id: 'new-policy-create', type: 'submit', class: 'primary' }, 'Create and edit');
  const form = h('form', { class: 'card inline-form', 'aria-labelledby': 'new-policy-title' },
    h('h2', { id: 'new-policy-title' }, 'New policy'),
    h('div', { class: 'form-row' },
      h('div', { class: 'field grow' }, h('label', { for: 'new-policy-name' }, 'Name'), name),
      h('div', { class: 'field actions' }, create)),
    error);
  const tbody = h('tbody');
  mount(view,
    h('div', { class: 'page-head' }, h('h1', {}, 'Scheduling policies'),
      h('p', { class: 'muted' }, 'A policy is an ordered set of filters, weighed scores with factors, at most one balancer, and property values. Built-in policies are locked: clone one to change it.')),
    form,
    h('section', { class: 'card' },
      h('table', { id: 'policies-table', class: 'data' },
        h('caption', { class: 'visually-hidden' }, 'Scheduling policies'),
        h('thead', {}, h('tr', {}, ['Name', 'Filters', 'Weights', 'Balancer', 'Properties', 'Updated', ''].map((t) => h('th', { scope: 'col' }, t)))),
        tbody)));

  const policies = await api.get('/schedulingpolicies');
  mount(tbody, policies.map((p) => h('tr', { dataset: { name: p.name } },
    h('th', { scope: 'row' },
      h('a', { href: `#/policies/${p.id}`, class: 'unit-name' }, p.name),
      p.locked ? h('span', { class: 'badge' }, 'locked') : null,
      p.default_policy ? h('span', { class: 'badge ok' }, 'default') : null,
      h('span', { class: 'desc' }, p.description || '')),
    h('td', { class: 'num' }, String(p.filters.length)),
    h('td', {}, p.weights.map((w) => h('span', { class: 'chip score' }, `${w.scheduling_policy_unit.name} ×${w.factor}`))),
    h('td', {}, p.balances.length ? p.balances[0].scheduling_policy_unit.name : h('span', { class: 'muted' }, 'none')),
    h('td', {}, p.properties.map((x) => h('code', { class: 'param' }, `${x.name}=${x.value}`))),
    h('td', { class: 'when' }, when(p.updated_at)),
    h('td', {}, h('button', { type: 'button', class: 'ghost small', onclick: () => clonePolicy(p, error) }, 'Clone')),
  )));

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showError(error, null);
    try {
      const created = await api.post('/schedulingpolicies', { name: name.value.trim() });
      location.hash = `#/policies/${created.id}`;
    } catch (e) {
      showError(error, e);
      name.focus();
    }
  });
}

async function clonePolicy(policy, error) {
  showError(error, null);
  try {
    const copy = await api.post(`/schedulingpolicies/${policy.id}/clone`, { name: `${policy.name}-copy` });
    location.hash = `#/policies/${copy.id}`;
  } catch (e) {
    showError(error, e);
  }
}

/** The editable part of a policy, keyed by unit name. */
function draftOf(policy) {
  return {
    name: policy.name,
    description: policy.description,
    combination: policy.combination,
    filters: policy.filters.map((f) => ({ name: f.scheduling_policy_unit.name, id: f.id, position: f.position, on_failure: f.on_failure, run_once: f.run_once })),
    weights: policy.weights.map((w) => ({ name: w.scheduling_policy_unit.name, id: w.id, factor: w.factor, on_failure: w.on_failure })),
    balancer: policy.balances.length ? policy.balances[0].scheduling_policy_unit.id : '',
    properties: Object.fromEntries(policy.properties.map((p) => [p.name, p.value])),
  };
}

export async function editor(view, { id }) {
  const [policy0, units] = await Promise.all([
    api.get(`/schedulingpolicies/${id}`),
    api.get('/schedulingpolicyunits'),
  ]);
  let server = policy0;
  const draft = draftOf(server);
  const byName = new Map(units.map((u) => [u.name, u]));
  const byId = new Map(units.map((u) => [u.id, u]));
  const locked = server.locked;

  const topError = h('div', { id: 'policy-error', class: 'error-box', role: 'alert', hidden: true });
  const status = h('p', { id: 'policy-status', class: 'live', role: 'status', 'aria-live': 'polite' });
  const filtersBox = h('div', { class: 'dual' });
  const weightsBox = h('div', { class: 'dual' });
  const balancerBox = h('div');
  const propsBox = h('div', { id: 'properties' });
  const nameInput = h('input', { id: 'policy-name', value: draft.name, disabled: locked, autocomplete: 'off' });
  const descInput = h('textarea', { id: 'policy-description', rows: '2', disabled: locked }, draft.description);
  const combination = h('select', { id: 'policy-combination', disabled: locked, 'aria-describedby': 'combination-help' },
    [['rank', 'Rank (oVirt)'], ['normalised', 'Normalised (Nova)']]
      .map(([v, label]) => h('option', { value: v, selected: draft.combination === v }, label)));
  combination.addEventListener('change', () => { draft.combination = combination.value; });
  nameInput.addEventListener('input', () => { draft.name = nameInput.value; });
  descInput.addEventListener('input', () => { draft.description = descInput.value; });

  const save = h('button', { id: 'policy-save', type: 'button', class: 'primary', hidden: locked }, 'Save');
  const clone = h('button', { id: 'policy-clone', type: 'button', class: locked ? 'primary' : 'ghost' }, 'Clone');

  mount(view,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/policies' }, 'Policies'), ' / ', server.name),
    h('div', { class: 'page-head' },
      h('h1', {}, locked ? `${server.name}` : `Edit ${server.name}`,
        locked ? h('span', { class: 'badge' }, 'locked') : null),
      locked ? h('p', { class: 'notice' }, 'Built in and read-only. Clone it to make a policy you can change.') : null),
    topError,
    h('section', { class: 'card', 'aria-labelledby': 'general-title' },
      h('h2', { id: 'general-title' }, 'General'),
      h('div', { class: 'form-row top' },
        h('div', { class: 'field grow' }, h('label', { for: 'policy-name' }, 'Name'), nameInput),
        h('div', { class: 'field grow2' }, h('label', { for: 'policy-description' }, 'Description'), descInput),
        h('div', { class: 'field grow' }, h('label', { for: 'policy-combination' }, 'How weights combine'), combination,
          h('span', { class: 'hint', id: 'combination-help' }, 'Rank: only each weight\u2019s order of hosts counts. Normalised: its scores mapped to 0–1.')))),
    h('section', { class: 'card', 'aria-labelledby': 'filters-title' },
      h('h2', { id: 'filters-title' }, 'Filter modules'),
      h('p', { class: 'hint' }, 'Hard constraints: a host a filter rejects is out. Drag a filter between the lists or use its buttons; one filter may run first and one last, the others run in the order listed.'),
      filtersBox),
    h('section', { class: 'card', 'aria-labelledby': 'weights-title' },
      h('h2', { id: 'weights-title' }, 'Weights modules'),
      h('p', { class: 'hint' }, 'Soft constraints: each score counts times its factor.'),
      weightsBox),
    h('section', { class: 'card', 'aria-labelledby': 'balancer-title' },
      h('h2', { id: 'balancer-title' }, 'Load balancer'), balancerBox),
    h('section', { class: 'card', 'aria-labelledby': 'props-title' },
      h('h2', { id: 'props-title' }, 'Properties'),
      h('p', { class: 'hint' }, 'Values for the parameters the chosen units declare; empty keeps the unit\u2019s default. Each value must match the unit\u2019s pattern.'),
      propsBox),
    h('div', { class: 'savebar' }, save, clone, status),
  );

  // ---- filters ----
  function filterUnits() { return units.filter((u) => u.exports.filter); }
  function listBox(title, id, items, onDrop) {
    const ul = h('ul', { class: 'dnd-list', id, 'aria-label': title });
    ul.addEventListener('dragover', (e) => { if (!locked) { e.preventDefault(); ul.classList.add('over'); } });
    ul.addEventListener('dragleave', () => ul.classList.remove('over'));
    ul.addEventListener('drop', (e) => {
      e.preventDefault();
      ul.classList.remove('over');
      const name = e.dataTransfer.getData('text/plain');
      if (name) onDrop(name);
    });
    mount(ul, items.length ? items : h('li', { class: 'empty' }, 'None'));
    return h('div', { class: 'dual-col' }, h('h3', {}, title), ul);
  }
  function draggable(li, name) {
    if (locked) return li;
    li.draggable = true;
    li.addEventListener('dragstart', (e) => { e.dataTransfer.setData('text/plain', name); e.dataTransfer.effectAllowed = 'move'; });
    return li;
  }
  function unitLabel(u) {
    return h('span', { class: 'unit-label' }, h('span', { class: 'unit-name' }, u.name),
      u.enabled ? null : h('span', { class: 'badge off' }, 'disabled'),
      h('span', { class: 'desc' }, u.description || ''));
  }
  function enableFilter(name) {
    if (draft.filters.some((f) => f.name === name)) return;
    draft.filters.push({ name, id: byName.get(name).id, position: 0 });
    drawFilters(); drawProps();
    focusLater(`select[data-position="${CSS.escape(name)}"]`);
  }
  function disableFilter(name) {
    draft.filters = draft.filters.filter((f) => f.name !== name);
    drawFilters(); drawProps();
    focusLater(`button[data-add-filter="${CSS.escape(name)}"]`);
  }
  function moveFilter(name, delta) {
    const i = draft.filters.findIndex((f) => f.name === name);
    const j = i + delta;
    if (i < 0 || j < 0 || j >= draft.filters.length) return;
    [draft.filters[i], draft.filters[j]] = [draft.filters[j], draft.filters[i]];
    drawFilters();
    focusLater(`button[data-move="${CSS.escape(name)}:${delta}"]`);
  }
  function drawFilters() {
    const on = new Set(draft.filters.map((f) => f.name));
    const disabled = filterUnits().filter((u) => !on.has(u.name)).map((u) => draggable(h('li', { class: 'dnd-item' },
      unitLabel(u),
      h('button', { type: 'button', class: 'small', disabled: locked || !u.enabled, dataset: { addFilter: u.name },
        'aria-label': `Enable filter ${u.name}`, onclick: () => enableFilter(u.name) }, 'Enable →')), u.name));
    const enabled = draft.filters.map((f, i) => {
      const u = byName.get(f.name) || { name: f.name, description: '' };
      const select = h('select', { dataset: { position: f.name }, disabled: locked, 'aria-label': `Position of ${f.name}` },
        POSITIONS.map(([v, label]) => h('option', { value: v, selected: String(f.position) === v }, label)));
      select.addEventListener('change', () => { f.position = Number(select.value); drawFilters(); });
      return draggable(h('li', { class: ['dnd-item', f.position === -1 && 'pos-first', f.position === 1 && 'pos-last'] },
        h('button', { type: 'button', class: 'small', disabled: locked, dataset: { removeFilter: f.name },
          'aria-label': `Disable filter ${f.name}`, onclick: () => disableFilter(f.name) }, '← Disable'),
        unitLabel(u),
        h('span', { class: 'pos' }, select),
        h('span', { class: 'updown' },
          h('button', { type: 'button', class: 'icon', disabled: locked || i === 0, dataset: { move: `${f.name}:-1` }, 'aria-label': `Move ${f.name} up`, onclick: () => moveFilter(f.name, -1) }, '↑'),
          h('button', { type: 'button', class: 'icon', disabled: locked || i === draft.filters.length - 1, dataset: { move: `${f.name}:1` }, 'aria-label': `Move ${f.name} down`, onclick: () => moveFilter(f.name, 1) }, '↓'))), f.name);
    });
    mount(filtersBox,
      listBox(`Disabled filters (${disabled.length})`, 'filters-disabled', disabled, disableFilter),
      listBox(`Enabled filters (${enabled.length})`, 'filters-enabled', enabled, enableFilter));
  }

  // ---- weights ----
  function enableWeight(name) {
    if (draft.weights.some((w) => w.name === name)) return;
    draft.weights.push({ name, id: byName.get(name).id, factor: 1 });
    drawWeights(); drawProps();
    focusLater(`input[data-factor="${CSS.escape(name)}"]`);
  }
  function disableWeight(name) {
    draft.weights = draft.weights.filter((w) => w.name !== name);
    drawWeights(); drawProps();
    focusLater(`button[data-add-weight="${CSS.escape(name)}"]`);
  }
  function drawWeights() {
    const on = new Set(draft.weights.map((w) => w.name));
    const disabled = units.filter((u) => u.exports.score && !on.has(u.name)).map((u) => draggable(h('li', { class: 'dnd-item' },
      unitLabel(u),
      h('button', { type: 'button', class: 'small', disabled: locked || !u.enabled, dataset: { addWeight: u.name },
        'aria-label': `Enable weight ${u.name}`, onclick: () => enableWeight(u.name) }, 'Enable →')), u.name));
    const enabled = draft.weights.map((w) => {
      const u = byName.get(w.name) || { name: w.name, description: '' };
      const id = `factor-${w.name.replace(/[^A-Za-z0-9_-]/g, '_')}`;
      const input = h('input', { id, type: 'number', min: '0', step: '1', inputmode: 'numeric', value: String(w.factor), disabled: locked, dataset: { factor: w.name } });
      const err = h('span', { class: 'field-error', id: `${id}-error` });
      input.setAttribute('aria-describedby', err.id);
      input.addEventListener('input', () => {
        const ok = /^\d+$/.test(input.value);
        input.setAttribute('aria-invalid', ok ? 'false' : 'true');
        err.textContent = ok ? '' : 'A whole number, 0 or more.';
        if (ok) w.factor = Number(input.value);
      });
      return draggable(h('li', { class: 'dnd-item' },
        h('button', { type: 'button', class: 'small', disabled: locked, 'aria-label': `Disable weight ${w.name}`, onclick: () => disableWeight(w.name) }, '← Disable'),
        unitLabel(u),
        h('span', { class: 'factor' }, h('label', { for: id }, 'Factor'), input, err)), w.name);
    });
    mount(weightsBox,
      listBox(`Available weights (${disabled.length})`, 'weights-disabled', disabled, disableWeight),
      listBox(`Enabled weights (${enabled.length})`, 'weights-enabled', enabled, enableWeight));
  }

  // ---- balancer ----
  function drawBalancer() {
    const select = h('select', { id: 'balancer', disabled: locked },
      h('option', { value: '' }, 'None'),
      units.filter((u) => u.exports.balance).map((u) =>
        h('option', { value: u.id, selected: draft.balancer === u.id }, u.name)));
    select.addEventListener('change', () => { draft.balancer = select.value; drawProps(); });
    const u = byId.get(draft.balancer);
    mount(balancerBox,
      h('div', { class: 'field' }, h('label', { for: 'balancer' }, 'Balancer (one at most)'), select),
      u ? h('p', { class: 'hint' }, u.description) : null);
  }

  // ---- properties ----
  /** Every parameter of the chosen units: name → [{unit, pattern, default, description}]. */
  function declared() {
    const chosen = [
      ...draft.filters.map((f) => byName.get(f.name)),
      ...draft.weights.map((w) => byName.get(w.name)),
      byId.get(draft.balancer),
    ].filter(Boolean);
    const params = new Map();
    for (const u of chosen) {
      for (const p of u.params) {
        if (!params.has(p.name)) params.set(p.name, []);
        if (!params.get(p.name).some((d) => d.unit === u.name)) {
          params.get(p.name).push({ unit: u.name, pattern: p.pattern, default: p.default_value, description: p.description });
        }
      }
    }
    return params;
  }
  function check(name, value, decls) {
    if (value === '') return null;
    for (const d of decls) {
      let re;
      try { re = new RegExp(d.pattern, 'u'); } catch { continue; }
      if (!re.test(value)) return `"${value}" does not match ${d.pattern} (declared by ${d.unit})`;
    }
    return null;
  }
  function drawProps() {
    const params = declared();
    if (params.size === 0) {
      mount(propsBox, h('p', { class: 'muted' }, 'The chosen units declare no parameters.'));
      return;
    }
    const rows = [...params.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, decls]) => {
      const id = `property-${name}`;
      const errId = `property-error-${name}`;
      const input = h('input', { id, value: draft.properties[name] || '', placeholder: decls[0].default || '(unit default)',
        disabled: locked, autocomplete: 'off', spellcheck: 'false', dataset: { property: name }, 'aria-describedby': `${errId} ${id}-help` });
      const err = h('span', { class: 'field-error', id: errId, 'aria-live': 'polite' });
      const validate = () => {
        const problem = check(name, input.value.trim(), decls);
        input.setAttribute('aria-invalid', problem ? 'true' : 'false');
        err.textContent = problem || '';
      };
      input.addEventListener('input', () => {
        draft.properties[name] = input.value.trim();
        validate();
      });
      validate();
      return h('div', { class: 'prop-row' },
        h('label', { for: id }, h('code', {}, name)),
        h('div', { class: 'prop-input' }, input, err),
        h('p', { class: 'hint', id: `${id}-help` },
          decls.map((d) => `${d.unit}: ${d.description}`).join(' · '),
          ' Pattern ', h('code', {}, decls.map((d) => d.pattern).join(' and ')),
          decls[0].default ? `; default ${decls[0].default}.` : '.'));
    });
    mount(propsBox, rows);
  }

  function focusLater(selector) {
    requestAnimationFrame(() => { const el = view.querySelector(selector); if (el) el.focus(); });
  }

  /** Shows an error at the field it names (a property) and at the top. */
  function showSaveError(e) {
    showError(topError, e);
    if (e.field) {
      const input = view.querySelector(`[data-property="${CSS.escape(e.field)}"]`);
      const err = document.getElementById(`property-error-${e.field}`);
      if (input && err) {
        input.setAttribute('aria-invalid', 'true');
        err.textContent = `Refused by the server: ${e.message}`;
        input.focus();
      }
    }
    topError.scrollIntoView({ block: 'nearest' });
  }

  /**
   * Applies the draft with the policy's sub-resources: properties only
   * the kept units declare first (a removed unit's value would otherwise
   * block its removal), then removals, additions and changes (a changed
   * slot is removed and added again), then the whole property list, which
   * the server checks against the units now in the policy.
   */
  async function doSave() {
    showError(topError, null);
    status.textContent = 'Saving…';
    save.disabled = true;
    const base = `/schedulingpolicies/${id}`;
    const before = draftOf(server);
    const props = Object.entries(draft.properties).filter(([, v]) => v !== '').map(([name, value]) => ({ name, value }));
    try {
      const keptUnits = new Set([
        ...before.filters.map((f) => f.name).filter((n) => draft.filters.some((f) => f.name === n)),
        ...before.weights.map((w) => w.name).filter((n) => draft.weights.some((w) => w.name === n)),
      ].map((n) => byName.get(n)).filter(Boolean).map((u) => u.name));
      if (before.balancer && before.balancer === draft.balancer) keptUnits.add(byId.get(draft.balancer).name);
      const keptParams = new Set(units.filter((u) => keptUnits.has(u.name)).flatMap((u) => u.params.map((p) => p.name)));
      await api.put(base, {
        name: draft.name.trim(),
        description: draft.description,
        combination: draft.combination,
        properties: props.filter((p) => keptParams.has(p.name) && !check(p.name, p.value, declared().get(p.name) || [])),
      });

      // Filters in the middle run in the order they were added: a new
      // order is saved by adding them again in that order.
      const kept = new Set(before.filters.map((f) => f.name));
      const reordered = before.filters.map((f) => f.name).filter((n) => draft.filters.some((f) => f.name === n)).join('\n')
        !== draft.filters.map((f) => f.name).filter((n) => kept.has(n)).join('\n');
      const slotChanged = (a, b, keys) => reordered || keys.some((k) => String(a[k]) !== String(b[k]));
      for (const f of before.filters) {
        const now = draft.filters.find((x) => x.name === f.name);
        if (!now || slotChanged(f, now, ['position'])) await api.del(`${base}/filters/${f.id}`);
      }
      for (const w of before.weights) {
        const now = draft.weights.find((x) => x.name === w.name);
        if (!now || String(w.factor) !== String(now.factor)) await api.del(`${base}/weights/${w.id}`);
      }
      if (before.balancer && before.balancer !== draft.balancer) await api.del(`${base}/balances/${before.balancer}`);
      for (const f of draft.filters) {
        const was = before.filters.find((x) => x.name === f.name);
        if (!was || slotChanged(was, f, ['position'])) {
          const body = { scheduling_policy_unit: { id: f.id }, position: f.position };
          if (f.on_failure) body.on_failure = f.on_failure;
          if (f.run_once) body.run_once = f.run_once;
          await api.post(`${base}/filters`, body);
        }
      }
      for (const w of draft.weights) {
        const was = before.weights.find((x) => x.name === w.name);
        if (!was || String(was.factor) !== String(w.factor)) {
          const body = { scheduling_policy_unit: { id: w.id }, factor: w.factor };
          if (w.on_failure) body.on_failure = w.on_failure;
          await api.post(`${base}/weights`, body);
        }
      }
      if (draft.balancer && before.balancer !== draft.balancer) {
        await api.post(`${base}/balances`, { scheduling_policy_unit: { id: draft.balancer } });
      }
      server = await api.put(base, { properties: props });
      status.textContent = `Saved ${server.name} at ${new Date().toLocaleTimeString()}.`;
    } catch (e) {
      status.textContent = 'Not saved.';
      showSaveError(e);
      // What did get applied is now the server's state to compare with.
      try { server = await api.get(base); } catch { /* keep the old one */ }
    } finally {
      save.disabled = false;
    }
  }

  save.addEventListener('click', doSave);
  clone.addEventListener('click', () => clonePolicy(server, topError));

  drawFilters();
  drawWeights();
  drawBalancer();
  drawProps();
}
