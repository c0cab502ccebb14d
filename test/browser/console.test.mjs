// The web console in a real browser (Debian's chromium driven by playwright-core), against a
// platform the Go test (browser_test.go) started with the engine double. Node's test runner
// runs the tests in order; they share one browser and one agent.
//
// Env: AGENTPLANE_URL, AGENTPLANE_TOKEN (every scope), AGENTPLANE_READ_TOKEN (agents:read
// only), CHROMIUM (the executable), SCREENSHOT_DIR.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { seriousViolations } from './axe.mjs';

const URL = process.env.AGENTPLANE_URL;
const TOKEN = process.env.AGENTPLANE_TOKEN;
const READ_TOKEN = process.env.AGENTPLANE_READ_TOKEN;
const SHOTS = process.env.SCREENSHOT_DIR;
const AGENT = 'console-demo';
const T = 30_000; // an upper bound on waits, not a timing assertion

let browser, context, page, agentId;

async function api(method, p, body, token = TOKEN) {
  const resp = await fetch(URL + p, {
    method, headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: resp.status, body: await resp.json().catch(() => null) };
}

async function signIn(pg, token) {
  await pg.goto(`${URL}/console`);
  await pg.getByRole('heading', { name: 'Sign in' }).waitFor({ timeout: T });
  await pg.getByLabel('API token or key').fill(token);
  await pg.getByRole('button', { name: 'Sign in' }).click();
  await pg.getByRole('heading', { name: /^Workspace / }).waitFor({ timeout: T });
}

const banner = (pg) => pg.getByRole('alert');

async function run(command) {
  const panel = page.getByRole('region', { name: 'Console' });
  await panel.getByLabel('Command', { exact: true }).fill(command);
  await panel.getByRole('button', { name: 'Run' }).click();
  const out = panel.getByRole('status', { name: 'Command output' });
  await out.filter({ hasText: `$ ${command}` }).waitFor({ timeout: T });
  return out.textContent();
}

before(async () => {
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox'] });
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('dialog', (d) => d.accept());
});

after(async () => {
  await browser?.close();
});

test('the page is served with a strict CSP and asks for a token', async () => {
  const resp = await page.goto(`${URL}/console`);
  assert.equal(resp.status(), 200);
  assert.match(resp.headers()['content-security-policy'], /script-src 'self'/);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor({ timeout: T });
});

test('sign in with a pasted token; the token stays in sessionStorage', async () => {
  await signIn(page, TOKEN);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('agentplane.token')), TOKEN);
  assert.equal(await page.evaluate(() => localStorage.length), 0);
});

test('create an agent and watch it reach running', async () => {
  await page.getByRole('link', { name: 'Agents', exact: true }).click();
  await page.getByLabel('Name').fill(AGENT);
  await page.getByRole('button', { name: 'Create agent' }).click();
  const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: AGENT }) });
  await row.getByText('running', { exact: true }).waitFor({ timeout: T });
  await page.getByRole('link', { name: 'Overview' }).click();
  await page.getByText('1 agent', { exact: true }).waitFor({ timeout: T });
  await page.screenshot({ path: path.join(SHOTS, 'overview.png'), fullPage: true });
  await page.getByRole('link', { name: 'Agents', exact: true }).click();
  await page.getByRole('link', { name: AGENT }).click();
  await page.getByRole('heading', { name: AGENT, level: 1 }).waitFor({ timeout: T });
  agentId = decodeURIComponent(new globalThis.URL(page.url()).hash.split('/')[2]);
  assert.ok(agentId);
  await page.getByRole('region', { name: 'Status' }).getByText('running', { exact: true }).waitFor({ timeout: T });
});

test('run a command in the console and see its output', async () => {
  const out = await run('echo hello-from-the-console');
  assert.match(out, /hello-from-the-console/);
  assert.match(out, /\[exit 0\]/);
});

test('config: an invalid config is refused with the engine message, a valid one is saved', async () => {
  const panel = page.getByRole('region', { name: 'Config' });
  const editor = panel.getByLabel('Config (JSON)');
  await page.waitForFunction(() => document.querySelector('textarea[name=config]').value.startsWith('{'), null, { timeout: T });
  const current = JSON.parse(await editor.inputValue());

  await editor.fill(JSON.stringify({ ...current, notAnOpenClawKey: true }, null, 2));
  await panel.getByRole('button', { name: 'Validate' }).click();
  const engineSaid = await api('POST', `/v0/agents/${agentId}/config/validate`, { config: { ...current, notAnOpenClawKey: true } });
  assert.equal(engineSaid.body.valid, false);
  const issue = (JSON.parse(engineSaid.body.output).issues || []).find((i) => i.message.includes('notAnOpenClawKey'));
  assert.ok(issue, `the engine names the key: ${engineSaid.body.output}`);
  await panel.getByText('Refused by the engine').waitFor({ timeout: T });
  assert.ok((await panel.getByRole('status').textContent()).includes(issue.message), 'the engine message is shown');
  await banner(page).filter({ hasText: 'notAnOpenClawKey' }).waitFor({ timeout: T });
  await page.screenshot({ path: path.join(SHOTS, 'config.png'), fullPage: true });

  await editor.fill(JSON.stringify({ ...current, logging: { level: 'info' } }, null, 2));
  await panel.getByRole('button', { name: 'Save' }).click();
  await panel.getByText('Saved.').waitFor({ timeout: T });
  const { body } = await api('GET', `/v0/agents/${agentId}/config`);
  assert.equal(body.config.logging.level, 'info');
});

test('logs: the last lines, then follow while the gateway restarts', async () => {
  const panel = page.getByRole('region', { name: 'Logs' });
  const route = await api('GET', `/v0/agents/${agentId}/logs?tail=200`);
  await panel.getByRole('button', { name: 'Show last lines' }).click();
  assert.equal(route.status, 200, JSON.stringify(route.body));
  const lines = route.body.lines || [];
  assert.ok(lines.length > 0, 'a running gateway has written lines');
  await panel.getByRole('log').filter({ hasText: lines[lines.length - 1] }).waitFor({ timeout: T });
  // Follow: lines the gateway writes from now on arrive in the panel as Server-Sent Events.
  await panel.getByRole('button', { name: 'Follow' }).click();
  await panel.getByText('Following…').waitFor({ timeout: T });
  await panel.getByRole('log').filter({ hasText: lines[lines.length - 1] }).waitFor({ timeout: T });
  const readies = () => page.evaluate(() => (document.querySelector('[role=log][aria-label="Gateway logs"]').textContent.match(/\[gateway\] ready/g) || []).length);
  const before = await readies();
  await page.getByRole('region', { name: 'Status' }).getByRole('button', { name: 'Restart' }).click();
  await page.locator('#toasts').getByText('Restarted').waitFor({ timeout: T });
  await page.waitForFunction((n) => (document.querySelector('[role=log][aria-label="Gateway logs"]').textContent.match(/\[gateway\] ready/g) || []).length > n, before, { timeout: T });
  assert.ok((await readies()) > before, 'the restarted gateway\'s lines arrived while following');
  await panel.getByRole('button', { name: 'Stop following' }).click();
  await panel.getByText('Stopped following.').waitFor({ timeout: T });
});

test('take a snapshot and reset to it', async () => {
  await run('echo before-snapshot > console-marker.txt');
  const panel = page.getByRole('region', { name: 'Snapshots' });
  await panel.getByRole('button', { name: 'Take snapshot' }).click();
  await panel.getByRole('button', { name: /^Reset to / }).first().waitFor({ timeout: T });
  await run('echo after-snapshot > console-marker.txt');
  await panel.getByRole('button', { name: /^Reset to / }).first().click();
  await page.locator('#toasts').getByText('Reset to snapshot').waitFor({ timeout: T });
  const out = await run('cat console-marker.txt');
  assert.match(out, /before-snapshot/);
  assert.doesNotMatch(out, /after-snapshot/);
  await page.getByRole('region', { name: 'Status' }).getByText('running', { exact: true }).waitFor({ timeout: T });
  await page.getByRole('region', { name: 'Logs' }).getByRole('button', { name: 'Show last lines' }).click();
  // The README's picture: the top of the agent page, once the toasts have gone.
  await page.locator('#toasts .toast').first().waitFor({ state: 'detached', timeout: T });
  await page.locator('#toasts .toast').last().waitFor({ state: 'detached', timeout: T });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(SHOTS, 'agent.png'), fullPage: false });
});

test('an agent that does not exist is a readable 404', async () => {
  await page.goto(`${URL}/console#/agents/no-such-agent`);
  const api404 = await api('GET', '/v0/agents/no-such-agent');
  assert.equal(api404.status, 404);
  await banner(page).filter({ hasText: `404 ${api404.body.error}` }).waitFor({ timeout: T });
  assert.doesNotMatch(await banner(page).textContent(), /at \w+ \(|stack|undefined/);
});

test('a token without the write scope is refused creating an agent, readably (403)', async () => {
  const ctx = await browser.newContext();
  try {
    const pg = await ctx.newPage();
    await signIn(pg, READ_TOKEN);
    await pg.getByRole('link', { name: 'Agents', exact: true }).click();
    await pg.getByLabel('Name').fill('not-allowed');
    await pg.getByRole('button', { name: 'Create agent' }).click();
    const api403 = await api('POST', '/v0/agents', { name: 'not-allowed' }, READ_TOKEN);
    assert.equal(api403.status, 403);
    await banner(pg).filter({ hasText: `403 ${api403.body.error}` }).waitFor({ timeout: T });
  } finally {
    await ctx.close();
  }
});

test('phone width: the page does not scroll sideways', async () => {
  const ctx = await browser.newContext({ viewport: { width: 375, height: 800 }, isMobile: true, hasTouch: true });
  try {
    const pg = await ctx.newPage();
    await signIn(pg, TOKEN);
    for (const hash of ['#/', '#/agents', `#/agents/${encodeURIComponent(agentId)}`, '#/files']) {
      await pg.goto(`${URL}/console${hash}`);
      await pg.getByRole('heading', { level: 1 }).filter({ hasNotText: 'Loading' }).first().waitFor({ timeout: T });
      await pg.waitForLoadState('networkidle').catch(() => {});
      const [scroll, client] = await pg.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
      assert.ok(scroll <= client, `${hash}: page is ${scroll}px wide in a ${client}px viewport`);
    }
  } finally {
    await ctx.close();
  }
});

test('accessibility: axe-core finds no serious or critical violation on the overview, the agent list and the agent page', async () => {
  // A context of its own: axe-core is injected, which the console's CSP forbids.
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
  try {
    const pg = await ctx.newPage();
    await signIn(pg, TOKEN);
    // Each page with what it shows loaded: the agent count, the agent's row, its status.
    for (const [hash, shown] of [
      ['#/', pg.getByText('1 agent', { exact: true })],
      ['#/agents', pg.getByRole('link', { name: AGENT })],
      [`#/agents/${encodeURIComponent(agentId)}`, pg.getByRole('region', { name: 'Status' }).getByText('running', { exact: true })],
    ]) {
      await pg.goto(`${URL}/console${hash}`);
      await shown.waitFor({ timeout: T });
      const { serious, found } = await seriousViolations(pg);
      assert.deepEqual(serious, [], `${hash}: ${JSON.stringify(found, null, 2)}`);
    }
  } finally {
    await ctx.close();
  }
});

test('keyboard: the agent list is reachable with Tab and focus is visible', async () => {
  await page.goto(`${URL}/console#/agents`);
  await page.getByRole('link', { name: AGENT }).waitFor({ timeout: T });
  const seen = [];
  for (let i = 0; i < 15; i++) {
    await page.keyboard.press('Tab');
    seen.push(await page.evaluate(() => {
      const el = document.activeElement;
      return { text: el.textContent.trim() || el.getAttribute('aria-label') || el.id, outline: getComputedStyle(el).outlineStyle };
    }));
  }
  const link = seen.find((s) => s.text === AGENT);
  assert.ok(link, `Tab reaches the agent's link: ${JSON.stringify(seen)}`);
  assert.notEqual(link.outline, 'none');
});

test('sign out forgets the token', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor({ timeout: T });
  assert.equal(await page.evaluate(() => sessionStorage.getItem('agentplane.token')), null);
});
