// The chat pane of the agent page: talk to the agent through POST /v0/agents/{id}/chat (the
// facade holds the agent's gateway token; this page only its own). The reply streams in as
// Server-Sent Events: text, tool calls and their results, a wake of a sleeping agent, the
// turn's model usage as the proxy counted it, a budget's refusal. Conversations are listed,
// reopened and started from the pane. Everything is rendered as text.
import { h, fill, field, when, money } from './dom.js';
import { get, agentPath, sse } from './api.js';
import { section, showError, clearError } from './ui.js';

// streamChat posts one message and calls onEvent(type, data) for each event of the turn; it
// resolves when the stream ends and rejects with ApiError when the route refuses the turn.
function streamChat(id, body, { signal, onEvent }) {
  return sse(agentPath(id, '/chat'), { method: 'POST', signal, body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } },
    (event, text) => { if (text !== null) onEvent(event, JSON.parse(text)); });
}

const usageText = (u) => (u && u.metered
  ? `${u.inputTokens} input + ${u.outputTokens} output tokens in ${u.requests} model request${u.requests === 1 ? '' : 's'}${costText(u)}`
  : 'Usage not metered (no model proxy for this agent).');
// costText is the turn's cost by the platform's price table ('' without one).
function costText(u) {
  if (!u.currency) return '';
  const unpriced = u.unpricedRequests ? ` (${u.unpricedRequests} unpriced)` : '';
  return `, ${money(u.costMicros, u.currency)}${unpriced}`;
}

// toolView is a tool call with its result, folded.
function toolView(t) {
  const result = h('pre', { class: 'out chat-tool-result' }, t.result || '');
  const el = h('details', { class: 'chat-tool' },
    h('summary', {}, `Tool call: ${t.name}`),
    t.arguments ? [h('div', { class: 'chat-label muted' }, 'Arguments'), h('pre', { class: 'out' }, t.arguments)] : null,
    h('div', { class: 'chat-label muted' }, 'Result'), result);
  el.setResult = (text) => { result.textContent = text; el.open = true; };
  return el;
}

// messageView is one message of the transcript.
function messageView(m) {
  const who = m.role === 'user' ? 'You' : 'Agent';
  const text = h('div', { class: 'chat-text' }, m.text || '');
  const tools = h('div', { class: 'chat-tools' }, (m.tools || []).map(toolView));
  const foot = h('div', { class: 'chat-foot muted' });
  const el = h('article', { class: `chat-msg chat-${m.role}`, 'aria-label': `${who} said` },
    h('div', { class: 'chat-who' }, who, m.at ? h('span', { class: 'muted' }, ` · ${when(m.at)}`) : null), tools, text, foot);
  el.parts = { text, tools, foot };
  if (m.usage) foot.textContent = usageText(m.usage);
  if (m.refused) fill(foot, h('span', { class: 'bad' }, `Refused by the budget: ${m.refused}`));
  if (m.error) fill(foot, h('span', { class: 'bad' }, `Failed: ${m.error}`));
  return el;
}

export function chatPanel(id, signal) {
  let conversation = '';
  let busy = null;
  const picker = field('Conversation', { name: 'conversation' }, 'select');
  const log = h('div', { class: 'chat-log', role: 'log', 'aria-label': 'Chat transcript', 'aria-live': 'polite', tabindex: '0' });
  const state = h('p', { class: 'muted', role: 'status', 'aria-label': 'Chat status' }, 'Send a message to start a conversation.');
  const msg = field('Message', { name: 'message', rows: '3', required: true, autocomplete: 'off' }, 'textarea');
  const send = h('button', { type: 'submit' }, 'Send');
  const form = h('form', { class: 'chat-form' }, msg.wrap, h('div', { class: 'buttons' }, send,
    h('button', { type: 'button', class: 'secondary', onclick: () => open('') }, 'New conversation')));

  const scroll = () => { log.scrollTop = log.scrollHeight; };
  const list = async () => {
    const r = await get(agentPath(id, '/chat/conversations'), { signal });
    fill(picker.input, h('option', { value: '' }, 'New conversation'),
      (r.conversations || []).map(c => h('option', { value: c.id }, `${c.title} (${c.turns} turn${c.turns === 1 ? '' : 's'}, ${when(c.updatedAt)})`)));
    picker.input.value = conversation;
  };
  // open shows a conversation's transcript ('' : a new, empty one).
  const open = async (cid) => {
    conversation = cid;
    picker.input.value = cid;
    fill(log);
    if (!cid) { state.textContent = 'New conversation.'; return; }
    const r = await get(agentPath(id, `/chat/conversations/${encodeURIComponent(cid)}`), { signal });
    for (const m of r.conversation.messages || []) log.append(messageView(m));
    state.textContent = `Conversation “${r.conversation.title}” reopened.`;
    scroll();
  };
  picker.input.addEventListener('change', () => open(picker.input.value).catch(err => showError(err, 'Chat')));

  // turn sends the message and renders the turn's events as they come.
  const turn = async (text) => {
    log.append(messageView({ role: 'user', text, at: new Date().toISOString() }));
    const reply = messageView({ role: 'assistant', text: '' });
    const tools = new Map();
    let note = null;
    state.textContent = 'Sending…';
    const on = (type, d) => {
      switch (type) {
        case 'waking':
          note = h('p', { class: 'chat-note', role: 'note' }, 'The agent is asleep: waking it…');
          log.append(note);
          state.textContent = 'Waking the agent…';
          break;
        case 'awake':
          if (note) note.textContent = 'Woke the agent.';
          state.textContent = 'The agent is awake.';
          break;
        case 'conversation':
          conversation = d.conversation.id;
          log.append(reply);
          state.textContent = 'The agent is answering…';
          break;
        case 'text':
          reply.parts.text.append(document.createTextNode(d.text));
          break;
        case 'tool': {
          const v = toolView(d.tool);
          tools.set(d.tool.id, v);
          reply.parts.tools.append(v);
          break;
        }
        case 'tool_result':
          if (tools.has(d.tool.id)) tools.get(d.tool.id).setResult(d.tool.result || '');
          break;
        case 'usage':
          reply.parts.foot.textContent = usageText(d.usage);
          break;
        case 'refused':
          reply.parts.foot.append(h('span', { class: 'bad' }, ` Refused by the budget: ${d.message}`));
          state.textContent = `Refused: ${d.message}`;
          break;
        case 'error':
          if (!reply.isConnected) log.append(reply);
          reply.parts.foot.append(h('span', { class: 'bad' }, ` Failed: ${d.message}`));
          state.textContent = `Failed: ${d.message}`;
          break;
        case 'done':
          if (!/^(Refused|Failed)/.test(state.textContent)) state.textContent = 'Done.';
          break;
      }
      scroll();
    };
    await streamChat(id, conversation ? { message: text, conversationId: conversation } : { message: text }, { signal: busy.signal, onEvent: on });
    await list();
  };

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const text = msg.input.value;
    if (!text.trim() || busy) return;
    busy = new AbortController();
    signal.addEventListener('abort', () => busy && busy.abort());
    send.disabled = true;
    msg.input.value = '';
    try {
      await turn(text);
      clearError();
    } catch (err) {
      if (err.name !== 'AbortError') { state.textContent = `Failed: ${err.message}`; showError(err, 'Chat'); }
    } finally {
      busy = null;
      send.disabled = false;
    }
  });
  // Enter sends, Shift+Enter is a new line.
  msg.input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); form.requestSubmit(); }
  });

  const panel = section('Chat', h('div', { class: 'row' }, picker.wrap), log, state, form);
  panel.classList.add('wide');
  list().catch(err => showError(err, 'Chat'));
  return panel;
}
