// SIMULATOR PAGE — a reserved place. The simulator (POST /api/v1/simulations)
// is built on branch `sim`; when it lands on main, this module draws its
// runs. Until then the page says so, and nothing here calls the API.

import { h, mount } from '../dom.js';

export async function page(view) {
  mount(view,
    h('div', { class: 'page-head' }, h('h1', {}, 'Simulator')),
    h('section', { class: 'card' },
      h('p', {}, 'The simulator replays a workload against a policy and a synthetic cluster (POST /api/v1/simulations).'),
      h('p', { class: 'muted' }, 'It is not in this server yet; this page will show its runs when it is.')));
}
