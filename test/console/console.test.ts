/**
 * The tenant console in a real browser: Playwright (playwright-core) drives the Chromium of
 * Debian's `chromium` package (.ci/run installs it) against a real node, dispatcher and receivers.
 * It signs in, sees a failing endpoint and its attempts, replays a DLQ entry and sees it
 * delivered, re-verifies a PENDING endpoint, and checks that a webhooks:read token cannot replay.
 * Screenshots go to SLUICE_CONSOLE_SCREENSHOTS (docs/img to refresh the README's), else a temp dir.
 */
import t from 'tap';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startTestNode, call } from '../helpers/sluice.ts';
import { rawHttp } from '../helpers/raw-http.ts';
import { receiver, registerEndpoint, publish } from '../dispatcher/receiver.ts';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
  (p): p is string => typeof p === 'string' && p !== '' && existsSync(p),
);
if (!CHROMIUM) {
  const reason =
    'no Chromium binary (/usr/bin/chromium; `apt-get install chromium`, as .ci/run does, or set CHROMIUM_PATH)';
  console.log(`# console browser test skipped: ${reason}`);
  t.test('the tenant console in Chromium', { skip: reason }, async () => {});
} else {
  await run(CHROMIUM);
}

async function run(executablePath: string): Promise<void> {
  const { chromium } = await import('playwright-core');
  const shots = process.env.SLUICE_CONSOLE_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), 'sluice-console-'));
  mkdirSync(shots, { recursive: true });
  // 60480: the 72-hour retry span runs in about 4.3 s, so deliveries reach the DLQ quickly.
  const node = await startTestNode(
    { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: '60480' },
    { dispatcher: true },
  );
  const failing = await receiver(500);
  const unverified = await receiver(200);
  unverified.pingStatus = 500;
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  t.teardown(async () => {
    await browser.close();
    await failing.close();
    await unverified.close();
    await node.close();
  });

  const admin = await node.client('admin', 'acme');
  const token = await node.token(admin);
  const ep = await registerEndpoint(node, token, failing.url, ['pipeline.failed']);
  const pending = await registerEndpoint(node, token, unverified.url, ['inference.completed']);
  const events: string[] = [];
  for (const run of [1, 2])
    events.push((await publish(node, token, { type: 'pipeline.failed', data: { run } })).json.id as string);
  const deadline = Date.now() + 60_000;
  while ((await call(node.base, 'GET', '/v1/webhooks/dlq', { token })).json.data.length < 2) {
    if (Date.now() > deadline) throw new Error('the two deliveries did not reach the DLQ within 60 s');
    await new Promise((r) => setTimeout(r, 200));
  }
  // The attempt history trails the DLQ by up to a digest window and a fetch (about 2 s).
  for (const id of events)
    while (
      (await call(node.base, 'GET', `/v1/webhooks/endpoints/${ep.id}/attempts?event_id=${id}&limit=100`, { token }))
        .json.data.length < 17
    ) {
      if (Date.now() > deadline) throw new Error('the attempt history did not show all 17 attempts within 60 s');
      await new Promise((r) => setTimeout(r, 200));
    }

  async function signIn(scope?: string) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text());
    });
    page.on('pageerror', (e) => violations.push(`page error: ${e.message}`));
    await page.goto(`${node.base}/console`);
    await page.fill('#client-id', admin.client_id);
    await page.fill('#client-secret', admin.client_secret);
    if (scope) await page.fill('#scope', scope);
    await page.click('#signin-button');
    await page.waitForSelector('#endpoints');
    return { context, page, violations };
  }

  t.test('the console is static files with a strict CSP, nosniff and canonical paths', async (t) => {
    for (const [path, type] of [
      ['/console', 'text/html'],
      ['/console/', 'text/html'],
      ['/console/app.js', 'text/javascript'],
      ['/console/style.css', 'text/css'],
    ]) {
      const res = await fetch(`${node.base}${path}`);
      t.equal(res.status, 200, path);
      t.match(res.headers.get('content-type'), type, `${path} content type`);
      t.equal(res.headers.get('x-content-type-options'), 'nosniff');
      t.match(res.headers.get('content-security-policy'), /default-src 'none'; script-src 'self'; style-src 'self'/);
      t.notMatch(res.headers.get('content-security-policy'), /unsafe-inline|unsafe-eval/);
    }
    t.equal((await fetch(`${node.base}/console/nope.js`)).status, 404);
    const port = Number(new URL(node.base).port);
    for (const path of [
      '/console/../package.json',
      '/console/%2e%2e/package.json',
      '/console/..%2Fpackage.json',
      '/console//app.js',
      '/console/%5C..%5Cpackage.json',
    ]) {
      const res = await rawHttp(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      t.same(res.statuses, [400], `${path} is refused as not canonical`);
    }
    t.equal(
      (await fetch(`${node.base}/console/%61pp.js`)).status,
      200,
      'an encoded unreserved character is the same file',
    );
    const html = await (await fetch(`${node.base}/console`)).text();
    t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    t.notMatch(html, /\son[a-z]+=/i, 'no inline event handlers');
  });

  t.test(
    'a tenant signs in, sees the failing endpoint and its attempts, replays a DLQ entry and sees it delivered',
    async (t) => {
      const { context, page, violations } = await signIn();
      const row = page.locator(`tr[data-endpoint="${ep.id}"]`);
      await row.locator('.last-error').getByText('HTTP 500').waitFor();
      t.match(await row.innerText(), /ACTIVE[\s\S]*0 %[\s\S]*HTTP 500/, 'state, success rate and last error');
      t.match(await page.locator(`tr[data-endpoint="${pending.id}"]`).innerText(), /PENDING/);
      await page.screenshot({ path: join(shots, 'console-endpoints.png'), fullPage: true });

      await row.locator('button.open').click();
      await page.waitForSelector('.delivery', { timeout: 5000 }).catch(async (e) => {
        throw new Error(
          `${e.message}; notice: ${await page.locator('#notice').innerText()}; ${violations.join(' | ')}; ` +
            (await page.locator('#view-endpoint').evaluate((el) => el.outerHTML)).slice(0, 3000),
        );
      });
      const card = page.locator('.delivery', { hasText: events[0] });
      t.equal(await card.locator('tr.attempt').count(), 17, 'all 17 attempts of the delivery');
      t.same([...new Set(await card.locator('td.status').allInnerTexts())], ['500'], 'each with its status');
      t.match(await card.innerText(), /dead-lettered/);
      t.equal(await card.locator('svg.timeline circle').count(), 17, 'on a timeline');
      await page.screenshot({ path: join(shots, 'console-attempts.png'), fullPage: true });

      await page.click('button[data-view="dlq"]');
      await page.waitForSelector('tr.dlq-entry');
      t.equal(await page.locator('tr.dlq-entry').count(), 2, 'both entries listed');
      t.match(await page.locator('tr.dlq-entry td.expires').first().innerText(), /in \d+ (s|min)/, 'with their expiry');
      failing.answer = 200;
      const entry = page.locator(`tr.dlq-entry[data-event="${events[0]}"]`);
      await entry.locator('button.replay-one').click();
      await entry
        .locator('.replay-state')
        .getByText(/delivered · 200/)
        .waitFor({ timeout: 60_000 });
      t.pass('the replayed entry is shown delivered');
      t.equal(await page.locator('#replay-status').innerText(), 'replayed 1 of 1; watching their deliveries');
      t.ok(
        failing.receipts().some((h) => h.body.id === events[0]),
        'the receiver got it',
      );
      await page.screenshot({ path: join(shots, 'console-dlq.png'), fullPage: true });

      await page.click('button[data-view="activity"]');
      await page.waitForSelector('#rate-chart rect');
      t.match(await page.locator('#activity-totals').innerText(), /\d+ attempts · [1-9]\d* delivered · 3\d failed/);
      await page.screenshot({ path: join(shots, 'console-activity.png'), fullPage: true });

      const stored = await page.evaluate(() => ({
        local: localStorage.length,
        session: sessionStorage.length,
        cookie: document.cookie,
      }));
      t.same(stored, { local: 0, session: 0, cookie: '' }, 'the token is kept in memory only');
      t.same(violations, [], 'no CSP violations or page errors');
      await context.close();
    },
  );

  t.test('a webhooks:read token sees everything but cannot replay or re-verify, and the buttons say why', async (t) => {
    const { context, page, violations } = await signIn('webhooks:read');
    const verify = page.locator(`tr[data-endpoint="${pending.id}"] button.verify`);
    t.ok(await verify.isDisabled(), 're-verify is disabled');
    t.match(await page.locator(`tr[data-endpoint="${pending.id}"]`).innerText(), /needs the webhooks:write scope/);
    await page.click('button[data-view="dlq"]');
    await page.waitForSelector('tr.dlq-entry', { timeout: 5000 }).catch(async (e) => {
      throw new Error(
        `${e.message}; notice: ${await page.locator('#notice').innerText()}; ${violations.join(' | ')}; ` +
          (await page.locator('#view-dlq').evaluate((el) => el.outerHTML)).slice(0, 3000),
      );
    });
    const replay = page.locator('tr.dlq-entry button.replay-one').first();
    t.ok(await replay.isDisabled(), 'replay is disabled');
    t.match(await replay.getAttribute('title'), /needs the webhooks:write scope; this token carries: webhooks:read/);
    t.match(
      await page.locator('tr.dlq-entry').first().innerText(),
      /needs the webhooks:write scope/,
      'and says so on the page',
    );
    t.ok(await page.locator('#replay-selected').isDisabled(), 'bulk replay too');
    await page.screenshot({ path: join(shots, 'console-read-only.png'), fullPage: true });
    t.same(violations, []);
    await context.close();
  });

  t.test('re-verifying a PENDING endpoint makes it ACTIVE once its ping is answered', async (t) => {
    const { context, page } = await signIn();
    unverified.pingStatus = 200;
    await page.locator(`tr[data-endpoint="${pending.id}"] button.verify`).click();
    await page.locator('#verify-result').getByText(`${pending.id} is now ACTIVE`).waitFor();
    t.match(await page.locator(`tr[data-endpoint="${pending.id}"]`).innerText(), /ACTIVE/);
    await context.close();
  });
}
