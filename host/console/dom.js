// Building the page with DOM calls only: the content security policy
// allows no inline script or style, so nothing here writes HTML strings
// or style attributes (element.style, the CSSOM, is allowed).

const SVG_NS = 'http://www.w3.org/2000/svg';

function apply(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'class') {
      el.setAttribute('class', Array.isArray(value) ? value.filter(Boolean).join(' ') : value);
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (key === 'style') {
      Object.assign(el.style, value);
    } else if (key === 'value' && 'value' in el) {
      el.value = value;
    } else if (key === 'checked' || key === 'disabled' || key === 'selected' || key === 'hidden') {
      el[key] = Boolean(value);
      if (value === true) el.setAttribute(key, '');
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: h('button', { onclick }, 'Save'). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  apply(el, attrs);
  return append(el, children);
}

/** An SVG element, same call shape as h. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else {
      el.setAttribute(key, String(value));
    }
  }
  return append(el, children);
}

/** Replaces the children of el. */
export function mount(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function mib(value) {
  if (!Number.isFinite(value)) return '—';
  return value >= 1024 ? `${(value / 1024).toFixed(1)} GiB` : `${Math.round(value)} MiB`;
}

export function bytes(n) {
  if (!Number.isFinite(n)) return '—';
  if (n >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024).toFixed(1)} KiB`;
}

/** A timestamp in the reader's locale; seconds only where they tell apart. */
export function when(iso, seconds = true) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, {
    year: 'numeric', month: 'short', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: seconds ? '2-digit' : undefined,
  });
}

export function num(x, digits = 1) {
  if (typeof x !== 'number' || !Number.isFinite(x)) return '—';
  return Number.isInteger(x) ? String(x) : x.toFixed(digits);
}

/** The kinds a unit exports, e.g. ['filter', 'score']. */
export function kinds(unit) {
  return ['filter', 'score', 'balance'].filter((k) => unit.exports && unit.exports[k]);
}

/** A small labelled status element for aria-live announcements. */
export function live(id, politeness = 'polite') {
  return h('p', { id, class: 'live', 'aria-live': politeness, role: politeness === 'assertive' ? 'alert' : 'status' });
}

/** Shows an API error (or any error) in el; empties it for null. */
export function showError(el, error) {
  if (!el) return;
  if (!error) {
    el.replaceChildren();
    el.hidden = true;
    return;
  }
  el.hidden = false;
  const code = error.code ? h('code', { class: 'code' }, error.code) : null;
  mount(el, h('strong', {}, 'Refused: '), error.message || String(error), code ? ' ' : null, code);
}
