/**
 * The one error model: every error class derives from SluiceBaseError (a code and `retriable`),
 * Kafka failures are classified by their class and protocol type (never their message), and the
 * HTTP headers of a refusal are made in ingress from the facts the error carries.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import kafkajs from 'kafkajs';
import { ConfigError, OAuthError, SluiceBaseError, SluiceError, unavailable } from '../../core/errors.ts';
import { isPermanentWriteError, isTransientKafkaError } from '../../core/kafka/client.ts';
import { TopicSettingsError } from '../../core/kafka/topic-admin.ts';
import { LocalKafkaError } from '../../core/kafka/local-broker.ts';
import { WebhookVerificationError } from '../../receiver-sdk/verify.ts';
import { UsageError } from '../../cli/args.ts';
import { TokenError } from '../../contracts/verify/session.ts';
import { errorHeaders } from '../../ingress/problem.ts';

// kafkajs's own table of protocol errors (type, code, retriable), as a broker's answer builds them.
const { createErrorFromCode } = createRequire(import.meta.url)('kafkajs/src/protocol/error.js') as {
  createErrorFromCode(code: number): Error;
};
const protocol = (code: number) => createErrorFromCode(code);
const { KafkaJSAggregateError, KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded, KafkaJSRequestTimeoutError } =
  kafkajs;
// Their declared constructors lag the JavaScript (no options, no message).
const KafkaJSTimeout = kafkajs.KafkaJSTimeout as unknown as new (message: string) => Error;
const KafkaJSNonRetriableError = kafkajs.KafkaJSNonRetriableError as unknown as new (
  e: Error,
  opts: { cause: Error },
) => Error;

t.test('every error class has a code and a retriable flag from the one base', async (t) => {
  const cases: [SluiceBaseError, string][] = [
    [new SluiceError('NOT_FOUND', 'x'), 'NOT_FOUND'],
    [new OAuthError('invalid_client', 'x'), 'invalid_client'],
    [new ConfigError('SLUICE_PORT', 'x'), 'CONFIG_INVALID'],
    [new UsageError('x'), 'USAGE'],
    [new LocalKafkaError('JAVA_MISSING', 'x'), 'JAVA_MISSING'],
    [new TopicSettingsError('x'), 'TOPIC_SETTINGS_REFUSED'],
    [new WebhookVerificationError('SIGNATURE_MISMATCH', 'x'), 'SIGNATURE_MISMATCH'],
    [new TokenError(401, 'no'), 'TOKEN_REFUSED'],
  ];
  for (const [err, code] of cases) {
    t.ok(err instanceof SluiceBaseError, `${err.name} derives from SluiceBaseError`);
    t.equal(err.code, code, `${err.name}: code ${code}`);
    t.equal(err.retriable, false, `${err.name}: not retriable`);
  }
  t.equal(
    new ConfigError('SLUICE_PORT', 'must be a port').message,
    'SLUICE_PORT: must be a port',
    'messages as before',
  );
  t.equal(new OAuthError('invalid_client', 'x').status, 401);
  t.equal(new OAuthError('invalid_grant', 'x').status, 400);
});

t.test('SluiceError: retriable by code unless told; facts kept', async (t) => {
  t.equal(new SluiceError('UNAVAILABLE', 'x').retriable, true);
  t.equal(new SluiceError('RATE_LIMITED', 'x').retriable, true);
  t.equal(new SluiceError('PAYLOAD_TOO_LARGE', 'x').retriable, false);
  t.equal(new SluiceError('UNAVAILABLE', 'x', {}, { retriable: false }).retriable, false);
  const cause = new Error('underneath');
  const u = unavailable('Kafka is away', cause);
  t.same([u.code, u.status, u.retryAfterSeconds, u.cause], ['UNAVAILABLE', 503, 1, cause]);
  t.same(u.toProblem('/p'), {
    type: 'https://sluice.dev/problems/unavailable',
    title: 'Service unavailable',
    status: 503,
    detail: 'Kafka is away',
    code: 'UNAVAILABLE',
    instance: '/p',
  });
});

t.test('ingress makes the headers from the facts', async (t) => {
  t.same(errorHeaders(unavailable('x')), { 'Retry-After': '1' });
  t.same(errorHeaders(new SluiceError('RATE_LIMITED', 'x', {}, { retryAfterSeconds: 7 })), { 'Retry-After': '7' });
  t.same(errorHeaders(new SluiceError('TOKEN_MISSING', 'x', {}, { challenge: { realm: 'sluice' } })), {
    'WWW-Authenticate': 'Bearer realm="sluice"',
  });
  t.same(
    errorHeaders(
      new SluiceError('TOKEN_EXPIRED', 'x', {}, { challenge: { error: 'invalid_token', description: 'expired' } }),
    ),
    {
      'WWW-Authenticate': 'Bearer error="invalid_token", error_description="expired"',
    },
  );
  t.same(
    errorHeaders(
      new SluiceError(
        'SCOPE_VIOLATION',
        'x',
        {},
        { challenge: { error: 'insufficient_scope', scope: 'webhooks:write' } },
      ),
    ),
    {
      'WWW-Authenticate': 'Bearer error="insufficient_scope", scope="webhooks:write"',
    },
  );
  t.same(errorHeaders(new SluiceError('METHOD_NOT_ALLOWED', 'x', {}, { allow: ['GET', 'POST'] })), {
    Allow: 'GET, POST',
  });
  t.same(errorHeaders(new SluiceError('NOT_FOUND', 'x')), {});
});

t.test('Kafka failures: transient by class and protocol type, never by message', async (t) => {
  const transient: [string, unknown][] = [
    ['LEADER_NOT_AVAILABLE', protocol(5)],
    ['NOT_LEADER_FOR_PARTITION', protocol(6)],
    ['REQUEST_TIMED_OUT', protocol(7)],
    ['COORDINATOR_LOAD_IN_PROGRESS', protocol(14)],
    ['NOT_COORDINATOR', protocol(16)],
    [
      'a connection refused',
      new KafkaJSConnectionError('Connection error: connect ECONNREFUSED 127.0.0.1:1', { code: 'ECONNREFUSED' }),
    ],
    ['a request timeout', new KafkaJSRequestTimeoutError('Request createTopics(key: 19, version: 3) timed out')],
    ['a wait that ran out', new KafkaJSTimeout('Timed out while waiting for topic leaders')],
    [
      'retries exceeded on a connection error',
      new KafkaJSNumberOfRetriesExceeded(new KafkaJSConnectionError('Connection error'), {
        retryCount: 8,
        retryTime: 5000,
      }),
    ],
    ['a Sluice UNAVAILABLE', unavailable('no leader yet for x')],
  ];
  for (const [what, err] of transient) t.equal(isTransientKafkaError(err), true, `${what}: transient`);
  const permanent: [string, unknown][] = [
    ['TOPIC_AUTHORIZATION_FAILED', protocol(29)],
    ['INVALID_REPLICATION_FACTOR', protocol(38)],
    ['TOPIC_ALREADY_EXISTS', protocol(36)],
    ['kafkajs giving up on a non-retriable one', new KafkaJSNonRetriableError(protocol(38), { cause: protocol(38) })],
    ['an aggregate of permanent ones', new KafkaJSAggregateError('x', [protocol(36), protocol(38)])],
    ['a topic refused by Sluice', new TopicSettingsError('cleanup.policy=compact')],
    // The old regex took any message with "timeout", "metadata" or "not available" for transient.
    ['a plain error whose message says timeout', new Error('metadata not available: timeout')],
    ['a bug', new TypeError("Cannot read properties of undefined (reading 'leader')")],
  ];
  for (const [what, err] of permanent) t.equal(isTransientKafkaError(err), false, `${what}: not transient`);
});

t.test('a write Kafka refuses for good is told from one that may pass', async (t) => {
  t.equal(isPermanentWriteError(protocol(10)), true, 'MESSAGE_TOO_LARGE');
  t.equal(
    isPermanentWriteError(new KafkaJSNonRetriableError(protocol(10), { cause: protocol(10) })),
    true,
    'wrapped by kafkajs',
  );
  t.equal(isPermanentWriteError(new SluiceError('PAYLOAD_TOO_LARGE', 'x')), true);
  t.equal(isPermanentWriteError(unavailable('x', protocol(10))), false, "Sluice's own verdict decides first");
  t.equal(isPermanentWriteError(protocol(6)), false, 'NOT_LEADER_FOR_PARTITION');
  t.equal(isPermanentWriteError(new Error('MESSAGE_TOO_LARGE')), false, 'not by message');
});
