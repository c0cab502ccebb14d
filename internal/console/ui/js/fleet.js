// The fleet view: every agent of the workspace with what it runs, uses and spends, live from
// one server-sent stream (GET /v0/fleet/stream), sortable and filterable. Only the rows in
// view are in the DOM (a thousand agents render as a screenful), and the charts (uPlot,
// vendored from npm by hack/vendor-uplot.sh) load after the first paint.
import { h, fill, field, badge, when, money } from './dom.js';
import { sse, ApiError } from './api.js';
import { showError } from './ui.js';
import { limitsPanel } from './limits.js';

const ROW_H = 40; // px: every row has one line, so the window is arithmetic
const OVERSCAN = 10;
const HISTORY = 180; // samples per series (15 minutes at one per 5 s)
const SAMPLE_MS = 5000;

const COLUMNS = [
  // [key, header, cell(row) => text|Node, sort value(row)]
  ['name', 'Name', r => h('a', { href: `#/agents/${encodeURIComponent(r.id)}` }, r.name || r.id), r => (r.name || r.id).toLowerCase()],
  ['phase', 'Phase', r => badge(r.phase), r => r.phase],
  ['sleep', 'Sleep', r => sleepText(r), r => (r.asleep ? 1 : 0) * 1e15 + (r.nextWakeAt ? Date.parse(r.nextWakeAt) / 1e3 : 0)],
  ['memory', 'Memory', r => memText(r), r => r.memoryBytes ?? -1],
  ['cpu', 'CPU', r => (r.cpuPercent === undefined ? 'n/a' : `${r.cpuPercent.toFixed(1)}%`), r => r.cpuPercent ?? -1],
  ['tokens', 'Tokens today', r => num(r.tokensToday), r => r.tokensToday || 0],
  ['spend', 'Spend today', r => spendText(r), r => r.costMicrosToday || 0],
  ['budget', 'Budget left', r => budgetText(r, priceCurrency), r => r.tokensLeft ?? Infinity],
  ['engine', 'Engine', r => r.engineVersion || '', r => r.engineVersion || ''],
  ['rendering', 'Rendering', r => renderingText(r), r => r.rendering || ''],
  ['restarts', 'Crashes', r => String(r.restarts ?? 0), r => r.restarts ?? 0],
  ['errors', 'Errors (1 h)', r => errorsText(r), r => r.errorsLastHour ?? 0],
];

// priceCurrency is the platform's price table's currency as the fleet stream last said ('':
// none): the spend budgets count in it.
let priceCurrency = '';
const num = n => (n ?? 0).toLocaleString('en-US');
// budgetText is what is left of the daily token and spend budgets ('unlimited': none); spend
// counts in the platform's price table's currency.
function budgetText(r, currency, unit = '') {
  const parts = [];
  if (r.tokensLeft !== undefined) parts.push(`${num(r.tokensLeft)} of ${num(r.tokensPerDay)}${unit}`);
  if (r.costMicrosLeft !== undefined) {
    const c = r.currency || currency;
    parts.push(c ? `${money(r.costMicrosLeft, c)} of ${money(r.costMicrosPerDay, c)}` : `${r.costMicrosLeft / 1e6} of ${r.costMicrosPerDay / 1e6}`);
  }
  return parts.length ? parts.join('; ') : 'unlimited';
}

// spendText is today's spend by the platform's price table: 'n/a' without a table or before
// its first request today, then with the requests of models the table has no price for.
function spendText(r) {
  if (!r.currency) return 'n/a';
  const s = money(r.costMicrosToday, r.currency);
  return r.unpricedRequestsToday ? `${s} + ${num(r.unpricedRequestsToday)} unpriced` : s;
}
const mib = b => `${Math.round(b / 1048576).toLocaleString('en-US')} MiB`;
function memText(r) {
  if (r.memoryBytes === undefined) return 'n/a';
  return r.memoryLimitBytes ? `${mib(r.memoryBytes)} of ${mib(r.memoryLimitBytes)}` : mib(r.memoryBytes);
}
function sleepText(r) {
  if (!r.asleep) return 'awake';
  return r.nextWakeAt ? `asleep, wakes ${when(r.nextWakeAt)}` : 'asleep';
}
function errorsText(r) {
  const n = r.errorsLastHour ?? 0;
  return n ? h('span', { class: 'bad' }, num(n)) : '0';
}
function renderingText(r) {
  if (!r.rendering) return 'n/a';
  return r.rendering === 'Outdated' ? h('span', { class: 'bad' }, 'outdated') : 'current';
}

// The fleet's state: rows by id, their history for the charts, and the view's settings.
class Fleet {
  constructor() {
    this.rows = new Map();
    this.workspace = {};
    this.pools = [];
    this.metrics = 'n/a';
    this.currency = ''; // the platform's price table's ('': none)
    this.at = null;
    this.history = new Map(); // id -> {t: [], tokens: [], mem: []}
    this.ws = { t: [], tokens: [], mem: [] };
  }
  apply(name, d) {
    if (name === 'snapshot') this.rows.clear();
    for (const a of d.agents || []) this.rows.set(a.id, a);
    for (const id of d.removed || []) { this.rows.delete(id); this.history.delete(id); }
    this.workspace = d.workspace || {};
    this.pools = d.pools || [];
    this.metrics = d.metrics || 'n/a';
    this.currency = priceCurrency = d.currency || '';
    this.at = d.at;
  }
  sample() {
    const t = Date.now() / 1000;
    if (this.ws.t.length && t - this.ws.t[this.ws.t.length - 1] < 1) return false;
    let mem = 0, memKnown = false;
    for (const r of this.rows.values()) {
      let s = this.history.get(r.id);
      if (!s) this.history.set(r.id, s = { t: [], tokens: [], mem: [] });
      push(s, t, r.tokensToday || 0, r.memoryBytes === undefined ? null : r.memoryBytes / 1048576);
      if (r.memoryBytes !== undefined) { mem += r.memoryBytes; memKnown = true; }
    }
    push(this.ws, t, this.workspace.tokensToday || 0, memKnown ? mem / 1048576 : null);
    return true;
  }
}

function push(s, t, tokens, mem) {
  s.t.push(t); s.tokens.push(tokens); s.mem.push(mem);
  if (s.t.length > HISTORY) { s.t.shift(); s.tokens.shift(); s.mem.shift(); }
}

// fleetPage renders #/fleet into main until signal aborts.
export async function fleetPage(main, signal) {
  ensureStyles();
  const fleet = new Fleet();
  const view = { sort: 'name', dir: 1, text: '', phase: '', selected: null, list: [] };
  const ui = build(view);
  const limits = limitsPanel();
  fill(main, h('h1', {}, 'Fleet'), ui.summary, ui.charts, ui.tablePanel, limits.panel, ui.pools);

  let scheduled = false;
  const render = () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => { scheduled = false; paint(fleet, view, ui); });
  };
  ui.onChange = () => { recompute(fleet, view); render(); };
  ui.scroller.addEventListener('scroll', render, { passive: true });
  window.addEventListener('resize', render, { signal });

  let charts = null;
  const timer = setInterval(() => { fleet.sample(); charts?.update(fleet, view); }, SAMPLE_MS);
  signal.addEventListener('abort', () => clearInterval(timer));

  let first = true;
  const onEvent = (name, raw) => {
    if (name === 'error') { showError(new Error(raw), 'Fleet stream'); return; }
    if (name !== 'snapshot' && name !== 'update') return;
    fleet.apply(name, JSON.parse(raw));
    recompute(fleet, view);
    render();
    if (fleet.sample()) charts?.update(fleet, view);
    limits.show(fleet, view.selected);
    document.dispatchEvent(new CustomEvent('fleet:' + name, { detail: { agents: fleet.rows.size } }));
    if (first) {
      first = false;
      // Charts after the first paint: the table never waits for them.
      loadCharts(ui).then(c => { charts = c; c?.update(fleet, view); }).catch(err => showError(err, 'Charts'));
    }
  };
  ui.select = (id) => { view.selected = id; ui.selected = id; render(); charts?.update(fleet, view); limits.show(fleet, id); };
  follow(signal, onEvent, ui);
}

// follow keeps the stream open: it reconnects after a drop (not after a refusal).
async function follow(signal, onEvent, ui) {
  for (let wait = 1000; !signal.aborted;) {
    try {
      ui.live.textContent = 'Connecting…';
      await sse('/v0/fleet/stream', { signal }, (n, d) => { if (d === null) return; ui.live.textContent = 'Live'; onEvent(n, d); });
    } catch (err) {
      if (err.name === 'AbortError' || signal.aborted) return;
      if (err instanceof ApiError && err.status >= 400 && err.status < 500) { ui.live.textContent = 'Stopped'; showError(err, 'Fleet'); return; }
    }
    ui.live.textContent = 'Reconnecting…';
    await new Promise(r => setTimeout(r, wait));
    wait = Math.min(wait * 2, 15000);
  }
}

function recompute(fleet, view) {
  const text = view.text.toLowerCase();
  const col = COLUMNS.find(c => c[0] === view.sort);
  const key = col[3];
  const list = [];
  for (const r of fleet.rows.values()) {
    if (view.phase && (view.phase === 'asleep' ? !r.asleep : r.phase !== view.phase)) continue;
    if (text && !`${r.name} ${r.id} ${r.engineVersion || ''}`.toLowerCase().includes(text)) continue;
    list.push(r);
  }
  list.sort((a, b) => {
    const x = key(a), y = key(b);
    return (x < y ? -1 : x > y ? 1 : a.id < b.id ? -1 : 1) * view.dir;
  });
  view.list = list;
}

// build makes the page's fixed parts.
function build(view) {
  const ui = {};
  ui.live = h('span', { class: 'muted', id: 'fleet-live' }, 'Connecting…');
  ui.totals = h('dl', { class: 'kv' });
  ui.summary = h('section', { class: 'panel', 'aria-labelledby': 'fleet-sum' },
    h('h2', { id: 'fleet-sum' }, 'Workspace ', ui.live), ui.totals,
    h('p', { class: 'muted' }, "Tokens count input plus output through the model proxy today (UTC); Spend prices them by the platform's model price table (the manager's --model-prices; n/a without one), and counts apart the requests of models it has no price for. Crashes count the gateway's restarts since it was created; Errors (1 h) count the agent's warning events of the last hour (a crash, the agent not running, a failed restore, skill or rollout)."));
  const text = field('Filter by name, id or engine', { type: 'search', name: 'fleet-filter', autocomplete: 'off' });
  const phase = field('Phase', { name: 'fleet-phase' }, 'select');
  for (const [v, l] of [['', 'All'], ['running', 'running'], ['starting', 'starting'], ['not_running', 'not_running'], ['suspended', 'suspended'], ['asleep', 'asleep']]) phase.input.append(h('option', { value: v }, l));
  text.input.addEventListener('input', () => { view.text = text.input.value.trim(); ui.onChange(); });
  phase.input.addEventListener('change', () => { view.phase = phase.input.value; ui.onChange(); });
  ui.count = h('p', { class: 'muted', id: 'fleet-count', 'aria-live': 'polite' });
  ui.head = h('tr', { 'aria-rowindex': '1' });
  ui.body = h('tbody');
  ui.rows = new Map(); // agent id => its row (rowOf)
  ui.spacers = [0, 1].map(() => h('tr', { class: 'spacer', 'aria-hidden': 'true' }, h('td', { colspan: String(COLUMNS.length + 1) })));
  ui.empty = h('tr', {}, h('td', { colspan: String(COLUMNS.length + 1), class: 'muted' }));
  ui.table = h('table', { class: 'fleet-table', 'aria-labelledby': 'fleet-h', 'aria-rowcount': '1' }, h('thead', {}, ui.head), ui.body);
  ui.scroller = h('div', { class: 'table-wrap fleet-scroll', role: 'region', 'aria-label': 'Agents table', tabindex: '0' }, ui.table);
  ui.tablePanel = h('section', { class: 'panel', 'aria-labelledby': 'fleet-h' },
    h('h2', { id: 'fleet-h' }, 'Agents'), h('div', { class: 'row' }, text.wrap, phase.wrap), ui.count, ui.scroller);
  headers(view, ui);
  ui.wsChart = h('div', { class: 'chart' });
  ui.agentChart = h('div', { class: 'chart' });
  ui.agentCaption = h('figcaption', {}, 'One agent: choose “Select” on its row');
  ui.charts = h('section', { class: 'panel', 'aria-labelledby': 'fleet-charts' },
    h('h2', { id: 'fleet-charts' }, 'Usage since this page opened'),
    h('div', { class: 'grid' },
      h('figure', { class: 'fig' }, h('figcaption', {}, 'Workspace: tokens today and memory'), ui.wsChart),
      h('figure', { class: 'fig' }, ui.agentCaption, ui.agentChart)));
  ui.pools = h('section', { class: 'panel', 'aria-labelledby': 'fleet-pools' }, h('h2', { id: 'fleet-pools' }, 'Warm pools'), h('p', { class: 'muted' }, 'None.'));
  return ui;
}

// headers builds the sortable column headers once; paintHeaders marks the sorted one in the
// same frame as the rows it orders (a header never claims an order the rows do not show yet),
// and the buttons stay in place, so keyboard focus stays on the one pressed.
function headers(view, ui) {
  ui.sortHeads = COLUMNS.map(([key, name]) => {
    const arrow = h('span', { 'aria-hidden': 'true' });
    const th = h('th', { scope: 'col', 'aria-sort': 'none' },
      h('button', {
        type: 'button', class: 'link sort', onclick: () => {
          view.dir = view.sort === key ? -view.dir : 1;
          view.sort = key;
          ui.onChange();
        },
      }, name, arrow));
    return { key, th, arrow };
  });
  fill(ui.head, ui.sortHeads.map(s => s.th), h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Select')));
}

function paintHeaders(view, ui) {
  for (const { key, th, arrow } of ui.sortHeads) {
    const sorted = view.sort === key;
    th.setAttribute('aria-sort', sorted ? (view.dir > 0 ? 'ascending' : 'descending') : 'none');
    arrow.textContent = sorted ? (view.dir > 0 ? ' ▲' : ' ▼') : '';
  }
}

// paint renders the summary, the rows in view and the pools.
function paint(fleet, view, ui) {
  const w = fleet.workspace;
  const by = {};
  for (const r of fleet.rows.values()) by[r.phase] = (by[r.phase] || 0) + 1;
  fill(ui.totals,
    h('dt', {}, 'Agents'), h('dd', {}, `${fleet.rows.size} (${Object.entries(by).map(([p, n]) => `${n} ${p}`).join(', ') || 'none'})`),
    h('dt', {}, 'Tokens today'), h('dd', {}, `${num(w.tokensToday)} in ${num(w.requestsToday)} requests`),
    h('dt', {}, 'Spend today'), h('dd', {}, spendText(w)),
    h('dt', {}, 'Budget left'), h('dd', {}, budgetText(w, fleet.currency, ' tokens')),
    h('dt', {}, 'Memory and CPU'), h('dd', {}, fleet.metrics === 'runtime' ? 'from the runtime (n/a: not measured for that agent)' : 'n/a: this runtime does not measure them'),
    h('dt', {}, 'Updated'), h('dd', {}, when(fleet.at)));
  paintHeaders(view, ui);
  ui.count.textContent = `${view.list.length} of ${fleet.rows.size} agents`;
  ui.table.setAttribute('aria-rowcount', String(view.list.length + 1));
  const top = Math.max(0, ui.scroller.scrollTop - ui.table.tHead.offsetHeight);
  const height = ui.scroller.clientHeight || 600;
  const start = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
  const end = Math.min(view.list.length, Math.ceil((top + height) / ROW_H) + OVERSCAN);
  const rows = [];
  if (start > 0) rows.push(ui.spacers[0]);
  for (let i = start; i < end; i++) rows.push(rowOf(view.list[i], i, ui));
  if (end < view.list.length) rows.push(ui.spacers[1]);
  if (view.list.length === 0) {
    ui.empty.firstChild.textContent = fleet.rows.size ? 'No agent matches.' : 'No agents yet.';
    rows.push(ui.empty);
  }
  // Spacers stand for the rows out of view (CSSOM: the CSP allows no style attributes).
  ui.spacers[0].style.height = `${start * ROW_H}px`;
  ui.spacers[1].style.height = `${(view.list.length - end) * ROW_H}px`;
  // The body changes only when its rows do (another window, order or filter): a row in place
  // stays in place, so a press and release on its button straddling an update are one click.
  const now = ui.body.children;
  if (now.length !== rows.length || rows.some((r, i) => now[i] !== r)) ui.body.replaceChildren(...rows);
  for (const id of ui.rows.keys()) if (!fleet.rows.has(id)) ui.rows.delete(id);
  paintPools(fleet, ui);
}

// rowOf is r's row, made once per agent and updated in place: its cells, link and Select
// button stay the same elements across the stream's updates, so a click is not lost to a
// repaint between its press and release, and keyboard focus stays where it was.
function rowOf(r, i, ui) {
  let row = ui.rows.get(r.id);
  if (!row) {
    const cells = COLUMNS.map(([key]) => h('td', { 'data-col': key }));
    const button = h('button', { type: 'button', class: 'secondary small', onclick: () => ui.select(r.id) }, 'Select');
    row = { tr: h('tr', { 'data-id': r.id }, cells, h('td', {}, button)), cells, button };
    ui.rows.set(r.id, row);
  }
  row.tr.setAttribute('aria-rowindex', String(i + 2));
  COLUMNS.forEach(([, , cell], k) => setCell(row.cells[k], cell(r)));
  row.button.setAttribute('aria-label', `Select ${r.name || r.id}`);
  row.button.setAttribute('aria-pressed', String(ui.selected === r.id));
  return row.tr;
}

// setCell shows v (text or a node) in td, touching the DOM only when what it shows changes.
function setCell(td, v) {
  if (v instanceof Node) {
    if (td.childNodes.length !== 1 || !td.firstChild.isEqualNode(v)) td.replaceChildren(v);
  } else if (td.childElementCount > 0 || td.textContent !== String(v)) {
    td.textContent = String(v);
  }
}

function paintPools(fleet, ui) {
  const panel = ui.pools;
  const body = fleet.pools.length === 0 ? h('p', { class: 'muted' }, 'No warm pool serves this workspace.') :
    h('div', { class: 'table-wrap', role: 'region', 'aria-label': 'Warm pools table', tabindex: '0' }, h('table', {},
      h('thead', {}, h('tr', {}, ['Pool', 'Engine', 'Ready', 'Booting', 'Wanted', 'Claimed', 'State'].map(n => h('th', { scope: 'col' }, n)))),
      h('tbody', {}, fleet.pools.map(p => h('tr', {},
        h('td', {}, p.name), h('td', {}, p.engineVersion || ''), h('td', {}, String(p.ready)), h('td', {}, String(p.booting)),
        h('td', {}, String(p.desired)), h('td', {}, num(p.claimed)),
        h('td', {}, p.healthy ? h('span', { class: 'ok' }, 'ready') : h('span', { class: 'bad' }, 'filling')))))));
  fill(panel, panel.firstChild, body);
}

function ensureStyles() {
  for (const href of ['/console/fleet.css', '/console/vendor/uplot/uPlot.min.css']) {
    if (!document.querySelector(`link[href="${href}"]`)) document.head.append(h('link', { rel: 'stylesheet', href }));
  }
}

// loadCharts imports uPlot and makes the workspace's and the selected agent's charts.
async function loadCharts(ui) {
  const { default: uPlot } = await import('../vendor/uplot/uPlot.esm.js');
  const opts = (el) => ({
    width: Math.max(240, el.clientWidth || 480), height: 180,
    scales: { x: { time: true } },
    series: [{}, { label: 'Tokens today', stroke: '#0b5cad', width: 2, scale: 'tok' },
      { label: 'Memory (MiB)', stroke: '#1a7f37', width: 2, scale: 'mib' }],
    axes: [{}, { scale: 'tok' }, { scale: 'mib', side: 1, grid: { show: false } }],
  });
  const mk = (el) => new uPlot(opts(el), [[], [], []], el);
  const wsPlot = mk(ui.wsChart);
  let agentPlot = null, shown = null;
  return {
    update(fleet, view) {
      wsPlot.setData([fleet.ws.t, fleet.ws.tokens, fleet.ws.mem]);
      const id = view.selected;
      if (!id) return;
      const s = fleet.history.get(id) || { t: [], tokens: [], mem: [] };
      if (!agentPlot) agentPlot = mk(ui.agentChart);
      if (shown !== id) {
        shown = id;
        const r = fleet.rows.get(id);
        ui.agentCaption.textContent = `Agent ${r ? r.name || r.id : id}: tokens today and memory`;
      }
      agentPlot.setData([s.t, s.tokens, s.mem]);
    },
  };
}
