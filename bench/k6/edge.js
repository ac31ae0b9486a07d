// k6 scenarios for the edge, run one after another in one k6 run by bench/edge.ts.
// Env: BASELINE (bare uWS URL), BASE (Sluice URL), TOKEN (hot bearer token),
//      NARROW (token without webhooks:read), CLIENT_ID, CLIENT_SECRET, DURATION (s), VUS.
import http from 'k6/http';
import { check } from 'k6';

const D = Number(__ENV.DURATION || 10);
const VUS = Number(__ENV.VUS || 32);
const scenario = (exec, i) => ({ executor: 'constant-vus', exec, vus: VUS, duration: `${D}s`, startTime: `${i * (D + 1)}s`, tags: { case: exec } });

export const options = {
  discardResponseBodies: true,
  scenarios: {
    baseline: scenario('baseline', 0),
    hot_token: scenario('hotToken', 1),
    scope_violation: scenario('scopeViolation', 2),
    issue_token: scenario('issueToken', 3),
  },
  // Per-case submetrics appear in the summary only when a threshold names them.
  thresholds: Object.fromEntries(
    ['baseline', 'hotToken', 'scopeViolation', 'issueToken'].flatMap((c) => [
      [`http_req_duration{case:${c}}`, c === 'hotToken' ? ['p(99)<50'] : ['max>=0']],
      [`http_reqs{case:${c}}`, ['count>=0']],
      [`checks{case:${c}}`, ['rate>0.99']],
    ]),
  ),
  summaryTrendStats: ['med', 'p(99)', 'max'],
};

export function baseline() {
  check(http.get(`${__ENV.BASELINE}/v1/webhooks/endpoints?limit=1`), { 'baseline 200': (r) => r.status === 200 });
}

export function hotToken() {
  const r = http.get(`${__ENV.BASE}/v1/webhooks/endpoints?limit=1`, { headers: { authorization: `Bearer ${__ENV.TOKEN}` } });
  check(r, { 'hot token 200': (x) => x.status === 200 });
}

export function scopeViolation() {
  const r = http.get(`${__ENV.BASE}/v1/webhooks/endpoints?limit=1`, { headers: { authorization: `Bearer ${__ENV.NARROW}` } });
  check(r, { 'scope violation 403': (x) => x.status === 403 });
}

export function issueToken() {
  const r = http.post(`${__ENV.BASE}/v1/auth/token`, JSON.stringify({ grant_type: 'client_credentials', client_id: __ENV.CLIENT_ID, client_secret: __ENV.CLIENT_SECRET }), { headers: { 'content-type': 'application/json' } });
  check(r, { 'token 200': (x) => x.status === 200 });
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY_FILE || 'k6-summary.json']: JSON.stringify(data) };
}
