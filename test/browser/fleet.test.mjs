// The console's fleet view in a real browser (Debian's chromium driven by playwright-core),
// against a platform the Go test (fleet_test.go) started with the engine double. The tests run
// in order and share one browser, one page and three agents.
//
// Env: AGENTPLANE_URL, AGENTPLANE_TOKEN (every scope), CHROMIUM, SCREENSHOT_DIR.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { seriousViolations } from './axe.mjs';

const URL = process.env.AGENTPLANE_URL;
const TOKEN = process.env.AGENTPLANE_TOKEN;
const SHOTS = process.env.SCREENSHOT_DIR;
const NAMES = ['fleet-alpha', 'fleet-beta', 'fleet-gamma'];
const T = 30_000; // an upper bound on waits, not a timing assertion

let browser, context, page;
const ids = {};
const requests = [];

async function api(method, p, body) {
  const resp = await fetch(URL + p, {
    method, headers: { Authorization: `Bearer ${TOKEN}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: resp.status, body: await resp.json().catch(() => null) };
}

const row = (name) => page.locator(`tr[data-id="${ids[name]}"]`);
const cell = (name, col) => row(name).locator(`td[data-col="${col}"]`);

before(async () => {
  const made = await Promise.all(NAMES.map((name) => api('POST', '/v0/agents', { name })));
  for (const [i, r] of made.entries()) {
    assert.equal(r.status, 201, JSON.stringify(r.body));
    ids[NAMES[i]] = r.body.agent.id;
  }
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox'] });
  // The accessibility check injects axe-core into the page, which the console's CSP forbids.
  context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
  page = await context.newPage();
  page.on('request', (req) => requests.push(new globalThis.URL(req.url()).pathname));
  page.on('pageerror', (e) => console.log(`the page threw: ${e.message}`)); // a broken module shows no page at all
});

after(async () => {
  await browser?.close();
});

test('the fleet lists every agent from one stream, with its phase and usage columns', async () => {
  await page.goto(`${URL}/console`);
  await page.getByLabel('API token or key').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: /^Workspace / }).waitFor({ timeout: T });
  requests.length = 0; // the overview's own requests before
  await page.getByRole('link', { name: 'Fleet' }).click();
  await page.getByRole('heading', { name: 'Fleet', level: 1 }).waitFor({ timeout: T });
  for (const name of NAMES) await cell(name, 'phase').getByText('running', { exact: true }).waitFor({ timeout: T });
  await page.getByText('3 of 3 agents').waitFor({ timeout: T });
  const headers = await page.getByRole('region', { name: 'Agents table' }).getByRole('columnheader').allTextContents();
  for (const h of ['Name', 'Phase', 'Sleep', 'Memory', 'CPU', 'Tokens today', 'Spend today', 'Budget left', 'Engine', 'Rendering', 'Crashes', 'Errors (1 h)']) {
    assert.ok(headers.some((x) => x.startsWith(h)), `column ${h}: ${headers}`);
  }
  assert.equal(await cell('fleet-alpha', 'sleep').textContent(), 'awake');
  assert.equal(await cell('fleet-alpha', 'budget').textContent(), 'unlimited');
  assert.equal(await cell('fleet-alpha', 'spend').textContent(), 'n/a', 'no price table on this platform');
  assert.equal(await cell('fleet-alpha', 'errors').textContent(), '0');
  // The workspace's chart is drawn (uPlot, loaded after the table).
  await page.locator('.chart canvas').first().waitFor({ timeout: T });
  assert.equal(requests.filter((p) => p === '/v0/fleet/stream').length, 1, 'one stream');
  assert.equal(requests.filter((p) => p.startsWith('/v0/agents')).length, 0, 'no request per agent');
});

test('filter the fleet by name and by phase', async () => {
  const filter = page.getByLabel('Filter by name, id or engine');
  await filter.fill('beta');
  await page.getByText('1 of 3 agents').waitFor({ timeout: T });
  await row('fleet-beta').waitFor({ timeout: T });
  assert.equal(await row('fleet-alpha').count(), 0);
  assert.equal(await row('fleet-gamma').count(), 0);
  await filter.fill('');
  await page.getByLabel('Phase').selectOption('suspended');
  await page.getByText('0 of 3 agents').waitFor({ timeout: T });
  await page.getByText('No agent matches.').waitFor({ timeout: T });
  await page.getByLabel('Phase').selectOption('');
  await page.getByText('3 of 3 agents').waitFor({ timeout: T });
});

test('sort by name, both ways', async () => {
  const names = () => page.locator('tbody tr[data-id] td[data-col="name"]').allTextContents();
  assert.deepEqual(await names(), NAMES);
  // The order a header claims is the rows' order at every change of the table, not only once
  // the page settles: an observer checks each one.
  await page.evaluate(() => {
    const table = document.querySelector('table.fleet-table');
    window.sortMismatches = [];
    new MutationObserver(() => {
      const th = table.querySelector('th[aria-sort="ascending"], th[aria-sort="descending"]');
      if (!th || !th.textContent.startsWith('Name')) return;
      const shown = [...table.querySelectorAll('tbody tr[data-id] td[data-col="name"]')].map((td) => td.textContent);
      const want = [...shown].sort();
      if (th.getAttribute('aria-sort') === 'descending') want.reverse();
      if (shown.join() !== want.join()) window.sortMismatches.push(`${th.getAttribute('aria-sort')}: ${shown.join(', ')}`);
    }).observe(table, { subtree: true, childList: true, attributes: true, attributeFilter: ['aria-sort'] });
  });
  await page.getByRole('button', { name: /^Name/ }).click();
  await page.locator('th[aria-sort="descending"]').waitFor({ timeout: T });
  assert.deepEqual(await names(), [...NAMES].reverse());
  await page.getByRole('button', { name: /^Name/ }).click();
  await page.locator('th[aria-sort="ascending"]').waitFor({ timeout: T });
  assert.deepEqual(await names(), NAMES);
  assert.deepEqual(await page.evaluate(() => window.sortMismatches), [], 'a header claimed an order its rows did not show');
});

test('an agent that changes phase is updated live, on the same stream', async () => {
  const r = await api('POST', `/v0/agents/${ids['fleet-alpha']}/suspend`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await cell('fleet-alpha', 'phase').getByText('suspended', { exact: true }).waitFor({ timeout: T });
  await cell('fleet-alpha', 'sleep').getByText(/^asleep/).waitFor({ timeout: T });
  await page.getByLabel('Phase').selectOption('asleep');
  await page.getByText('1 of 3 agents').waitFor({ timeout: T });
  await row('fleet-alpha').waitFor({ timeout: T });
  await page.getByLabel('Phase').selectOption('');
  assert.equal(requests.filter((p) => p === '/v0/fleet/stream').length, 1, 'still the one stream');
});

test('rows are updated in place: a click and keyboard focus survive the stream\'s updates', async () => {
  // A change the stream carries (fleet-alpha's budget), painted: every row is repainted then.
  let budget = 1000;
  const update = async () => {
    budget += 1000;
    const r = await api('PUT', `/v0/agents/${ids['fleet-alpha']}/budget`, { tokensPerDay: budget, requestsPerMinute: 0 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await cell('fleet-alpha', 'budget').getByText(`${budget.toLocaleString('en-US')} of ${budget.toLocaleString('en-US')}`).waitFor({ timeout: T });
  };
  const select = page.getByRole('button', { name: 'Select fleet-gamma' });
  await select.focus();
  await update();
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), 'Select fleet-gamma',
    'the focused button was replaced by an update');
  // A press and release with an update between them is one click on the button.
  const box = await select.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.down();
  await update();
  await page.mouse.up();
  await page.getByRole('heading', { name: 'Agent: fleet-gamma' }).waitFor({ timeout: T });
  // Waited for, not read once: make test once read 'false' just after the heading showed.
  await page.getByRole('button', { name: 'Select fleet-gamma', pressed: true }).waitFor({ timeout: T });
  const back = await api('PUT', `/v0/agents/${ids['fleet-alpha']}/budget`, { tokensPerDay: 0, requestsPerMinute: 0 });
  assert.equal(back.status, 200, JSON.stringify(back.body));
});

test("an agent's chart", async () => {
  await page.getByRole('button', { name: 'Select fleet-beta' }).click();
  await page.getByText('Agent fleet-beta: tokens today and memory').waitFor({ timeout: T });
  await page.locator('.chart canvas').nth(1).waitFor({ timeout: T });
  // Where the runtime measures the agent's memory (cgroups: root), its CPU rate follows from
  // the next reading.
  if ((await cell('fleet-beta', 'memory').textContent()) !== 'n/a') {
    await cell('fleet-beta', 'cpu').getByText(/%$/).waitFor({ timeout: T });
  }
  // Selecting the row scrolled the table sideways to its button: back to its first column.
  await page.getByRole('region', { name: 'Agents table' }).evaluate((el) => { el.scrollLeft = 0; });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(SHOTS, 'fleet.png'), fullPage: true });
});

test('budgets and limits: set from the console, refused with the REST door\'s own words', async () => {
  const toast = (text) => page.locator('#toasts').getByText(text).first().waitFor({ timeout: T });
  const beta = ids['fleet-beta'];
  await page.getByRole('heading', { name: 'Agent: fleet-beta' }).waitFor({ timeout: T });
  const tokens = page.getByLabel('Agent tokens per day (0: unlimited)');
  await tokens.fill('5000');
  await page.getByRole('button', { name: 'Save agent budget' }).click();
  await toast('Agent budget saved');
  await cell('fleet-beta', 'budget').getByText('5,000 of 5,000').waitFor({ timeout: T }); // back through the stream

  // A refusal reads as the REST door words it (here the API server's validation).
  const refused = await api('PUT', `/v0/agents/${beta}/budget`, { tokensPerDay: -1, requestsPerMinute: 0 });
  assert.equal(refused.status, 400);
  await tokens.fill('-1');
  await page.getByRole('button', { name: 'Save agent budget' }).click();
  await page.getByRole('alert').filter({ hasText: `400 ${refused.body.error}` }).waitFor({ timeout: T });
  // A spend budget on a platform without a model price table: refused, in the door's words.
  await tokens.fill('5000');
  const spend = page.getByLabel('Agent spend per day, in the price table\'s currency (0: unlimited)');
  await spend.fill('5');
  await page.getByRole('button', { name: 'Save agent budget' }).click();
  await page.getByRole('alert').filter({ hasText: '400 A spend budget needs the platform\'s model price table' }).waitFor({ timeout: T });
  await spend.fill('0');

  const mem = page.getByLabel('Memory limit (e.g. 1Gi; empty: the platform default)');
  const badMem = await api('PUT', `/v0/agents/${beta}/resources`, { memoryLimit: 'lots' });
  assert.equal(badMem.status, 400);
  await mem.fill('lots');
  await page.getByRole('button', { name: 'Save memory limit' }).click();
  await page.getByRole('alert').filter({ hasText: `400 ${badMem.body.error}` }).waitFor({ timeout: T });
  await mem.fill('1Gi');
  await page.getByRole('button', { name: 'Save memory limit' }).click();
  await toast('Memory limit 1Gi saved: the gateway restarts with it');
  if ((await cell('fleet-gamma', 'memory').textContent()) !== 'n/a') {
    // Measured (cgroups): the restarted gateway's cgroup has the new limit.
    await cell('fleet-beta', 'memory').getByText(/of 1,024 MiB$/).waitFor({ timeout: T });
  }

  await page.getByLabel('Workspace tokens per day (0: unlimited)').fill('100000');
  await page.getByRole('button', { name: 'Save workspace budget' }).click();
  await toast('Workspace budget saved');
  await page.getByText('100,000 of 100,000 tokens').waitFor({ timeout: T });
  const { body } = await api('GET', '/v0/fleet');
  assert.equal(body.workspace.tokensPerDay, 100000);
  assert.equal(body.agents.find((a) => a.id === beta).tokensPerDay, 5000);
});

test('accessibility: axe-core finds no serious or critical violation on the fleet page', async () => {
  const { serious, found } = await seriousViolations(page);
  assert.deepEqual(serious, [], JSON.stringify(found, null, 2));
});

test('phone width: the fleet page does not scroll sideways', async () => {
  const ctx = await browser.newContext({ viewport: { width: 375, height: 800 }, isMobile: true, hasTouch: true });
  try {
    const pg = await ctx.newPage();
    await pg.goto(`${URL}/console`);
    await pg.getByLabel('API token or key').fill(TOKEN);
    await pg.getByRole('button', { name: 'Sign in' }).click();
    await pg.getByRole('heading', { name: /^Workspace / }).waitFor({ timeout: T });
    await pg.goto(`${URL}/console#/fleet`);
    await pg.locator('tr[data-id]').first().waitFor({ timeout: T });
    const [scroll, client] = await pg.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
    assert.ok(scroll <= client, `the page is ${scroll}px wide in a ${client}px viewport`);
  } finally {
    await ctx.close();
  }
});
