// One case of the bench suite (bench/suite.ts) per k6 run: one request shape against one server.
// Only responses with the EXPECT status count as throughput; every other status (0: no response)
// is counted by status, and the suite fails the case when there is any.
// Env: URL, METHOD (GET), BODIES (a JSON array of request bodies; VU i sends body i mod n),
//      EXPECT (200), DURATION (s), VUS,
//      TOKENS (comma-separated bearer tokens; VU i uses token i mod n: enough clients that no one
//      client meets the per-client rate limit), RATE (requests/s: an open model at that rate
//      instead of VUS closed-loop users), SUMMARY_FILE,
//      TLS_CERT and TLS_KEY (PEM files: the client certificate for an https URL that asks for one;
//      an https URL's server certificate is not verified: the cases measure, they do not check).
import http from 'k6/http';
import { Counter } from 'k6/metrics';

const D = Number(__ENV.DURATION || 10);
const VUS = Number(__ENV.VUS || 32);
const RATE = Number(__ENV.RATE || 0);
const EXPECT = Number(__ENV.EXPECT || 200);
const TOKENS = (__ENV.TOKENS || '').split(',').filter(Boolean);
const BODIES = JSON.parse(__ENV.BODIES || '[]').map((b) => JSON.stringify(b));
const STATUSES = [0, 200, 201, 204, 400, 401, 403, 404, 409, 413, 429, 500, 502, 503];

// No `domains`: k6 offers the certificate to any server that asks for one.
const TLS_AUTH = __ENV.TLS_CERT ? [{ cert: open(__ENV.TLS_CERT), key: open(__ENV.TLS_KEY) }] : [];

const byStatus = Object.fromEntries(STATUSES.map((s) => [s, new Counter(`status_${s}`)]));
const otherStatus = new Counter('status_other');
const expected = new Counter('expected');

export const options = {
  discardResponseBodies: true,
  scenarios: {
    run:
      RATE > 0
        ? {
            executor: 'constant-arrival-rate',
            rate: RATE,
            timeUnit: '1s',
            duration: `${D}s`,
            preAllocatedVUs: VUS * 2,
            maxVUs: VUS * 8,
          }
        : { executor: 'constant-vus', vus: VUS, duration: `${D}s` },
  },
  // Only the requests that got the expected status make up the latency figures.
  thresholds: { 'http_req_duration{expected_response:true}': ['max>=0'] },
  summaryTrendStats: ['med', 'p(99)', 'max'],
  insecureSkipTLSVerify: true,
  tlsAuth: TLS_AUTH,
};

const params = (vu) => {
  const headers = {};
  if (TOKENS.length > 0) headers.authorization = `Bearer ${TOKENS[vu % TOKENS.length]}`;
  if (BODIES.length > 0) headers['content-type'] = 'application/json';
  // Statuses other than EXPECT are failures in k6's own accounting too.
  return { headers, responseCallback: http.expectedStatuses(EXPECT) };
};

export default function () {
  const r = http.request(
    __ENV.METHOD || 'GET',
    __ENV.URL,
    BODIES.length > 0 ? BODIES[__VU % BODIES.length] : null,
    params(__VU),
  );
  (byStatus[r.status] ?? otherStatus).add(1);
  if (r.status === EXPECT) expected.add(1);
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY_FILE || 'k6-summary.json']: JSON.stringify(data) };
}
