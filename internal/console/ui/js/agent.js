// The agent page: status and conditions, lifecycle actions, console exec, config editor and
// logs; the other panels (secrets, skills, ...) are in parts.js.
import { h, fill, field, badge, when } from './dom.js';
import { get, post, put, del, agentPath, streamLogs, ApiError } from './api.js';
import { action, section, showError, clearError, toast } from './ui.js';
import { partPanels } from './parts.js';
import { chatPanel } from './chat.js';

function statusPanel(box, a) {
  const rows = [
    ['Status', badge(a.status)],
    ['Reason', a.statusReason || '—'],
    ['Message', a.statusMessage || '—'],
    ['Suspended', a.suspended ? 'yes' : 'no'],
    ['Stopped', a.stopped ? 'yes' : 'no'],
    ['Restarts', String(a.restarts ?? 0)],
    ['Engine', `${a.engine || ''} ${a.engineVersion || ''}`.trim()],
    ['Endpoint', a.endpoint || '—'],
    ['Snapshot', a.snapshotCid || '—'],
    ['Next wake', a.nextWakeAt ? when(a.nextWakeAt) : '—'],
    ['Created', when(a.createdAt)],
  ];
  fill(box, h('dl', { class: 'kv' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
}

function consolePanel(id) {
  const cmd = field('Command', { name: 'command', required: true, autocomplete: 'off', spellcheck: 'false' });
  const cwd = field('Working directory (optional)', { name: 'cwd', autocomplete: 'off' });
  const out = h('pre', { class: 'out', role: 'status', 'aria-live': 'polite', 'aria-label': 'Command output' });
  const form = h('form', { class: 'row' }, cmd.wrap, cwd.wrap, h('button', { type: 'submit' }, 'Run'));
  form.addEventListener('submit', action('Run command', async () => {
    const body = { command: cmd.input.value };
    if (cwd.input.value.trim()) body.cwd = cwd.input.value.trim();
    const r = await post(agentPath(id, '/console/exec'), body);
    fill(out, `$ ${r.command}\n`, r.stdout || '', r.stderr ? `\n[stderr]\n${r.stderr}` : '',
      `\n[exit ${r.exitCode}${r.timedOut ? ', timed out' : ''}${r.truncated ? ', truncated' : ''}]`);
  }));
  return section('Console', form, out);
}

// engineIssues reads the engine's validator output (openclaw's `config validate --json`:
// {"valid": false, "issues": [{"path", "message"}], "error": {"message"}}) as lines of text.
function engineIssues(output) {
  try {
    const v = JSON.parse(output);
    const lines = (v.issues || []).map(i => (i.path && i.path !== '<root>' ? `${i.path}: ${i.message}` : i.message));
    if (lines.length) return lines;
    if (v.error && v.error.message) return [v.error.message];
  } catch { /* not JSON: show it as it is */ }
  return [String(output || 'invalid config').trim()];
}

function configPanel(id) {
  const ed = field('Config (JSON)', { name: 'config', rows: '14', spellcheck: 'false', class: 'code' }, 'textarea');
  const result = h('div', { class: 'result', role: 'status', 'aria-live': 'polite' });
  const say = (ok, ...msg) => fill(result, h('p', { class: ok ? 'ok' : 'bad' }, ...msg));
  const load = async () => {
    const { config } = await get(agentPath(id, '/config'));
    ed.input.value = JSON.stringify(config, null, 2);
  };
  const parse = () => {
    try { return JSON.parse(ed.input.value); } catch (e) { throw new ApiError(400, `Invalid JSON: ${e.message}`); }
  };
  // validate asks the engine; a refusal shows the engine's own message.
  const validate = async () => {
    const config = parse();
    const r = await post(agentPath(id, '/config/validate'), { config });
    if (!r.valid) {
      const issues = engineIssues(r.output);
      say(false, 'Refused by the engine:', h('ul', {}, issues.map(i => h('li', {}, i))));
      throw new ApiError(400, `Config refused by the engine: ${issues.join('; ')}`);
    }
    say(true, 'Valid.');
    return config;
  };
  const save = async () => {
    const config = await validate();
    try {
      await put(agentPath(id, '/config'), { config });
    } catch (err) {
      const issues = err.body && err.body.issues;
      if (Array.isArray(issues)) say(false, `${err.message}:`, h('ul', {}, issues.map(i => h('li', {}, typeof i === 'string' ? i : `${i.path || ''}: ${i.message || JSON.stringify(i)}`))));
      throw err;
    }
    say(true, 'Saved.');
  };
  const panel = section('Config',
    ed.wrap,
    h('div', { class: 'buttons' },
      h('button', { type: 'button', onclick: action('Validate config', validate) }, 'Validate'),
      h('button', { type: 'button', onclick: action('Save config', save, 'Config saved') }, 'Save'),
      h('button', { type: 'button', class: 'secondary', onclick: action('Reload config', load) }, 'Reload')),
    result);
  load().catch(err => showError(err, 'Config'));
  return panel;
}

function logsPanel(id, signal) {
  const out = h('pre', { class: 'out logs', role: 'log', 'aria-label': 'Gateway logs', tabindex: '0' });
  const state = h('p', { class: 'muted', role: 'status' }, 'Not following.');
  let follow = null;
  const add = (line) => {
    out.append(document.createTextNode(line + '\n'));
    while (out.childNodes.length > 1000) out.firstChild.remove();
    out.scrollTop = out.scrollHeight;
  };
  const tail = async () => {
    const r = await get(agentPath(id, '/logs?tail=200'));
    if (follow) stop();
    fill(out);
    for (const l of r.lines || []) add(l);
    state.textContent = `The last ${(r.lines || []).length} lines.`;
  };
  const btn = h('button', { type: 'button', 'aria-pressed': 'false' }, 'Follow');
  const stop = () => { if (follow) follow.abort(); follow = null; btn.textContent = 'Follow'; btn.setAttribute('aria-pressed', 'false'); };
  btn.addEventListener('click', () => {
    if (follow) { stop(); state.textContent = 'Stopped following.'; return; }
    follow = new AbortController();
    const mine = follow;
    signal.addEventListener('abort', () => mine.abort());
    btn.textContent = 'Stop following';
    btn.setAttribute('aria-pressed', 'true');
    fill(out);
    state.textContent = 'Following…';
    streamLogs(id, { signal: mine.signal, onLine: add, onError: (m) => { state.textContent = `Log error: ${m}`; } })
      .then(() => { if (follow === mine) { stop(); state.textContent = 'The log stream ended.'; } })
      .catch(err => { if (follow === mine) stop(); if (err.name !== 'AbortError') { state.textContent = `Log error: ${err.message}`; showError(err, 'Logs'); } });
  });
  return section('Logs', h('div', { class: 'buttons' },
    h('button', { type: 'button', onclick: action('Logs', tail) }, 'Show last lines'), btn), state, out);
}

export async function agentPage(main, id, signal, every) {
  const { agent } = await get(agentPath(id), { signal });
  const title = h('h1', {}, agent.emoji ? `${agent.emoji} ` : '', agent.name);
  const status = h('div');
  const act = (label, path, msg) => h('button', { type: 'button', onclick: action(label, async () => {
    const r = await post(agentPath(id, path));
    if (r && r.agent) statusPanel(status, r.agent);
  }, msg) }, label);
  const remove = h('button', { type: 'button', class: 'danger', onclick: action('Delete', async () => {
    if (!confirm(`Delete agent ${agent.name}? Its home is removed.`)) return;
    await del(agentPath(id));
    toast(`Agent ${agent.name} deleted`);
    location.hash = '#/agents';
  }) }, 'Delete');
  fill(main,
    h('p', {}, h('a', { href: '#/agents' }, '← Agents')),
    title,
    h('div', { class: 'grid' },
      section('Status', status, h('div', { class: 'buttons' },
        act('Restart', '/restart', 'Restarted'), act('Suspend', '/suspend', 'Suspended'),
        act('Resume', '/resume', 'Resumed'), remove)),
      consolePanel(id),
      chatPanel(id, signal),
      configPanel(id),
      logsPanel(id, signal),
      ...partPanels(id, signal)));
  statusPanel(status, agent);
  clearError();
  every(2500, async () => {
    try {
      const r = await get(agentPath(id), { signal });
      statusPanel(status, r.agent);
    } catch (err) {
      if (err.name !== 'AbortError' && err.status === 404) fill(status, h('p', { class: 'bad' }, 'This agent no longer exists.'));
      else throw err;
    }
  }, signal);
}
