// The console's entry module: sign-in, the header, and hash routing to one
// module per page (#/units, #/policies/ID, #/clusters/ID,
// #/decisions/CLUSTER/ID). Pages get the element to draw into and the
// route's parameters; they fetch what they show through api.js.

import * as api from './api.js';
import { h, mount, showError } from './dom.js';
import * as units from './pages/units.js';
import * as policies from './pages/policies.js';
import * as clusters from './pages/clusters.js';
import * as decisions from './pages/decisions.js';
import * as simulator from './pages/simulator.js';

const main = document.getElementById('main');
const topbar = document.getElementById('topbar');

/** Routes: a pattern of path segments (":x" binds x) and its page. */
const ROUTES = [
  [['units'], units.list],
  [['policies'], policies.list],
  [['policies', ':id'], policies.editor],
  [['clusters'], clusters.list],
  [['clusters', ':id'], clusters.detail],
  [['decisions'], decisions.list],
  [['decisions', ':cluster', ':id'], decisions.detail],
  [['simulator'], simulator.page],
];

function match(path) {
  const parts = path.split('/').filter(Boolean);
  for (const [pattern, page] of ROUTES) {
    if (pattern.length !== parts.length) continue;
    const params = {};
    const ok = pattern.every((p, i) => {
      if (p.startsWith(':')) { params[p.slice(1)] = decodeURIComponent(parts[i]); return true; }
      return p === parts[i];
    });
    if (ok) return { page, params, section: pattern[0] };
  }
  return null;
}

let generation = 0;

async function route() {
  if (!api.token()) {
    signInPage();
    return;
  }
  const hash = location.hash.replace(/^#/, '') || '/units';
  const found = match(hash.split('?')[0]);
  if (!found) {
    location.hash = '#/units';
    return;
  }
  topbar.hidden = false;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.getAttribute('href') === `#/${found.section}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const mine = ++generation;
  const view = h('div', { class: 'page' });
  mount(main, view);
  const query = new URLSearchParams(hash.split('?')[1] || '');
  try {
    await found.page(view, found.params, {
      query,
      isCurrent: () => mine === generation,
    });
    // A new page: tell screen readers where they are, as a page load would.
    const heading = view.querySelector('h1');
    if (heading && mine === generation) {
      document.title = `${heading.textContent} — Sandpiper console`;
      document.getElementById('announcer').textContent = heading.textContent;
    }
  } catch (e) {
    if (mine !== generation) return;
    const box = h('div', { class: 'error-box', role: 'alert' });
    showError(box, e);
    view.prepend(box);
  }
}

function signInPage(message) {
  topbar.hidden = true;
  const error = h('p', { id: 'signin-error', class: 'error-box', role: 'alert', hidden: !message }, message || '');
  const input = h('input', {
    id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false',
    required: true, 'aria-describedby': 'token-help signin-error',
  });
  const form = h('form', { id: 'signin-form', class: 'signin-card', novalidate: true },
    h('h1', {}, 'Sandpiper'),
    h('p', { class: 'muted' }, 'Scheduling policy engine — administration console'),
    h('label', { for: 'token' }, 'API token'),
    input,
    h('p', { id: 'token-help', class: 'hint' },
      'Paste a token (admin to change things, reader to look). It is kept in this tab only, until you sign out or close it.'),
    error,
    h('button', { id: 'signin-submit', type: 'submit', class: 'primary' }, 'Sign in'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const value = input.value.trim();
    if (!value) {
      showError(error, { message: 'Paste a token first.' });
      input.focus();
      return;
    }
    api.signIn(value);
    try {
      // Any reader route tells whether the server knows the token.
      await api.get('/clusters');
    } catch (e) {
      api.signOut();
      showError(error, e.status === 401
        ? { message: 'The server does not know this token (or it was revoked).', code: e.code }
        : e);
      input.focus();
      return;
    }
    if (!location.hash || location.hash === '#/' || location.hash === '#') location.hash = '#/units';
    else route();
  });
  mount(main, h('div', { class: 'signin-wrap' }, form));
  input.focus();
}

api.whenUnauthenticated(() => {
  // On the sign-in page the form itself says why.
  if (topbar.hidden) return;
  api.signOut();
  signInPage('Your session ended or the token was refused: sign in again.');
});

document.getElementById('signout').addEventListener('click', () => {
  api.signOut();
  location.hash = '#/units';
  signInPage();
});

window.addEventListener('hashchange', route);
route();
