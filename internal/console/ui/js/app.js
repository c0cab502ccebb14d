// The console's shell: sign-in, hash routing, the overview and the agent list.
import { h, fill, field, table, badge, when } from './dom.js';
import { token, get, post, agentPath } from './api.js';
import { showError, clearError, action, toast } from './ui.js';
import { agentPage } from './agent.js';
import { filesPage } from './files.js';
import { fleetPage } from './fleet.js';

const main = document.getElementById('main');

// page is the current view's lifetime: navigation aborts its requests and stops its timers.
let page = new AbortController();

export function every(ms, fn, signal) {
  let timer = null;
  const tick = async () => {
    if (signal.aborted) return;
    try { await fn(); } catch (err) { showError(err); }
    if (!signal.aborted) timer = setTimeout(tick, ms);
  };
  signal.addEventListener('abort', () => clearTimeout(timer));
  tick();
}

function signIn() {
  document.getElementById('nav').hidden = true;
  const t = field('API token or key', { type: 'password', name: 'token', autocomplete: 'off', required: true, spellcheck: 'false' });
  const form = h('form', { class: 'panel signin', 'aria-labelledby': 'signin-h' },
    h('h1', { id: 'signin-h' }, 'Sign in'),
    h('p', {}, 'Paste a token or an API key (what you send as Authorization: Bearer). It stays in this tab only and is forgotten when you sign out or close the tab.'),
    t.wrap,
    h('button', { type: 'submit' }, 'Sign in'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    token.set(t.input.value.trim());
    try {
      await get('/v0/me');
      clearError();
      route();
    } catch (err) {
      token.clear();
      showError(err, 'Sign-in failed');
    }
  });
  fill(main, form);
  t.input.focus();
}

const PHASES = ['running', 'starting', 'not_running', 'suspended'];

async function overview(signal) {
  const me = await get('/v0/me', { signal });
  const list = h('div');
  fill(main,
    h('h1', {}, `Workspace ${me.workspace}`),
    h('p', { class: 'muted' }, `Signed in as ${me.userId} (${me.role}), plan ${me.plan || 'unknown'}, scopes ${(me.scopes || []).join(', ')}`),
    list);
  every(3000, async () => {
    const { agents = [] } = await get('/v0/agents', { signal });
    const counts = {};
    for (const a of agents) counts[a.status] = (counts[a.status] || 0) + 1;
    const phases = [...new Set([...PHASES, ...Object.keys(counts)])];
    fill(list,
      h('section', { class: 'panel', 'aria-labelledby': 'by-phase' },
        h('h2', { id: 'by-phase' }, 'Agents by phase'),
        h('p', { class: 'big' }, `${agents.length} agent${agents.length === 1 ? '' : 's'}`),
        h('p', { class: 'muted' }, 'The workspace agent limit is not exposed by the REST API; this is the count in use.'),
        h('ul', { class: 'phases' }, phases.map(p => h('li', {}, badge(p), ` ${counts[p] || 0}`)))),
      h('p', {}, h('a', { href: '#/agents' }, 'All agents →')));
  }, signal);
}

async function agentList(signal) {
  const name = field('Name', { name: 'name', required: true, maxlength: '100' });
  const tmpl = field('Template (optional)', { name: 'template' });
  const form = h('form', { class: 'panel row', 'aria-labelledby': 'new-agent' },
    h('h2', { id: 'new-agent' }, 'New agent'), name.wrap, tmpl.wrap,
    h('button', { type: 'submit' }, 'Create agent'));
  form.addEventListener('submit', action('Create agent', async () => {
    const body = { name: name.input.value.trim() };
    if (tmpl.input.value.trim()) body.template = tmpl.input.value.trim();
    const { agent } = await post('/v0/agents', body);
    name.input.value = '';
    return agent;
  }, a => `Agent ${a.name} created (${a.status})`));
  const list = h('div', { 'aria-live': 'polite', 'aria-busy': 'true' });
  fill(main, h('h1', {}, 'Agents'), form, h('section', { class: 'panel', 'aria-labelledby': 'agents-h' },
    h('h2', { id: 'agents-h' }, 'Agents (live)'), list));
  every(2500, async () => {
    const { agents = [] } = await get('/v0/agents', { signal });
    list.setAttribute('aria-busy', 'false');
    fill(list, table('Agents', [
      ['Name', a => h('a', { href: `#/agents/${encodeURIComponent(a.id)}` }, a.name)],
      ['Status', a => badge(a.status)],
      ['Engine', a => a.engineVersion || a.engine],
      ['Restarts', a => String(a.restarts ?? 0)],
      ['Created', a => when(a.createdAt)],
    ], agents, 'No agents yet.'));
  }, signal);
}

async function route() {
  page.abort();
  page = new AbortController();
  const signal = page.signal;
  if (!token.get()) return signIn();
  document.getElementById('nav').hidden = false;
  const hash = location.hash.replace(/^#/, '') || '/';
  const parts = hash.split('/').filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll('#nav a')) {
    const target = a.getAttribute('href').slice(1);
    if ((target === '/' && parts.length === 0) || (target !== '/' && hash.startsWith(target))) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  clearError();
  fill(main, h('p', {}, 'Loading…'));
  try {
    if (parts.length === 0) await overview(signal);
    else if (parts[0] === 'agents' && parts.length === 1) await agentList(signal);
    else if (parts[0] === 'agents') await agentPage(main, parts[1], signal, every);
    else if (parts[0] === 'files') await filesPage(main, signal);
    else if (parts[0] === 'fleet') await fleetPage(main, signal);
    else fill(main, h('h1', {}, 'Not found'), h('p', {}, 'This console page does not exist.'));
  } catch (err) {
    if (err.name === 'AbortError') return;
    if (err.status === 401) { token.clear(); showError(err, 'Signed out'); return signIn(); }
    fill(main, h('h1', {}, 'Could not load this page'));
    showError(err);
  }
  main.focus({ preventScroll: true });
}

document.getElementById('signout').addEventListener('click', () => {
  token.clear();
  page.abort();
  toast('Signed out');
  location.hash = '#/';
  signIn();
});
window.addEventListener('hashchange', route);
route();
