// One case of bench/suite/k6.ts per k6 run: one request shape against one server. Only responses with
// the expected status count as throughput and latency; every other status (0: no response) is counted
// by status. Env CASE: the case as JSON (bench/suite/k6.ts CaseSpec, and the summary's file). VU i sends
// token i and body i (mod n). An https server's certificate is not verified: the cases measure.
import http from 'k6/http';
import { Counter } from 'k6/metrics';

const C = JSON.parse(__ENV.CASE);
const TOKENS = C.tokens ?? [];
const BODIES = (C.bodies ?? []).map((b) => JSON.stringify(b));
const STATUSES = [0, 200, 201, 204, 400, 401, 403, 404, 409, 413, 429, 500, 502, 503];

const byStatus = Object.fromEntries(STATUSES.map((s) => [s, new Counter(`status_${s}`)]));
const otherStatus = new Counter('status_other');
const expected = new Counter('expected');

export const options = {
  discardResponseBodies: true,
  scenarios: {
    run: C.rate
      ? {
          executor: 'constant-arrival-rate',
          rate: C.rate,
          timeUnit: '1s',
          duration: `${C.duration}s`,
          preAllocatedVUs: C.vus * 2,
          maxVUs: C.vus * 8,
        }
      : { executor: 'constant-vus', vus: C.vus, duration: `${C.duration}s` },
  },
  // Only the requests that got the expected status make up the latency figures.
  thresholds: { 'http_req_duration{expected_response:true}': ['max>=0'] },
  summaryTrendStats: ['med', 'p(99)', 'max'],
  insecureSkipTLSVerify: true,
  // No `domains`: k6 offers the certificate to any server that asks for one.
  tlsAuth: C.clientCert ? [{ cert: open(C.clientCert.cert), key: open(C.clientCert.key) }] : [],
};

// Statuses other than the expected one are failures in k6's own accounting too.
const responseCallback = http.expectedStatuses(C.expect);

export default function () {
  const headers = {};
  if (TOKENS.length > 0) headers.authorization = `Bearer ${TOKENS[__VU % TOKENS.length]}`;
  if (BODIES.length > 0) headers['content-type'] = 'application/json';
  const body = BODIES.length > 0 ? BODIES[__VU % BODIES.length] : null;
  const r = http.request(C.method, C.url, body, { headers, responseCallback });
  (byStatus[r.status] ?? otherStatus).add(1);
  if (r.status === C.expect) expected.add(1);
}

export function handleSummary(data) {
  return { [C.summaryFile]: JSON.stringify(data) };
}
