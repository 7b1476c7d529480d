// A table that renders only the rows in view (plus a margin), for lists of
// thousands: rows have one fixed height, a spacer gives the scroll area
// the full height, and rows are fetched a page at a time as they come
// into view, so the page never holds or asks for the whole list.

import { h, mount } from './dom.js';

/**
 * id names the table, scrollId its scrolling box;
 * columns: [{ title, className, cell(row) -> Node|string }];
 * empty: what the table says when the list is empty.
 * fetchPage(offset, limit) -> Promise<{ total, rows }>
 */
export function virtualTable({ id, scrollId, label, columns, fetchPage, empty = 'Nothing to show.', rowHeight = 44, pageSize = 100, height = 520, overscan = 6 }) {
  const pages = new Map(); // page index -> rows (or a pending promise)
  let total = 0;
  let onTotal = () => {};

  const header = h('div', { class: 'vhead', role: 'row' },
    columns.map((c) => h('div', { class: ['vcell', c.className], role: 'columnheader' }, c.title)));
  const spacer = h('div', { class: 'vspacer' });
  const body = h('div', { class: 'vbody', role: 'rowgroup' });
  const scroller = h('div', { class: 'vscroll', id: scrollId, tabindex: '0', 'aria-label': `${label}, scrollable` }, spacer, body);
  const root = h('div', { class: 'vtable', id, role: 'table', 'aria-label': label, 'aria-rowcount': '0' },
    h('div', { role: 'rowgroup' }, header), scroller);
  scroller.style.height = `${height}px`;

  function load(page) {
    if (pages.has(page)) return;
    pages.set(page, null);
    fetchPage(page * pageSize, pageSize).then((answer) => {
      pages.set(page, answer.rows);
      setTotal(answer.total);
      render();
    }).catch((e) => {
      pages.delete(page);
      mount(body, h('div', { class: 'error-box', role: 'alert' }, e.message || String(e)));
    });
  }

  function setTotal(n) {
    if (n === total) return;
    total = n;
    spacer.style.height = `${total * rowHeight}px`;
    root.setAttribute('aria-rowcount', String(total + 1));
    onTotal(total);
  }

  function render() {
    if (total === 0 && pages.get(0)) {
      mount(body, h('div', { class: 'vrow vempty', role: 'row' }, h('div', { class: 'vcell muted', role: 'cell' }, empty)));
      return;
    }
    const first = Math.max(0, Math.floor(scroller.scrollTop / rowHeight) - overscan);
    const visible = Math.ceil(scroller.clientHeight / rowHeight) + 2 * overscan;
    const last = Math.min(total, first + visible);
    for (let p = Math.floor(first / pageSize); p <= Math.floor(Math.max(first, last - 1) / pageSize); p++) load(p);
    const rows = [];
    for (let i = first; i < last; i++) {
      const page = pages.get(Math.floor(i / pageSize));
      const row = page ? page[i % pageSize] : null;
      const el = h('div', { class: 'vrow', role: 'row', 'aria-rowindex': String(i + 2) },
        row
          ? columns.map((c) => h('div', { class: ['vcell', c.className], role: 'cell' }, c.cell(row)))
          : h('div', { class: 'vcell muted', role: 'cell' }, 'Loading…'));
      el.style.transform = `translateY(${i * rowHeight}px)`;
      el.style.height = `${rowHeight}px`;
      rows.push(el);
    }
    mount(body, rows);
  }

  let frame = 0;
  scroller.addEventListener('scroll', () => {
    if (frame) return;
    frame = requestAnimationFrame(() => { frame = 0; render(); });
  });

  load(0);
  return {
    element: root,
    whenTotal(fn) { onTotal = fn; },
    refresh() { pages.clear(); load(0); },
  };
}
