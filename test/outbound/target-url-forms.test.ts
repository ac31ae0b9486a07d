/**
 * A target URL has one reading (issue 31 item 7): what another URL parser could read differently
 * (a backslash, whitespace, control characters, credentials) is refused, and what is accepted is
 * stored and shown in WHATWG's form, the one every later check and request uses.
 */
import t from 'tap';
import { checkTargetUrl, normalTargetUrl } from '../../outbound/target-guard.ts';
import { SluiceError } from '../../core/errors.ts';
import { call, startTestNode } from '../helpers/sluice.ts';
import { startReceiver } from '../helpers/webhook-receiver.ts';

t.test('URLs two parsers could read differently are refused', async (t) => {
  const refused = [
    'https://1.1.1.1\\@127.0.0.1/',
    'https://example.com\\hook',
    'https://exa mple.com/hook',
    'https://example.com/ho\tok',
    'https://example.com/hook\n',
    ' https://example.com/hook',
    'https://example.com/\x00',
    'https://user@example.com/hook',
    'https://:pw@example.com/hook',
  ];
  for (const url of refused) {
    const err = (() => {
      try {
        checkTargetUrl(url, { allowInsecure: false });
        return null;
      } catch (e) {
        return e as SluiceError;
      }
    })();
    t.ok(err instanceof SluiceError && err.code === 'UNPROCESSABLE_TARGET', `${JSON.stringify(url)} refused`);
  }
  t.equal(normalTargetUrl('HTTPS://Example.COM:443/a/../hook'), 'https://example.com/hook');
  t.equal(normalTargetUrl('not a url'), 'not a url');
});

t.test('an endpoint keeps its URL in one form; the same URL spelt otherwise is no change', async (t) => {
  const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' });
  const r = await startReceiver(200);
  t.teardown(async () => {
    await r.close();
    await node.close();
  });
  const token = await node.token(await node.client('admin', 'url-forms'));
  const port = new URL(r.url).port;
  const typed = `HTTP://127.0.0.1:${port}/x/../hook`;
  const created = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url: typed, events: ['inference.completed'] },
  });
  t.equal(created.status, 201);
  t.equal(created.json.url, `http://127.0.0.1:${port}/hook`, 'stored and shown normalised');
  t.equal(r.received.at(-1)?.path, '/hook', 'the ping went where the normalised URL says');
  const backslash = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url: `http://1.1.1.1\\@127.0.0.1:${port}/hook`, events: ['inference.completed'] },
  });
  t.equal(backslash.status, 422, 'a backslash is refused');
  const pings = r.received.length;
  const same = await call(node.base, 'PATCH', `/v1/webhooks/endpoints/${created.json.id}`, {
    token,
    body: { url: `http://127.0.0.1:${port}/./hook` },
  });
  t.equal(same.status, 200);
  t.equal(same.headers.get('sluice-ping-result'), null, 'the same URL spelt otherwise: nothing pinged');
  t.equal(r.received.length, pings);
});
