// The console's chat pane in a real browser (Debian's chromium driven by playwright-core),
// against a platform the Go test (chat_test.go) started with the engine double and a fake
// model provider behind the model proxy. The tests run in order and share one browser.
//
// Env: AGENTPLANE_URL, AGENTPLANE_TOKEN (every scope), CHROMIUM, SCREENSHOT_DIR,
// CHAT_AGENT (an agent to talk to), BUDGET_AGENT (an agent whose model budget is one token a
// day: its first model request is admitted, as a budget admits requests while it is not spent,
// and every later one refused).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { seriousViolations } from './axe.mjs';

const URL = process.env.AGENTPLANE_URL;
const TOKEN = process.env.AGENTPLANE_TOKEN;
const SHOTS = process.env.SCREENSHOT_DIR;
const AGENT = process.env.CHAT_AGENT;
const BUDGET_AGENT = process.env.BUDGET_AGENT;
const REPLY = 'pong from the fake provider'; // providertest.Reply
const T = 30_000; // an upper bound on waits, not a timing assertion

let browser, page;

async function api(method, p, body) {
  const resp = await fetch(URL + p, {
    method, headers: { Authorization: `Bearer ${TOKEN}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: resp.status, body: await resp.json().catch(() => null) };
}

const chat = () => page.getByRole('region', { name: 'Chat' });
const transcript = () => chat().getByRole('log', { name: 'Chat transcript' });

async function openAgent(id) {
  await page.goto(`${URL}/console#/agents/${encodeURIComponent(id)}`);
  await page.getByRole('heading', { level: 1 }).filter({ hasNotText: 'Loading' }).first().waitFor({ timeout: T });
  await chat().getByLabel('Conversation').locator('option').first().waitFor({ state: 'attached', timeout: T });
}

async function send(text) {
  await chat().getByLabel('Message').fill(text);
  await chat().getByRole('button', { name: 'Send' }).click();
}

// replies counts the agent's messages in the transcript that hold the fake provider's reply.
const replies = () => page.evaluate((r) => [...document.querySelectorAll('.chat-assistant .chat-text')]
  .filter((e) => e.textContent === r).length, REPLY);

before(async () => {
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox'] });
  // bypassCSP: the accessibility check injects axe-core (axe.mjs).
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
  page = await context.newPage();
  await page.goto(`${URL}/console`);
  await page.getByLabel('API token or key').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: /^Workspace / }).waitFor({ timeout: T });
});

after(async () => {
  await browser?.close();
});

test('set up: the agents hold an openai key (served by the proxy) and their gateways serve chat', async () => {
  const secret = await api('POST', '/v0/secrets', { name: 'OPENAI_API_KEY', value: 'sk-browser-test', provider: 'openai' });
  assert.equal(secret.status, 201, JSON.stringify(secret.body));
  for (const id of [AGENT, BUDGET_AGENT]) {
    const attach = await api('POST', `/v0/agents/${id}/secrets`, { secretIds: [secret.body.secret.id] });
    assert.equal(attach.status, 200, JSON.stringify(attach.body));
    const { body } = await api('GET', `/v0/agents/${id}/config`);
    const config = body.config;
    config.gateway = { ...config.gateway, http: { endpoints: { chatCompletions: { enabled: true } } } };
    config.agents = { ...config.agents, defaults: { ...(config.agents || {}).defaults, model: { primary: 'openai/gpt-test' } } };
    const put = await api('PUT', `/v0/agents/${id}/config`, { config });
    assert.equal(put.status, 200, JSON.stringify(put.body));
  }
});

test('a chat turn streams the reply and shows the tool call with its result and the turn\'s tokens and cost', async () => {
  await openAgent(AGENT);
  await send('please use a tool');
  const tool = transcript().locator('details', { hasText: 'Tool call: read_notes' });
  await tool.waitFor({ timeout: T });
  await transcript().locator('.chat-assistant .chat-text', { hasText: REPLY }).waitFor({ timeout: T });
  await tool.getByText('fakeclaw ran read_notes').waitFor({ timeout: T });
  assert.match(await tool.textContent(), /"file":"notes.md"/);
  // The platform's price table (chat_test.go) prices gpt-test at 2 and 8 USD per million
  // input and output tokens: 25 * 2 + 15 * 8 = 170 millionths of a dollar.
  await transcript().getByText('25 input + 15 output tokens in 1 model request, $0.00017').waitFor({ timeout: T });
  await chat().getByRole('status', { name: 'Chat status' }).getByText('Done.').waitFor({ timeout: T });
  // The page never held the gateway token.
  const gw = await api('GET', `/v0/agents/${AGENT}/gateway-token`);
  assert.ok(!(await page.content()).includes(gw.body.token));
  await chat().getByLabel('Message').fill('What is in my notes?');
  await chat().scrollIntoViewIfNeeded();
  await chat().screenshot({ path: path.join(SHOTS, 'chat.png') });
});

test('conversations: start a new one, then reopen the first', async () => {
  await chat().getByLabel('Message').fill('');
  await chat().getByRole('button', { name: 'New conversation' }).click();
  await chat().getByRole('status', { name: 'Chat status' }).getByText('New conversation.').waitFor({ timeout: T });
  assert.equal(await replies(), 0);
  const picker = chat().getByLabel('Conversation');
  const first = picker.locator('option', { hasText: 'please use a tool' });
  await picker.selectOption(await first.getAttribute('value'));
  await chat().getByRole('status', { name: 'Chat status' }).getByText(/reopened/).waitFor({ timeout: T });
  await transcript().locator('.chat-assistant .chat-text', { hasText: REPLY }).waitFor({ timeout: T });
  await transcript().getByText('Tool call: read_notes').waitFor({ timeout: T });
});

test('accessibility: axe-core finds no serious or critical violation on the agent page with its chat', async () => {
  // A conversation with a tool call (its details open) and the turn's usage is on the page.
  await transcript().locator('details', { hasText: 'Tool call: read_notes' }).evaluate((el) => { el.open = true; });
  const { serious, found } = await seriousViolations(page);
  assert.deepEqual(serious, [], JSON.stringify(found, null, 2));
});

test('a message to a sleeping agent wakes it, and the pane says so', async () => {
  const slept = await api('POST', `/v0/agents/${AGENT}/suspend`);
  assert.equal(slept.status, 200, JSON.stringify(slept.body));
  assert.equal(slept.body.agent.status, 'suspended');
  const before = await replies();
  await send('are you awake?');
  await transcript().getByRole('note').getByText('Woke the agent.').waitFor({ timeout: T });
  await page.waitForFunction(([r, n]) => [...document.querySelectorAll('.chat-assistant .chat-text')]
    .filter((e) => e.textContent === r).length > n, [REPLY, before], { timeout: T });
  const { body } = await api('GET', `/v0/agents/${AGENT}`);
  assert.equal(body.agent.status, 'running');
});

test('a turn the budget refuses says why', async () => {
  await openAgent(BUDGET_AGENT);
  await send('spend my budget');
  await transcript().locator('.chat-assistant .chat-text', { hasText: REPLY }).waitFor({ timeout: T });
  await chat().getByRole('status', { name: 'Chat status' }).getByText('Done.').waitFor({ timeout: T });
  await send('and some more');
  await transcript().getByText(/Refused by the budget: .*agent budget exceeded: 1 tokens per day/).waitFor({ timeout: T });
  await chat().getByRole('status', { name: 'Chat status' }).getByText(/^Refused: /).waitFor({ timeout: T });
  assert.equal(await replies(), 1);
  assert.equal(await page.getByRole('alert').isVisible(), false, 'a refusal is the turn\'s answer, not a page error');
});

test('the fleet shows what the agent\'s turns cost today', async () => {
  await page.goto(`${URL}/console#/fleet`);
  await page.getByRole('heading', { name: 'Fleet', level: 1 }).waitFor({ timeout: T });
  // The model proxy writes usage to status every 30 s (--usage-flush-interval): the wait's
  // bound covers one interval and the stream's next read.
  const spend = page.locator(`tr[data-id="${AGENT}"] td[data-col="spend"]`);
  await spend.filter({ hasText: /^\$0\.000\d+$/ }).waitFor({ timeout: 3 * T });
  const { body } = await api('GET', '/v0/fleet');
  const row = body.agents.find((a) => a.id === AGENT);
  assert.equal(row.currency, 'USD');
  assert.ok(row.costMicrosToday > 0 && row.costMicrosToday % 170 === 0, `each turn cost 170 micro-dollars: ${row.costMicrosToday}`);
  const dollars = (row.costMicrosToday / 1e6).toFixed(6).replace(/0+$/, '');
  assert.equal(await spend.textContent(), `$${dollars}`);
  // A spend budget: what is left of it, in the price table's currency.
  const set = await api('PUT', `/v0/agents/${AGENT}/budget`, { costMicrosPerDay: 5_000_000 });
  assert.equal(set.status, 200, JSON.stringify(set.body));
  await page.locator(`tr[data-id="${AGENT}"] td[data-col="budget"]`).filter({ hasText: /^\$4\.99\d* of \$5\.00$/ }).waitFor({ timeout: T });
});
