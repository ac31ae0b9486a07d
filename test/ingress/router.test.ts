import t from 'tap';
import { Router } from '../../ingress/router.ts';
import type { Route } from '../../ingress/types.ts';

const route = (method: string, pattern: string): Route => ({
  method,
  pattern,
  scope: null,
  body: 'none',
  handler: () => ({ status: 200 }),
});

t.test('a static path matches the same route every time, each with its own params', async (t) => {
  const list = route('GET', '/v1/webhooks/endpoints');
  const router = new Router();
  router.add([list, route('POST', '/v1/webhooks/endpoints')]);
  const first = router.match('GET', '/v1/webhooks/endpoints');
  const second = router.match('GET', '/v1/webhooks/endpoints');
  t.same(first, { kind: 'route', route: list, params: {} });
  t.same(second, { kind: 'route', route: list, params: {} });
  if (first.kind === 'route' && second.kind === 'route') {
    first.params.leak = 'x';
    t.not(first.params, second.params, 'a handler that writes its params writes no other request’s');
    t.same(router.match('GET', '/v1/webhooks/endpoints'), { kind: 'route', route: list, params: {} });
  }
  t.equal(router.match('HEAD', '/v1/webhooks/endpoints').kind, 'route', 'HEAD takes the GET route');
});

t.test('the first route that matches wins, for a remembered path too', async (t) => {
  const byId = route('GET', '/v1/things/:id');
  const stats = route('GET', '/v1/things/stats');
  const router = new Router();
  router.add([byId, stats]);
  for (let i = 0; i < 3; i++)
    t.same(router.match('GET', '/v1/things/stats'), { kind: 'route', route: byId, params: { id: 'stats' } });
  const other = new Router();
  other.add([stats, byId]);
  for (let i = 0; i < 3; i++)
    t.same(other.match('GET', '/v1/things/stats'), { kind: 'route', route: stats, params: {} });
  t.same(other.match('GET', '/v1/things/a%20b'), { kind: 'route', route: byId, params: { id: 'a b' } });
});

t.test('a remembered path does not change what another method or path gets', async (t) => {
  const list = route('GET', '/v1/webhooks/endpoints');
  const router = new Router();
  router.add([list]);
  t.equal(router.match('GET', '/v1/webhooks/endpoints').kind, 'route');
  for (let i = 0; i < 2; i++) {
    t.same(router.match('DELETE', '/v1/webhooks/endpoints'), { kind: 'method', allow: ['GET', 'HEAD'] });
    t.same(router.match('GET', '/v1/webhooks/nothing'), { kind: 'not-found' });
  }
  // Routes added later are matched too: what was remembered is forgotten.
  const del = route('DELETE', '/v1/webhooks/endpoints');
  router.add([del]);
  t.same(router.match('DELETE', '/v1/webhooks/endpoints'), { kind: 'route', route: del, params: {} });
});
