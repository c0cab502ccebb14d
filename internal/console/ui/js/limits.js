// Budgets and limits on the fleet page: the workspace's model budget, and the selected
// agent's budget and memory limit. Every change is the REST call (PUT .../budget,
// PUT .../resources), so the answer, a refusal included, is the REST door's own.
import { h, fill, field } from './dom.js';
import { put, agentPath } from './api.js';
import { action } from './ui.js';

const numberField = (label, name) => field(label, { type: 'number', step: '1', name, inputmode: 'numeric' });
// A spend is entered in the price table's currency and sent in millionths of it.
const spendField = (label, name) => field(label, { type: 'number', step: '0.000001', min: '0', name, inputmode: 'decimal' });
const budgetBody = (tokens, rpm, spend) => ({
  tokensPerDay: Number(tokens.input.value || 0), requestsPerMinute: Number(rpm.input.value || 0),
  costMicrosPerDay: Math.round(Number(spend.input.value || 0) * 1e6),
});
const spendValue = (micros) => String((micros || 0) / 1e6);

// limitsPanel returns the panel and show(fleet, id), which fills the forms for the workspace
// and the agent id (when the selection changes).
export function limitsPanel() {
  const wsTokens = numberField('Workspace tokens per day (0: unlimited)', 'ws-tokens');
  const wsRPM = numberField('Workspace requests per minute (0: unlimited)', 'ws-rpm');
  const wsSpend = spendField('Workspace spend per day, in the price table\'s currency (0: unlimited)', 'ws-spend');
  const wsForm = h('form', { class: 'row', 'aria-label': 'Workspace budget' }, wsTokens.wrap, wsRPM.wrap, wsSpend.wrap,
    h('button', { type: 'submit' }, 'Save workspace budget'));
  wsForm.addEventListener('submit', action('Workspace budget',
    () => put('/v0/workspace/budget', budgetBody(wsTokens, wsRPM, wsSpend)), 'Workspace budget saved'));

  const heading = h('h3', { id: 'limits-agent-h' }, 'Agent: select one in the table');
  const tokens = numberField('Agent tokens per day (0: unlimited)', 'agent-tokens');
  const rpm = numberField('Agent requests per minute (0: unlimited)', 'agent-rpm');
  const spend = spendField('Agent spend per day, in the price table\'s currency (0: unlimited)', 'agent-spend');
  const mem = field('Memory limit (e.g. 1Gi; empty: the platform default)', { name: 'agent-memory', autocomplete: 'off', spellcheck: 'false' });
  const budgetForm = h('form', { class: 'row', 'aria-label': 'Agent budget' }, tokens.wrap, rpm.wrap, spend.wrap,
    h('button', { type: 'submit' }, 'Save agent budget'));
  const memForm = h('form', { class: 'row', 'aria-label': 'Agent memory limit' }, mem.wrap,
    h('button', { type: 'submit' }, 'Save memory limit'));
  const agentPart = h('div', { hidden: true }, budgetForm, memForm);
  let agentId = null;
  budgetForm.addEventListener('submit', action('Agent budget',
    () => put(agentPath(agentId, '/budget'), budgetBody(tokens, rpm, spend)), 'Agent budget saved'));
  memForm.addEventListener('submit', action('Memory limit',
    () => put(agentPath(agentId, '/resources'), { memoryLimit: mem.input.value.trim() }),
    r => (r.memoryLimit ? `Memory limit ${r.memoryLimit} saved: the gateway restarts with it` : 'Memory limit back to the default')));

  const panel = h('section', { class: 'panel', 'aria-labelledby': 'limits-h' },
    h('h2', { id: 'limits-h' }, 'Budgets and limits'),
    h('p', { class: 'muted' }, 'Admins and owners can change them; the REST API answers for everyone else.'),
    wsForm, heading, agentPart);

  let filledWS = false;
  return {
    panel,
    show(fleet, id) {
      if (!filledWS && fleet.at) {
        filledWS = true;
        wsTokens.input.value = String(fleet.workspace.tokensPerDay || 0);
        wsRPM.input.value = String(fleet.workspace.requestsPerMinute || 0);
        wsSpend.input.value = spendValue(fleet.workspace.costMicrosPerDay);
      }
      if (!id || id === agentId) return;
      agentId = id;
      const r = fleet.rows.get(id) || {};
      fill(heading, `Agent: ${r.name || id}`);
      tokens.input.value = String(r.tokensPerDay || 0);
      rpm.input.value = String(r.requestsPerMinute || 0);
      spend.input.value = spendValue(r.costMicrosPerDay);
      mem.input.value = '';
      agentPart.hidden = false;
    },
  };
}
