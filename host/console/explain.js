// One decision's explain record as pictures: the funnel of hosts through
// the filters (with the reasons for the hosts each removed), the cost
// table as a heat map per weight and host, and why the winner won (its
// margin over the runner-up, weight by weight). Reads both shapes the API
// keeps: the full record (hosts sent inline: every host's score per
// weight) and the bounded summary of a decision over the held inventory
// (counts, example hosts, the top totals).

import { h, s, mount, num } from './dom.js';

/** The explain record in one shape, whichever the API kept. */
export function normalize(explain) {
  const full = Array.isArray(explain.totals);
  const filters = (explain.filters || []).map((f) => {
    const reasons = (f.rejected || []).map((r) => Array.isArray(r.hosts)
      ? { reason: r.reason, count: r.hosts.length, examples: r.hosts.slice(0, 5) }
      : { reason: r.reason, count: r.hosts, examples: r.examples || [] })
      // The reasons that cost the most hosts first.
      .sort((a, b) => b.count - a.count);
    return {
      unit: f.unit,
      position: f.position,
      input: f.input,
      survivors: f.survivors,
      removed: Math.max(0, (f.input || 0) - (f.survivors || 0)),
      skipped: f.skipped || null,
      // Verdicts reused from earlier decisions (a per-host unit, the host
      // and the request unchanged).
      reused: f.reused || 0,
      failure: f.failure || null,
      reasons,
      otherReasons: f.other_reasons || 0,
      otherHosts: f.other_hosts || 0,
    };
  });
  const scores = (explain.scores || []).map((sc) => ({
    unit: sc.unit,
    factor: sc.factor,
    called: sc.called !== false && !sc.skipped,
    skipped: sc.skipped || null,
    failure: sc.failure || null,
    hosts: Array.isArray(sc.hosts) ? new Map(sc.hosts.map((x) => [x.host, x])) : null,
  }));
  const totals = (full ? explain.totals : explain.ranked || []).map((t) => ({ host: t.host, total: t.total }));
  return {
    full,
    candidates: explain.candidates,
    considered: explain.considered || null,
    combination: explain.combination,
    outcome: explain.outcome,
    winner: explain.winner || null,
    tiedWith: Array.isArray(explain.tied_with) ? explain.tied_with : [],
    tiedCount: Array.isArray(explain.tied_with) ? explain.tied_with.length : (explain.tied_with || 0),
    tieBreak: explain.tie_break || null,
    filters,
    scores,
    totals,
  };
}

/** +1 when a higher total wins (oVirt's rank points), -1 when lower does. */
function direction(e) {
  if (!e.winner || e.totals.length < 2) return 1;
  const w = e.totals.find((t) => t.host === e.winner);
  if (!w) return 1;
  return e.totals.every((t) => t.total <= w.total) ? 1 : -1;
}

// ---------------------------------------------------------------- funnel

export function funnel(e, prefix = '') {
  const ran = e.filters.filter((f) => !f.skipped);
  const skipped = e.filters.filter((f) => f.skipped);
  const width = 760;
  const labelW = 230;
  const barW = 380;
  const rowH = 30;
  const top = 8;
  const rows = [{ unit: 'Candidates', input: e.candidates, survivors: e.candidates, removed: 0, head: true }, ...ran];
  const height = top + rows.length * rowH + 8;
  const max = Math.max(1, e.candidates || 1);
  const svg = s('svg', { id: `${prefix}funnel`, viewBox: `0 0 ${width} ${height}`, width: String(width), role: 'img', 'aria-labelledby': `${prefix}funnel-title ${prefix}funnel-desc`, class: 'chart' },
    s('title', { id: `${prefix}funnel-title` }, 'Hosts through the filters'),
    s('desc', { id: `${prefix}funnel-desc` }, `${e.candidates} candidate hosts; ` + ran.map((f) => `${f.unit} kept ${f.survivors} of ${f.input}`).join('; ') + '.'));
  rows.forEach((f, i) => {
    const y = top + i * rowH;
    const kept = (f.survivors / max) * barW;
    const cut = (f.removed / max) * barW;
    const x0 = labelW + (barW - (f.input / max) * barW) / 2;
    svg.append(
      s('text', { x: labelW - 10, y: y + 19, 'text-anchor': 'end', class: f.head ? 'label strong' : 'label' }, f.unit),
      s('rect', { x: x0, y: y + 4, width: Math.max(kept, f.survivors ? 2 : 0), height: rowH - 10, rx: 3, class: f.failure ? 'bar failed' : 'bar kept' }),
      cut > 0 ? s('rect', { x: x0 + kept, y: y + 4, width: Math.max(cut, 2), height: rowH - 10, rx: 3, class: 'bar cut' }) : '',
      s('text', { x: labelW + barW + 12, y: y + 19, class: 'figure' },
        f.head ? `${f.input} hosts` : f.removed ? `${f.input} → ${f.survivors}  (−${f.removed})` : `${f.input} → ${f.survivors}`),
    );
  });

  const reasons = h('ul', { class: 'reasons' }, ran.filter((f) => f.removed > 0 || f.failure).map((f) => h('li', {},
    h('strong', {}, f.unit), ` removed ${f.removed} host${f.removed === 1 ? '' : 's'}`,
    f.failure ? h('span', { class: 'badge off' }, `failed: ${f.failure.kind || JSON.stringify(f.failure)}`) : null,
    h('ul', {}, f.reasons.slice(0, 8).map((r) => h('li', {},
      h('span', { class: 'reason' }, r.reason), ' — ',
      `${r.count} host${r.count === 1 ? '' : 's'}`,
      r.examples.length ? h('span', { class: 'muted' }, ` (${r.examples.join(', ')}${r.count > r.examples.length ? ', …' : ''})`) : null)),
    f.reasons.length > 8 ? h('li', { class: 'muted' }, `and ${f.reasons.length - 8} more reasons`) : null,
    f.otherReasons ? h('li', { class: 'muted' }, `and ${f.otherReasons} other reasons for ${f.otherHosts} hosts`) : null))));
  const notRun = skipped.length ? h('details', { class: 'skipped' },
    h('summary', {}, `${skipped.length} filter${skipped.length === 1 ? '' : 's'} not run: the request does not concern them`),
    h('ul', {}, skipped.map((f) => h('li', {}, h('strong', {}, f.unit), ` — ${f.skipped}`)))) : null;
  const reusing = ran.filter((f) => f.reused > 0);
  const reused = reusing.length ? h('p', { class: 'muted reused' },
    'Verdicts reused from earlier decisions (host and request unchanged): ',
    reusing.map((f) => `${f.unit} ${f.reused} of ${f.input}`).join(', '), '.') : null;

  return h('figure', { id: `${prefix}funnel-figure`, class: 'card figure' },
    h('figcaption', {}, h('h2', {}, 'Funnel'), h('p', { class: 'muted' },
      `${e.candidates} candidate hosts${e.considered ? ` (${e.considered})` : ''}, filters in the order they ran.`)),
    svg, reasons, reused, notRun);
}

// -------------------------------------------------------------- heat map

const HEAT_ROWS = 15;

export function heatmap(e, prefix = '') {
  const figure = h('figure', { id: `${prefix}heatmap-figure`, class: 'card figure' });
  const dir = direction(e);
  const weights = e.scores.filter((sc) => sc.called && sc.hosts);
  const hosts = [...e.totals].sort((a, b) => dir * (b.total - a.total));
  const caption = h('figcaption', {}, h('h2', {}, 'Cost table'));
  if (!hosts.length) {
    mount(figure, caption, h('p', { class: 'muted' }, 'No host reached the weights.'));
    return figure;
  }
  if (!e.full) {
    caption.append(h('p', { class: 'muted' },
      'This decision was made over the held inventory, whose log keeps a bounded summary: the weights that ran and the top totals. Every host\u2019s score per weight is kept for decisions over hosts sent inline.'));
  } else {
    caption.append(h('p', { class: 'muted' },
      `Each cell is the points a weight gave the host, its factor included; the total is their sum. Darker favours the host more within its column. ${dir > 0 ? 'The highest total wins.' : 'The lowest total wins.'}`));
  }
  const cols = [...weights.map((w) => ({ title: w.unit, sub: `×${w.factor}`, value: (host) => {
    const x = w.hosts.get(host);
    return x ? x.points : null;
  }, detail: (host) => {
    const x = w.hosts.get(host);
    return x ? `${w.unit} on ${host}: raw score ${num(x.raw, 3)}, rank ${x.rank}, ${num(x.points, 2)} points (factor ${w.factor} included)` : `${w.unit}: no score for ${host}`;
  } })), { title: 'Total', sub: '', total: true, value: (host) => (hosts.find((t) => t.host === host) || {}).total, detail: (host) => `Total for ${host}` }];

  // Per column range, for the colour scale.
  const ranges = cols.map((c) => {
    const vals = hosts.map((t) => c.value(t.host)).filter((v) => typeof v === 'number');
    return [Math.min(...vals), Math.max(...vals)];
  });
  const favour = (ci, v) => {
    const [lo, hi] = ranges[ci];
    if (typeof v !== 'number' || hi === lo) return 0.5;
    const t = (v - lo) / (hi - lo);
    return dir > 0 ? t : 1 - t;
  };

  let offset = 0;
  const holder = h('div', { class: 'heat-holder' });
  const pager = h('div', { class: 'pager' });
  function draw() {
    const shown = hosts.slice(offset, offset + HEAT_ROWS);
    const labelW = 150;
    const cellW = Math.max(80, Math.min(150, Math.floor(660 / cols.length)));
    const cellH = 26;
    const headH = 54;
    const width = labelW + cols.length * cellW + 4;
    const height = headH + shown.length * cellH + 4;
    const svg = s('svg', { id: `${prefix}heatmap`, viewBox: `0 0 ${width} ${height}`, width: String(width), role: 'img', 'aria-labelledby': `${prefix}heatmap-title ${prefix}heatmap-desc`, class: 'chart heat' },
      s('title', { id: `${prefix}heatmap-title` }, 'Cost table: weighted score per weight and host'),
      s('desc', { id: `${prefix}heatmap-desc` }, shown.map((t) => `${t.host}: total ${num(t.total, 2)}`).join('; ')));
    cols.forEach((c, ci) => {
      const x = labelW + ci * cellW + cellW / 2;
      const [first, second] = twoLines(c.title, Math.floor(cellW / 7));
      svg.append(
        s('text', { x, y: 14, 'text-anchor': 'middle', class: c.total ? 'colhead strong' : 'colhead' },
          s('title', {}, c.title), first),
        s('text', { x, y: 28, 'text-anchor': 'middle', class: 'colhead' }, second),
        s('text', { x, y: 44, 'text-anchor': 'middle', class: 'colsub' }, c.sub));
    });
    shown.forEach((t, ri) => {
      const y = headH + ri * cellH;
      const isWinner = t.host === e.winner;
      svg.append(s('text', { x: labelW - 10, y: y + 17, 'text-anchor': 'end', class: isWinner ? 'label strong' : 'label' },
        `${offset + ri + 1}. ${t.host}`));
      cols.forEach((c, ci) => {
        const v = c.value(t.host);
        const f = favour(ci, v);
        const cell = s('rect', { x: labelW + ci * cellW + 1, y: y + 1, width: cellW - 2, height: cellH - 2, rx: 2,
          class: `cell${isWinner ? ' winner' : ''}`, fill: heat(f) },
        s('title', {}, `${c.detail(t.host)}${typeof v === 'number' ? '' : ''}`));
        svg.append(cell, s('text', { x: labelW + ci * cellW + cellW / 2, y: y + 17, 'text-anchor': 'middle', class: f > 0.6 ? 'cellv light' : 'cellv' },
          typeof v === 'number' ? num(v, 1) : '—'));
      });
    });
    mount(holder, svg);
    mount(pager,
      h('button', { type: 'button', class: 'ghost small', id: `${prefix}heatmap-prev`, disabled: offset === 0, onclick: () => { offset = Math.max(0, offset - HEAT_ROWS); draw(); } }, '← Better hosts'),
      h('span', { class: 'muted' }, ` Hosts ${offset + 1}–${offset + shown.length} of ${hosts.length}${e.full ? '' : ' kept'} `),
      h('button', { type: 'button', class: 'ghost small', id: `${prefix}heatmap-next`, disabled: offset + HEAT_ROWS >= hosts.length, onclick: () => { offset += HEAT_ROWS; draw(); } }, 'Worse hosts →'));
  }
  draw();
  const legend = h('div', { class: 'heat-legend', 'aria-hidden': 'true' },
    h('span', {}, 'less favoured'),
    ...[0, 0.25, 0.5, 0.75, 1].map((f) => { const k = h('span', { class: 'swatch' }); k.style.background = heat(f); return k; }),
    h('span', {}, 'more favoured'));
  const skipped = e.scores.filter((sc) => !sc.called);
  const key = weights.length ? h('p', { class: 'hint columns-key' }, 'Columns: ',
    weights.map((w, i) => [i ? ', ' : '', h('strong', {}, w.unit), ` ×${w.factor}`]), ', then the total.') : null;
  // The same figures as a table, for screen readers and for copying.
  const asTable = weights.length ? h('details', { class: 'as-table' },
    h('summary', {}, 'Show the cost table as text'),
    h('div', { class: 'scroll-x' }, h('table', { class: 'data compact' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Host'), cols.map((c) => h('th', { scope: 'col', class: 'num' }, `${c.title} ${c.sub}`)))),
      h('tbody', {}, hosts.map((t) => h('tr', {}, h('th', { scope: 'row' }, t.host),
        cols.map((c) => h('td', { class: 'num' }, num(c.value(t.host), 2))))))))) : null;
  mount(figure, caption, h('div', { class: 'scroll-x' }, holder), pager, legend, key, asTable,
    !e.full && weights.length === 0 ? h('p', { class: 'hint' }, 'Weights that ran: ',
      e.scores.filter((sc) => sc.called).map((sc) => `${sc.unit} ×${sc.factor}`).join(', ') || 'none', '.') : null,
    skipped.length ? h('details', { class: 'skipped' },
      h('summary', {}, `${skipped.length} weight${skipped.length === 1 ? '' : 's'} not run`),
      h('ul', {}, skipped.map((sc) => h('li', {}, h('strong', {}, sc.unit), ` ×${sc.factor} — ${sc.skipped || (sc.failure ? 'failed' : 'not called')}`)))) : null);
  return figure;
}

/** A column title on at most two lines of max characters, split between
 *  words (CamelCase counts as words), the rest cut with an ellipsis. */
function twoLines(text, max) {
  const words = text.split(/(?<=[a-z0-9])(?=[A-Z])|\s+/).filter(Boolean);
  const lines = ['', ''];
  let line = 0;
  for (const word of words) {
    const sep = lines[line] && /\s/.test(text) ? ' ' : '';
    if (lines[line] && (lines[line] + sep + word).length > max) {
      if (line === 1) { lines[1] = `${lines[1].slice(0, max - 1)}…`; return lines; }
      line = 1;
      lines[1] = word;
    } else {
      lines[line] += sep + word;
    }
  }
  return lines.map((l) => (l.length > max ? `${l.slice(0, max - 1)}…` : l));
}

/** A sequential blue scale, light (0) to dark (1). */
function heat(f) {
  const t = Math.max(0, Math.min(1, f));
  const from = [232, 241, 250];
  const to = [20, 72, 140];
  const c = from.map((a, i) => Math.round(a + (to[i] - a) * t));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

// ---------------------------------------------------------------- winner

export function winner(e, prefix = '') {
  const box = h('section', { id: `${prefix}winner`, class: 'card figure', 'aria-labelledby': `${prefix}winner-title` });
  const dir = direction(e);
  if (!e.winner) {
    mount(box, h('h2', { id: `${prefix}winner-title` }, 'No host'),
      h('p', {}, `Outcome: ${e.outcome || 'none'}. Every host was filtered out; the funnel shows why.`));
    return box;
  }
  const ranked = [...e.totals].sort((a, b) => dir * (b.total - a.total));
  const win = ranked.find((t) => t.host === e.winner);
  const runner = ranked.find((t) => t.host !== e.winner);
  const head = h('h2', { id: `${prefix}winner-title` }, 'Why ', h('span', { class: 'host' }, e.winner), ' won');
  if (!runner) {
    mount(box, head, h('p', {}, `${e.winner} was the only host left after the filters (outcome: ${e.outcome}).`));
    return box;
  }
  const margin = dir * ((win ? win.total : 0) - runner.total);
  const lines = [h('p', { class: 'lead' },
    `${e.winner} scored ${num(win ? win.total : NaN, 2)}, the runner-up ${runner.host} ${num(runner.total, 2)}: a margin of ${num(margin, 2)}.`,
    e.tiedCount ? ` Tied with ${e.tiedCount} host${e.tiedCount === 1 ? '' : 's'}${e.tiedWith.length ? ` (${e.tiedWith.join(', ')})` : ''}; the tie was broken by ${e.tieBreak || 'candidate order'}.` : '')];
  const weights = e.scores.filter((sc) => sc.called && sc.hosts);
  if (weights.length) {
    const diffs = weights.map((w) => {
      const a = w.hosts.get(e.winner);
      const b = w.hosts.get(runner.host);
      return { unit: w.unit, factor: w.factor, d: dir * ((a ? a.points : 0) - (b ? b.points : 0)) };
    });
    const max = Math.max(1e-9, ...diffs.map((x) => Math.abs(x.d)));
    const width = 760;
    const labelW = 260;
    const half = 200;
    const rowH = 26;
    const svg = s('svg', { id: `${prefix}margin`, viewBox: `0 0 ${width} ${diffs.length * rowH + 30}`, width: String(width), role: 'img', 'aria-labelledby': `${prefix}margin-title ${prefix}margin-desc`, class: 'chart' },
      s('title', { id: `${prefix}margin-title` }, `Margin of ${e.winner} over ${runner.host} per weight`),
      s('desc', { id: `${prefix}margin-desc` }, diffs.map((x) => `${x.unit}: ${x.d >= 0 ? 'favours' : 'against'} ${e.winner} by ${num(Math.abs(x.d), 2)}`).join('; ')),
      s('line', { x1: labelW + half, x2: labelW + half, y1: 0, y2: diffs.length * rowH + 6, class: 'axis' }),
      s('text', { x: labelW + half - 8, y: diffs.length * rowH + 24, 'text-anchor': 'end', class: 'colsub' }, `favours ${runner.host}`),
      s('text', { x: labelW + half + 8, y: diffs.length * rowH + 24, class: 'colsub' }, `favours ${e.winner}`));
    diffs.forEach((x, i) => {
      const y = i * rowH;
      const w = (Math.abs(x.d) / max) * half;
      svg.append(
        s('text', { x: labelW - 10, y: y + 17, 'text-anchor': 'end', class: 'label' }, `${x.unit} ×${x.factor}`),
        s('rect', { x: x.d >= 0 ? labelW + half : labelW + half - w, y: y + 5, width: Math.max(w, 1), height: rowH - 10, rx: 2, class: x.d >= 0 ? 'bar kept' : 'bar cut' }),
        s('text', { x: x.d >= 0 ? labelW + half + w + 6 : labelW + half - w - 6, y: y + 17, 'text-anchor': x.d >= 0 ? 'start' : 'end', class: 'figure' },
          `${x.d >= 0 ? '+' : '−'}${num(Math.abs(x.d), 2)}`));
    });
    lines.push(svg);
  } else if (!e.full) {
    lines.push(h('p', { class: 'hint' }, 'Per-weight margins need the full cost table, which the log keeps for decisions over hosts sent inline.'));
  }
  mount(box, head, ...lines);
  return box;
}

// ------------------------------------------------------------- answers

/**
 * The picks of a schedule answer that carry an explain record: one for a
 * pick over inline hosts, one per instance over the held inventory.
 */
export function picks(answer) {
  if (!answer) return [];
  if (answer.explain) return [{ vm_id: answer.vm_id, host: answer.chosen_host, explain: answer.explain }];
  return (answer.instances || []).filter((i) => i.explain);
}

/** The three pictures of one explain record; ids start with prefix. */
export function pictures(explain, prefix = '') {
  const e = normalize(explain);
  return [winner(e, prefix), funnel(e, prefix), heatmap(e, prefix)];
}
