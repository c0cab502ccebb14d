// First paint of the console's fleet page against its agent list page, in Debian's chromium
// (playwright-core), alternating, for hack/bench/fleet. Prints one JSON line.
//
// Env: AGENTPLANE_URL, AGENTPLANE_TOKEN, CHROMIUM, AGENTS (how many), ROUNDS.
import { chromium } from 'playwright-core';

const URL = process.env.AGENTPLANE_URL;
const N = Number(process.env.AGENTS);
const ROUNDS = Number(process.env.ROUNDS || 5);
const T = 120_000;

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox'] });
const out = { fleet: [], list: [], fleetRequests: [], listRequests: [] };
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const which of ['list', 'fleet']) {
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      await ctx.addInitScript((t) => sessionStorage.setItem('agentplane.token', t), process.env.AGENTPLANE_TOKEN);
      const page = await ctx.newPage();
      const api = [];
      page.on('request', (req) => { const p = new globalThis.URL(req.url()).pathname; if (p.startsWith('/v0/')) api.push(p); });
      await page.goto(`${URL}/console#/${which === 'fleet' ? 'fleet' : 'agents'}`);
      // Painted: every agent is in (the list's table has all rows; the fleet counts them all
      // and shows its first rows).
      if (which === 'fleet') {
        await page.getByText(`${N} of ${N} agents`).waitFor({ timeout: T });
        await page.locator('tr[data-id]').first().waitFor({ timeout: T });
      } else {
        await page.waitForFunction((n) => document.querySelectorAll('main tbody tr').length >= n, N, { timeout: T, polling: 'raf' });
      }
      const ms = await page.evaluate(() => new Promise((res) => requestAnimationFrame(() => res(performance.now()))));
      out[which].push(ms);
      out[which + 'Requests'].push(api.filter((p) => p !== '/v0/me').length);
      await ctx.close();
    }
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
