// The agent page's other panels: secrets, skills, channels, domains, snapshots and tasks.
import { h, fill, field, table, badge, when } from './dom.js';
import { get, post, del, agentPath } from './api.js';
import { action, section, showError } from './ui.js';

// panel makes a section whose body reloads with load(); it returns [section, reload].
function panel(title, load, ...extra) {
  const body = h('div', { 'aria-live': 'polite' });
  const reload = async () => {
    try { fill(body, await load()); } catch (err) {
      fill(body, h('p', { class: 'bad' }, err.message));
      if (err.status !== 403 && err.status !== 404) showError(err, title);
    }
  };
  return [section(title, ...extra, body), reload];
}

function secrets(id) {
  const pick = field('Workspace secret', { name: 'secret' }, 'select');
  let reload;
  const attach = h('form', { class: 'row' }, pick.wrap, h('button', { type: 'submit' }, 'Attach'));
  attach.addEventListener('submit', action('Attach secret', async () => {
    if (!pick.input.value) throw new Error('Choose a secret first (create one with POST /v0/secrets).');
    await post(agentPath(id, '/secrets'), { secretIds: [pick.input.value] });
    await reload();
  }, 'Secret attached'));
  const [sec, r] = panel('Secrets', async () => {
    const [{ secrets: mine = [] }, { secrets: all = [] }] = await Promise.all([
      get(agentPath(id, '/secrets')), get('/v0/secrets').catch(() => ({ secrets: [] }))]);
    fill(pick.input, h('option', { value: '' }, '—'),
      all.filter(s => !mine.some(m => m.id === s.id)).map(s => h('option', { value: s.id }, `${s.name}${s.provider ? ` (${s.provider})` : ''}`)));
    return table('Attached secrets', [
      ['Name', s => s.name], ['Env', s => s.envName || ''], ['Provider', s => s.provider || ''],
      ['', s => h('button', { type: 'button', class: 'secondary', 'aria-label': `Detach ${s.name}`,
        onclick: action('Detach secret', async () => { await del(agentPath(id, `/secrets/${encodeURIComponent(s.id)}`)); await reload(); }, 'Secret detached') }, 'Detach')],
    ], mine, 'No secrets attached. Values are never shown.');
  }, attach);
  reload = r;
  return [sec, reload];
}

function skills(id) {
  const cid = field('Installed skill CID', { name: 'skillCid', autocomplete: 'off' });
  let reload;
  const form = h('form', { class: 'row' }, cid.wrap, h('button', { type: 'submit' }, 'Attach skill'));
  form.addEventListener('submit', action('Attach skill', async () => {
    await post(agentPath(id, '/skills'), { skillCids: [cid.input.value.trim()] });
    cid.input.value = '';
    await reload();
  }, 'Skill attached'));
  const [sec, r] = panel('Skills', async () => {
    const { skills: list = [] } = await get(agentPath(id, '/skills'));
    return table('Attached skills', [
      ['Skill', s => s.displayName || s.slug], ['Version', s => s.version], ['CID', s => h('code', {}, s.cid)],
      ['', s => h('button', { type: 'button', class: 'secondary', 'aria-label': `Detach ${s.slug}`,
        onclick: action('Detach skill', async () => { await del(agentPath(id, `/skills/${encodeURIComponent(s.id)}`)); await reload(); }, 'Skill detached') }, 'Detach')],
    ], list, 'No skills attached.');
  }, form);
  reload = r;
  return [sec, reload];
}

function channels(id) {
  const kind = field('Channel', { name: 'channel' }, 'select');
  for (const c of ['telegram', 'slack', 'discord', 'whatsapp']) kind.input.append(h('option', { value: c }, c));
  const bot = field('Bot token', { name: 'botToken', type: 'password', autocomplete: 'off' });
  const app = field('App token (Slack)', { name: 'appToken', type: 'password', autocomplete: 'off' });
  let reload;
  const form = h('form', { class: 'row' }, kind.wrap, bot.wrap, app.wrap, h('button', { type: 'submit' }, 'Set up channel'));
  form.addEventListener('submit', action('Set up channel', async () => {
    const body = { enabled: true };
    if (bot.input.value) body.botToken = bot.input.value;
    if (app.input.value) body.appToken = app.input.value;
    await post(agentPath(id, `/channels/${kind.input.value}`), body);
    bot.input.value = app.input.value = '';
    await reload();
  }, 'Channel set up'));
  const [sec, r] = panel('Channels', async () => {
    const { channels: map = {} } = await get(agentPath(id, '/channels'));
    const rows = Object.entries(map).map(([type, c]) => ({ type, ...c }));
    return table('Channels', [
      ['Channel', c => c.type], ['Configured', c => (c.configured ? 'yes' : 'no')], ['Enabled', c => (c.enabled ? 'yes' : 'no')],
      ['Token', c => c.botTokenHint || ''], ['Status', c => c.statusMessage || c.statusReason || ''],
      ['', c => c.configured ? h('button', { type: 'button', class: 'secondary', 'aria-label': `Remove ${c.type}`,
        onclick: action('Remove channel', async () => { await del(agentPath(id, `/channels/${c.type}`)); await reload(); }, 'Channel removed') }, 'Remove') : ''],
    ], rows, 'No channels.');
  }, form);
  reload = r;
  return [sec, reload];
}

function domains(id) {
  const sub = field('Subdomain', { name: 'subdomain', autocomplete: 'off' });
  const custom = field('or custom domain', { name: 'customDomain', autocomplete: 'off' });
  let reload;
  const form = h('form', { class: 'row' }, sub.wrap, custom.wrap, h('button', { type: 'submit' }, 'Add domain'));
  form.addEventListener('submit', action('Add domain', async () => {
    const body = {};
    if (sub.input.value.trim()) body.subdomain = sub.input.value.trim();
    if (custom.input.value.trim()) body.customDomain = custom.input.value.trim();
    await post(agentPath(id, '/domains'), body);
    sub.input.value = custom.input.value = '';
    await reload();
  }, 'Domain added'));
  const [sec, r] = panel('Domains', async () => {
    const { domains: list = [] } = await get(agentPath(id, '/domains'));
    return table('Domains', [
      ['Host', d => d.host || d.customDomain || d.subdomain], ['Status', d => badge(d.status)],
      ['TXT record to create', d => d.verification && !d.verified
        ? h('code', { class: 'wrap' }, `${d.verification.name} ${d.verification.type} "${d.verification.value}"`) : '—'],
      ['', d => h('span', { class: 'buttons' },
        d.verified ? '' : h('button', { type: 'button', class: 'secondary', 'aria-label': `Verify ${d.host || d.id}`,
          onclick: action('Verify domain', async () => { await post(agentPath(id, `/domains/${encodeURIComponent(d.id)}/verify`)); await reload(); }, 'Verification checked') }, 'Verify'),
        h('button', { type: 'button', class: 'secondary', 'aria-label': `Delete ${d.host || d.id}`,
          onclick: action('Delete domain', async () => { await del(agentPath(id, `/domains/${encodeURIComponent(d.id)}`)); await reload(); }, 'Domain deleted') }, 'Delete'))],
    ], list, 'No domains.');
  }, form);
  reload = r;
  return [sec, reload];
}

function snapshots(id) {
  let reload;
  const sync = h('button', { type: 'button', onclick: action('Take snapshot', async () => {
    const { snapshot } = await post(agentPath(id, '/snapshots/sync'));
    await reload();
    return snapshot;
  }, s => `Snapshot ${s.cid} taken`) }, 'Take snapshot');
  const [sec, r] = panel('Snapshots', async () => {
    const { snapshots: list = [] } = await get(agentPath(id, '/snapshots'));
    return table('Snapshots', [
      ['Taken', s => when(s.createdAt)], ['CID', s => h('code', { class: 'wrap' }, s.cid)], ['Size', s => `${s.size} B`],
      ['', s => h('button', { type: 'button', class: 'secondary', 'aria-label': `Reset to this snapshot, ${s.cid}`,
        onclick: action('Reset to snapshot', async () => {
          if (!confirm('Reset the agent\'s home to this snapshot? Later changes are lost.')) return;
          await post(agentPath(id, '/snapshots/reset'), { snapshotCid: s.cid });
          await reload();
        }, 'Reset to snapshot') }, 'Reset to this')],
    ], list, 'No snapshots yet.');
  }, h('div', { class: 'buttons' }, sync));
  reload = r;
  return [sec, reload];
}

function tasks(id) {
  const name = field('Task name', { name: 'taskName', autocomplete: 'off' });
  const kind = field('Schedule', { name: 'kind' }, 'select');
  kind.input.append(h('option', { value: 'cron' }, 'cron expression'), h('option', { value: 'every' }, 'every N ms'));
  const when_ = field('Expression or interval', { name: 'schedule', placeholder: '0 9 * * *', autocomplete: 'off' });
  const msg = field('Message to the agent', { name: 'message', autocomplete: 'off' });
  let reload;
  const form = h('form', { class: 'row' }, name.wrap, kind.wrap, when_.wrap, msg.wrap, h('button', { type: 'submit' }, 'Create task'));
  form.addEventListener('submit', action('Create task', async () => {
    const schedule = kind.input.value === 'every' ? { kind: 'every', everyMs: Number(when_.input.value) } : { kind: 'cron', expr: when_.input.value };
    await post(agentPath(id, '/tasks'), { name: name.input.value, schedule, payload: { kind: 'agentTurn', message: msg.input.value } });
    await reload();
  }, 'Task created'));
  const [sec, r] = panel('Tasks', async () => {
    const { tasks: list = [] } = await get(agentPath(id, '/tasks'));
    return table('Tasks', [
      ['Name', t => t.name], ['Schedule', t => t.schedule.expr || (t.schedule.everyMs ? `every ${t.schedule.everyMs} ms` : t.schedule.at || t.schedule.kind)],
      ['Enabled', t => (t.enabled ? 'yes' : 'no')], ['Next run', t => when(t.nextRunAt)],
    ], list, 'No tasks.');
  }, form);
  reload = r;
  return [sec, reload];
}

// partPanels returns the sections and loads each once (they reload after their own actions).
export function partPanels(id) {
  const all = [secrets(id), skills(id), channels(id), domains(id), snapshots(id), tasks(id)];
  for (const [, reload] of all) reload();
  return all.map(([sec]) => sec);
}
