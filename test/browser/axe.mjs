// The accessibility check of the browser tests: axe-core (from npm) run in a page. Its script
// is injected into the page, which the console's CSP forbids: the page's context must be made
// with bypassCSP.
import { createRequire } from 'node:module';

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

// seriousViolations runs axe-core on page's document and returns its serious and critical
// violations (with the first nodes of each), and every violation found.
export async function seriousViolations(page) {
  await page.addScriptTag({ path: AXE });
  const found = await page.evaluate(async () => {
    const r = await globalThis.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }));
  });
  return { serious: found.filter((v) => v.impact === 'serious' || v.impact === 'critical'), found };
}
