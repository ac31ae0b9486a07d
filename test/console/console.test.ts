/**
 * The tenant console in a real browser: Playwright (playwright-core) drives the Chromium of
 * Debian's `chromium` package (.ci/run installs it) against a real node, dispatcher and receivers.
 * It signs in, sees a failing endpoint and its attempts, replays a DLQ entry and sees it
 * delivered, re-verifies a PENDING endpoint, and checks that a webhooks:read token cannot replay.
 * It manages an endpoint end to end: registers one against a local receiver (its secret shown
 * once), edits its events and limits, pauses and resumes it, test-sends, rotates and deletes it.
 * Screenshots go to SLUICE_CONSOLE_SCREENSHOTS (docs/img to refresh the README's), else a temp dir.
 */
import t from 'tap';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startTestNode, call } from '../helpers/sluice.ts';
import { rawHttp } from '../helpers/raw-http.ts';
import { receiver, registerEndpoint, publish, signatureValid } from '../dispatcher/receiver.ts';
import type { DlqEntry } from '../../core/webhooks/records.ts';

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
  // 30240: the 72-hour retry span runs in about 8.6 s, so deliveries reach the DLQ quickly, and a
  // dead letter lives 20 s, which the DLQ view below must beat even on a loaded CI machine. Late
  // attempts would add up to scaled days of failures and disable the failing endpoint before its
  // 17th: the disable waits a year here.
  const node = await startTestNode(
    {
      SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
      SLUICE_TIME_SCALE: '30240',
      SLUICE_WEBHOOK_DISABLE_AFTER_HOURS: String(24 * 365),
    },
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
      ...[
        'app.js',
        'dom.js',
        'session.js',
        'nav.js',
        'view-endpoints.js',
        'view-endpoint.js',
        'view-dlq.js',
        'view-activity.js',
        'endpoints.js',
        'endpoint-form.js',
        'filter-field.js',
        'forms.js',
        'kinds.js',
      ].map((name) => [`/console/${name}`, 'text/javascript']),
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

      // The dead letters live 20 s, so the DLQ comes first; the attempt history trails the DLQ by up
      // to a digest window and a fetch. The replayed event has an 18th attempt; the other keeps 17.
      for (const [id, want] of [
        [events[0], 18],
        [events[1], 17],
      ] as const)
        while (
          (
            await call(node.base, 'GET', `/v1/webhooks/endpoints/${ep.id}/attempts?event_id=${id}&limit=100`, {
              token,
            })
          ).json.data.length < want
        ) {
          if (Date.now() > deadline + 30_000)
            throw new Error(`the attempt history did not show ${want} attempts of ${id}`);
          await new Promise((r) => setTimeout(r, 200));
        }
      await page.click('button[data-view="endpoints"]');
      await page.waitForSelector('#endpoints');
      await row.locator('button.open').click();
      await page.waitForSelector('.delivery', { timeout: 5000 }).catch(async (e) => {
        throw new Error(
          `${e.message}; notice: ${await page.locator('#notice').innerText()}; ${violations.join(' | ')}; ` +
            (await page.locator('#view-endpoint').evaluate((el) => el.outerHTML)).slice(0, 3000),
        );
      });
      const card = page.locator('.delivery', { hasText: events[1] });
      t.equal(await card.locator('tr.attempt').count(), 17, 'all 17 attempts of the delivery');
      t.same([...new Set(await card.locator('td.status').allInnerTexts())], ['500'], 'each with its status');
      t.match(await card.innerText(), /dead-lettered/);
      t.equal(await card.locator('svg.timeline circle').count(), 17, 'on a timeline');
      await page.screenshot({ path: join(shots, 'console-attempts.png'), fullPage: true });

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
    // An entry of its own that lives an hour: the scaled ones of the test above last 10 s, which a
    // busy machine can spend before this test looks.
    const at = Date.now();
    const id = `dlq_readonly${at}`;
    await node.ctx.producer.sendJson(node.ctx.topics.dlq, 'acme', {
      id,
      event_id: `evt_readonly${at}`,
      endpoint_id: ep.id,
      tenant_id: 'acme',
      event_type: 'pipeline.failed',
      attempts: 17,
      last_status: 500,
      last_error: null,
      first_attempt_at: new Date(at - 60_000).toISOString(),
      last_attempt_at: new Date(at).toISOString(),
      dead_lettered_at: new Date(at).toISOString(),
      expires_at: new Date(at + 3600_000).toISOString(),
      payload: { id: `evt_readonly${at}`, tenant_id: 'acme', type: 'pipeline.failed', data: {}, created_at: at },
    } satisfies DlqEntry);
    const listedBy = Date.now() + 30_000;
    while (
      !(await call(node.base, 'GET', '/v1/webhooks/dlq', { token })).json.data.some((e: DlqEntry) => e.id === id)
    ) {
      if (Date.now() > listedBy) throw new Error('the entry written to the DLQ topic was not listed within 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
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
    await page.click('button[data-view="endpoints"]');
    await page.waitForSelector('#endpoints');
    t.ok(await page.locator('#register-open').isDisabled(), 'registering is disabled');
    await page.locator(`tr[data-endpoint="${pending.id}"] button.open`).click();
    await page.waitForSelector('#endpoint-manage');
    for (const id of ['#pause', '#rotate', '#delete'])
      t.ok(await page.locator(id).isDisabled(), `${id} is disabled on the endpoint's page`);
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

  t.test('a tenant registers, edits, pauses, resumes, test-sends, rotates and deletes an endpoint', async (t) => {
    const hook = await receiver(200);
    const moved = await receiver(200);
    moved.pingStatus = 500;
    t.teardown(async () => {
      await hook.close();
      await moved.close();
    });
    t.equal((await publish(node, token, { type: 'order.created', data: { n: 0 } })).status, 202);
    const { context, page, violations } = await signIn();
    const patches: Record<string, unknown>[] = [];
    page.on('request', (r) => {
      if (r.method() === 'PATCH') patches.push(r.postDataJSON());
    });
    const apiEndpoint = async (id: string) => call(node.base, 'GET', `/v1/webhooks/endpoints/${id}`, { token });

    // Register: the secret is on the page once.
    await page.click('#register-open');
    const reg = page.locator('#register-form');
    await reg.waitFor();
    t.equal(await reg.locator('input[name=event][value="pipeline.completed"]').count(), 1, 'built-in kinds offered');
    await reg.locator('button[type=submit]').click();
    t.match(await reg.locator('.problem').innerText(), /\$\.url[\s\S]*is required/, 'a local fault beside the form');
    await reg.locator('[name=url]').fill(hook.url);
    await reg.locator('input[name=event][value="pipeline.completed"]').check();
    await reg.locator('[name=events_other]').fill('order.*');
    await reg.locator('[name=description]').fill('orders <b>and</b> pipelines');
    await reg.locator('[name=rate_limit_per_second]').fill('50');
    await reg.locator('[name=ordering]').selectOption('key');
    await reg.locator('button[type=submit]').click();
    const once = page.locator('#secret-once');
    await once.waitFor();
    const secret = (await page.locator('#secret-value').innerText()).trim();
    t.match(secret, /^whsec_/, 'the secret is shown');
    t.match(await once.innerText(), /Copy it now: it is not shown again/);
    t.match(await once.innerText(), /ping was answered 200: ep_\S+ is ACTIVE/, 'with the ping outcome');
    await page.screenshot({ path: join(shots, 'console-registered.png'), fullPage: true });
    const list = (await call(node.base, 'GET', '/v1/webhooks/endpoints', { token })).json.data;
    const id = list.find((e: { url: string }) => e.url === hook.url)?.id as string;
    t.ok(id, 'registered');
    const created = (await apiEndpoint(id)).json;
    t.same(
      {
        events: [...created.events].sort(),
        description: created.description,
        rate_limit_per_second: created.rate_limit_per_second,
        max_in_flight: created.max_in_flight,
        ordering: created.ordering,
        state: created.state,
      },
      {
        events: ['order.*', 'pipeline.completed'],
        description: 'orders <b>and</b> pipelines',
        rate_limit_per_second: 50,
        max_in_flight: null,
        ordering: 'key',
        state: 'ACTIVE',
      },
      'with the fields the form set',
    );
    const row = page.locator(`tr[data-endpoint="${id}"]`);
    t.match(await row.innerText(), /orders <b>and<\/b> pipelines/, 'the description is text, not markup');
    t.equal(await row.locator('b').count(), 0);
    await page.click('#secret-done');
    t.equal(await once.count(), 0, 'dismissed');
    t.notOk((await page.content()).includes(secret), 'and the secret is off the page');

    // The tenant's published types are offered when the API lists them (GET /v1/webhooks/event-types).
    // The fan-out counts a type within a few seconds of its first event; a node without the route answers 404.
    let typesRes = await call(node.base, 'GET', '/v1/webhooks/event-types', { token });
    const listed = () => (typesRes.status === 200 ? typesRes.json.data.map((x: { type: string }) => x.type) : []);
    for (const until = Date.now() + 20_000; typesRes.status === 200 && !listed().includes('order.created'); ) {
      if (Date.now() > until) break;
      await new Promise((r) => setTimeout(r, 250));
      typesRes = await call(node.base, 'GET', '/v1/webhooks/event-types', { token });
    }
    const published: string[] = listed();
    await row.locator('button.open').click();
    await page.waitForSelector('#endpoint-manage');
    t.match(await page.locator('#endpoint-summary').innerText(), /Rate limit\s+50 a second[\s\S]*Ordering\s+key/i);

    // Edit events and limits: only the changed fields are sent.
    await page.click('#settings summary');
    const edit = page.locator('#settings-form');
    t.equal(await edit.locator('input[name=event][value="pipeline.failed"]').count(), 1);
    if (published.includes('order.created'))
      t.equal(await edit.locator('input[name=event][value="order.created"]').count(), 1, 'a published type offered');
    else t.comment(`event-types answered ${typesRes.status} without order.created: the built-in kinds only`);
    t.ok(await edit.locator('input[name=event][value="pipeline.completed"]').isChecked(), 'the current events checked');
    t.equal(await edit.locator('[name=events_other]').inputValue(), 'order.*', 'other filters as text');
    await edit.locator('input[name=event][value="pipeline.completed"]').uncheck();
    await edit.locator('input[name=event][value="pipeline.failed"]').check();
    await edit.locator('[name=rate_limit_per_second]').fill('');
    await edit.locator('[name=max_in_flight]').fill('5000');
    await edit.locator('button[type=submit]').click();
    t.match(
      await edit.locator('.problem').innerText(),
      /\$\.max_in_flight must be a whole number from 1 to 1000/,
      'an out-of-range limit is refused beside the form',
    );
    t.equal(patches.length, 0, 'and not sent');
    await edit.locator('[name=max_in_flight]').fill('5');
    await edit.locator('[name=events_other]').fill('order.* Not-A-Type');
    await edit.locator('button[type=submit]').click();
    await edit.locator('.problem').getByText('400').waitFor();
    t.match(await edit.locator('.problem').innerText(), /\$\.events\[\d\]/, "the server's 400 with each field's path");
    await page.screenshot({ path: join(shots, 'console-settings.png'), fullPage: true });
    await edit.locator('[name=events_other]').fill('order.*');
    await edit.locator('button[type=submit]').click();
    await page.locator('#settings-result').getByText('Saved:').waitFor();
    t.equal(await page.locator('#settings-result').innerText(), 'Saved: events, rate_limit_per_second, max_in_flight.');
    t.same(Object.keys(patches.at(-1) ?? {}).sort(), ['events', 'max_in_flight', 'rate_limit_per_second']);
    const edited = (await apiEndpoint(id)).json;
    t.same(
      [[...edited.events].sort(), edited.rate_limit_per_second, edited.max_in_flight, edited.ordering],
      [['order.*', 'pipeline.failed'], null, 5, 'key'],
    );
    t.equal(await page.locator('#settings-form .problem').isVisible(), false, 'the problem is gone');

    // The filter: the server's compile error beside the field, the try-it box, then saved.
    await edit.locator('[name=filter]').fill('data.total >');
    await edit.locator('button[type=submit]').click();
    await page.locator('#filter-error').waitFor({ state: 'visible' });
    t.match(await page.locator('#filter-error').innerText(), /line 1, column \d+ .*syntax error/, 'beside the filter');
    const patchesBefore = patches.length;
    await page.click('#filter-try-box summary');
    await edit.locator('[name=filter]').fill('data.total > 100');
    await edit.locator('[name=filter_sample]').fill('{"type": "order.created", "data": {"total": 150}}');
    await page.click('#filter-try');
    await page.locator('#filter-verdict').getByText('Delivered: the filter is true').waitFor();
    await edit.locator('[name=filter_sample]').fill('{"type": "order.created", "data": {}}');
    await page.click('#filter-try');
    await page.locator('#filter-verdict').getByText('the evaluation failed').waitFor();
    t.equal(patches.length, patchesBefore, 'trying sends no PATCH');
    await edit.locator('[name=filter]').fill('type == "order.created" && data.total > 100');
    await edit.locator('button[type=submit]').click();
    await page.locator('#settings-result').getByText('Saved: filter.').waitFor();
    t.same(patches.at(-1), { filter: 'type == "order.created" && data.total > 100' });
    t.equal((await apiEndpoint(id)).json.filter, 'type == "order.created" && data.total > 100');
    t.equal(await page.locator('#filter-error').isVisible(), false, 'the compile error is gone');
    t.equal(
      await page.locator('#settings-form [name=filter]').inputValue(),
      'type == "order.created" && data.total > 100',
    );

    // Pause: the list shows it; resume.
    await page.click('#pause');
    t.equal(await actionOutcome(page, 'Paused:'), 'Paused:', 'the pause is answered');
    t.match(await page.locator('#endpoint-manage h2').innerText(), /PAUSED/);
    t.same(patches.at(-1), { disabled: true });
    t.equal((await apiEndpoint(id)).json.disabled, true);
    await page.click('#view-endpoint button.link');
    await row.locator('[data-paused]').waitFor();
    t.match(await row.innerText(), /ACTIVE\s+PAUSED/, 'the list shows it paused');
    await page.screenshot({ path: join(shots, 'console-paused.png'), fullPage: true });
    await row.locator('button.open').click();
    await page.click('#resume');
    t.equal(await actionOutcome(page, 'Resumed:'), 'Resumed:', 'the resume is answered');
    t.equal((await apiEndpoint(id)).json.disabled, false);
    t.notMatch(await page.locator('#endpoint-manage h2').innerText(), /PAUSED/);

    // A test send, then a rotation, then a test send signed with the new secret.
    const testSend = async (type: string, data: string) => {
      await page.locator('#test-form [name=type]').fill(type);
      await page.locator('#test-form [name=data]').fill(data);
      await page.locator('#test-form button[type=submit]').click();
      await page.locator('#test-result .test-result').waitFor();
      return page.locator('#test-result .test-result');
    };
    await page.click('#test-send summary');
    const result = await testSend('order.created', '{"n": 1}');
    t.equal(await result.getAttribute('data-status'), '200');
    t.match(await result.innerText(), /ok · order\.created · status 200 · \d+ ms/);
    t.equal(await result.locator('pre.body').innerText(), 'ok', 'the receiver body as text');
    const sent = hook.events().find((x) => x.body.type === 'order.created');
    t.same(sent?.body.data, { n: 1 }, 'the receiver got it');
    t.ok(sent && signatureValid(sent, secret), 'signed with the secret shown at registration');
    await page.screenshot({ path: join(shots, 'console-manage.png'), fullPage: true });

    await page.click('#rotate');
    await page.locator('#secret-once').waitFor();
    const rotated = (await page.locator('#secret-value').innerText()).trim();
    t.match(rotated, /^whsec_/);
    t.not(rotated, secret, 'a new secret');
    t.match(await page.locator('#secret-once').innerText(), /not shown again[\s\S]*previous secret keeps signing/);
    await page.click('#secret-done');
    await page.locator('#test-result').evaluate((el) => el.replaceChildren());
    await testSend('order.created', '{"n": 2}');
    const second = hook.events().find((x) => x.body.type === 'order.created' && (x.body.data as { n: number }).n === 2);
    t.ok(second && signatureValid(second, rotated), 'the next test send is signed with the new secret');

    // A new URL is pinged; its outcome is shown.
    await page.click('#settings summary');
    await edit.locator('[name=url]').fill(moved.url);
    await edit.locator('button[type=submit]').click();
    await page.locator('#settings-result').getByText('Saved: url.').waitFor();
    t.match(await page.locator('#settings-result').innerText(), /ping failed \(500[^)]*\): ep_\S+ is PENDING/);
    t.same(patches.at(-1), { url: moved.url });
    t.match(await page.locator('#endpoint-manage h2').innerText(), /PENDING/);

    // Delete, confirmed.
    await page.click('#delete');
    await page.click('#delete-cancel');
    t.equal((await apiEndpoint(id)).status, 200, 'cancel keeps it');
    await page.click('#delete');
    await page.click('#delete-confirm');
    await page.locator('#deleted').waitFor();
    t.equal(await page.locator('#deleted').innerText(), `Deleted ${id}.`);
    t.equal(await page.locator(`tr[data-endpoint="${id}"]`).count(), 0, 'gone from the list');
    t.equal((await apiEndpoint(id)).status, 404, 'and from the API');
    t.same(violations, [], 'no CSP violations or page errors');
    await context.close();
  });

  t.test('an endpoint recovers a window of dead letters, its progress bar filling to delivered', async (t) => {
    // Dead letters written as the dispatcher would (the node's DLQ keeps 7 days / 60480 = 10 s, so
    // these say when they expire themselves), last attempted just now.
    const hook = await receiver(200);
    t.teardown(() => hook.close());
    const target = await registerEndpoint(node, token, hook.url, ['pipeline.failed']);
    const now = Date.now();
    const entries = [0, 1, 2].map((i) => ({
      id: `dlq_console_${i}`,
      event_id: `evt_console_recover_${i}`,
      endpoint_id: target.id,
      tenant_id: 'acme',
      event_type: 'pipeline.failed',
      attempts: 17,
      last_status: 500,
      last_error: null,
      first_attempt_at: new Date(now - 60_000).toISOString(),
      last_attempt_at: new Date(now).toISOString(),
      dead_lettered_at: new Date(now).toISOString(),
      expires_at: new Date(now + 3600_000).toISOString(),
      payload: {
        id: `evt_console_recover_${i}`,
        tenant_id: 'acme',
        type: 'pipeline.failed',
        data: { i },
        created_at: now,
      },
    }));
    await node.ctx.producer.send(
      node.ctx.topics.dlq,
      entries.map((e) => ({ key: 'acme', value: JSON.stringify(e) })),
    );
    const { context, page, violations } = await signIn();
    await page.locator(`tr[data-endpoint="${target.id}"] button.open`).click();
    await page.waitForSelector('#recover-start');
    // The window opens a second before the entries (local time, as the datetime-local input takes it).
    const local = new Date(now - 1000 - new Date(now).getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
    await page.fill('#recover-since', local);
    await page.click('#recover-start');
    await page
      .locator('#recover-status[data-state="completed"]')
      .getByText(/delivered 3/)
      .waitFor({ timeout: 30_000 });
    t.match(await page.locator('#recover-status').innerText(), /completed: sent 3 of 3 · delivered 3 · failed 0/);
    t.equal(await page.locator('#recover-progress').getAttribute('value'), '3', 'the bar is full');
    t.same(
      hook
        .receipts()
        .map((h) => h.body.id)
        .sort(),
      entries.map((e) => e.event_id),
      'each delivered once',
    );
    await page.screenshot({ path: join(shots, 'console-recover.png'), fullPage: true });
    t.same(violations, [], 'no CSP violations or page errors');
    await context.close();
  });
}

/**
 * An endpoint action's outcome: its result line once it reads `expected`, or the problem shown
 * beside the actions (a refused request), so a failure says what the console showed.
 */
async function actionOutcome(page: import('playwright-core').Page, expected: string): Promise<string> {
  const done = page.locator('#actions-result').getByText(expected);
  const problem = page.locator('#endpoint-manage [role=alert]:not([hidden])');
  await done.or(problem).first().waitFor();
  return (await done.isVisible()) ? expected : `the console showed: ${await problem.first().innerText()}`;
}
