import { writeFileSync } from 'node:fs';
import { parse, required, UsageError } from '../args.ts';
import { say, untilSignal } from '../runtime.ts';
import { actionCommand, type Command } from '../command.ts';

const USAGE = `usage: sluice contract <action> [options]

actions:
  verify --base-url URL --client-id ID --client-secret SECRET [--junit FILE]
         [--webhook-url URL] [--max-body-bytes N] [--revocable-client-id ID --revocable-client-secret S]
         [--allow-unimplemented]
      provider verification of a live Sluice against contracts/openapi.yaml: every operation,
      crafted bad inputs, valid inputs, read-after-create, delete → 404; a table per operation;
      exits 1 on any failure (and on documented routes that do not exist, unless
      --allow-unimplemented). The client should hold at least two scopes (admin does).
  limits --base-url URL --client-id ID --client-secret SECRET [--time-scale N]
         [--revocable-client-id ID --revocable-client-secret S]
         [--rotation-scale N --rotation-check-ms M] [--skip LIMIT,LIMIT...]
      measures every limit the service promises (e.g. access token lifetime, revocation propagation,
      credential rotation cycle, verification acknowledgement, delivery timeout, 17 failures over
      the 72 h retry span, DLQ retention, replay window) against a live Sluice and prints measured
      next to promised; a guard that fails is FAIL (exit 1), one skips only when --skip
      names it or its input was not given (no --time-scale, no revocable client). --time-scale must equal
      the SLUICE_TIME_SCALE of the Sluice (e.g. 4320 runs the 72 h ladder in a minute);
      --rotation-scale N: the Sluice rotates every 30/N days (SLUICE_KEY_ROTATION_DAYS and
      SLUICE_SECRET_ROTATION_DAYS), checked every M ms (SLUICE_ROTATION_CHECK_MS)
  receiver --port P --secret S [--host H] [--tolerance 300]
      a webhook receiver that checks every delivery against the contract and the signing rules
      (signature, timestamp window, headers, body schema), answers 200 to good ones and 400 to
      bad ones, and prints a line per delivery; Ctrl-C prints a summary`;

export const contract: Command = actionCommand('contract', USAGE, {
  verify: (a) => verify(a),
  receiver: (a) => receiver(a),
  limits: (a) => limits(a),
});

async function verify(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      'base-url': { type: 'string' },
      'client-id': { type: 'string' },
      'client-secret': { type: 'string' },
      junit: { type: 'string' },
      'webhook-url': { type: 'string' },
      'max-body-bytes': { type: 'string' },
      'revocable-client-id': { type: 'string' },
      'revocable-client-secret': { type: 'string' },
      'allow-unimplemented': { type: 'boolean' },
    },
    USAGE,
  );
  const baseUrl = values['base-url'] ?? process.env.SLUICE_BASE_URL;
  if (!baseUrl) throw new UsageError(`--base-url is required\n\n${USAGE}`);
  const clientId = values['client-id'] ?? process.env.SLUICE_CLIENT_ID ?? required(values, 'client-id', USAGE);
  const clientSecret =
    values['client-secret'] ?? process.env.SLUICE_CLIENT_SECRET ?? required(values, 'client-secret', USAGE);
  const maxBody = values['max-body-bytes'] !== undefined ? Number(values['max-body-bytes']) : undefined;
  if (maxBody !== undefined && !(Number.isInteger(maxBody) && maxBody > 0))
    throw new UsageError('--max-body-bytes must be a positive integer');
  const revId = values['revocable-client-id'];
  const revSecret = values['revocable-client-secret'];
  if ((revId === undefined) !== (revSecret === undefined))
    throw new UsageError('--revocable-client-id and --revocable-client-secret go together');
  const { verifyProvider } = await import('../../contracts/verify/verifier.ts');
  const { formatTable, formatJUnit, failed } = await import('../../contracts/verify/report.ts');
  const report = await verifyProvider({
    baseUrl,
    clientId,
    clientSecret,
    webhookUrl: values['webhook-url'],
    maxBodyBytes: maxBody,
    allowUnimplemented: values['allow-unimplemented'] === true,
    revocable: revId && revSecret ? { clientId: revId, clientSecret: revSecret } : undefined,
  });
  say(formatTable(report));
  if (values.junit) {
    writeFileSync(values.junit, formatJUnit(report));
    say(`JUnit report: ${values.junit}`);
  }
  return failed(report).length > 0 ? 1 : 0;
}

async function receiver(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    { port: { type: 'string' }, secret: { type: 'string' }, host: { type: 'string' }, tolerance: { type: 'string' } },
    USAGE,
  );
  const port = Number(required(values, 'port', USAGE));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError('--port must be a port number');
  const secret = required(values, 'secret', USAGE);
  const tolerance = values.tolerance !== undefined ? Number(values.tolerance) : 300;
  const { startConformanceReceiver } = await import('../../contracts/receiver/server.ts');
  const r = await startConformanceReceiver({
    port,
    host: values.host ?? '127.0.0.1',
    secret,
    toleranceSeconds: tolerance,
    onDelivery: (d) =>
      say(
        d.violations.length
          ? `VIOLATION ${d.eventType ?? '?'} ${d.eventId ?? '?'}: ${d.violations.join('; ')}`
          : `ok        ${d.eventType} ${d.eventId} attempt ${d.attempt}`,
      ),
  });
  say(`conformance receiver on http://${values.host ?? '127.0.0.1'}:${r.port}/ (Ctrl-C stops it)`);
  await untilSignal();
  await r.close();
  const bad = r.deliveries.filter((d) => d.violations.length > 0).length;
  say(`${r.deliveries.length - bad} passed, ${bad} failed`);
  return bad > 0 ? 1 : 0;
}

async function limits(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      'base-url': { type: 'string' },
      'client-id': { type: 'string' },
      'client-secret': { type: 'string' },
      'time-scale': { type: 'string' },
      'revocable-client-id': { type: 'string' },
      'revocable-client-secret': { type: 'string' },
      'rotation-scale': { type: 'string' },
      'rotation-check-ms': { type: 'string' },
      skip: { type: 'string' },
    },
    USAGE,
  );
  const rotationScale = values['rotation-scale'] !== undefined ? Number(values['rotation-scale']) : undefined;
  const rotationCheckMs = Number(values['rotation-check-ms'] ?? 60_000);
  if (rotationScale !== undefined && !(rotationScale >= 1))
    throw new UsageError('--rotation-scale must be a number >= 1');
  if (!(rotationCheckMs > 0)) throw new UsageError('--rotation-check-ms must be a positive number');
  const scale = values['time-scale'] !== undefined ? Number(values['time-scale']) : undefined;
  if (scale !== undefined && !(scale >= 1)) throw new UsageError('--time-scale must be a number >= 1');
  const revId = values['revocable-client-id'];
  const revSecret = values['revocable-client-secret'];
  const { runLimits, formatLimits, LIMIT_NAMES } = await import('../../contracts/limits/index.ts');
  const skip = values.skip
    ? values.skip
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : undefined;
  const unknown = skip?.filter((s) => !LIMIT_NAMES.includes(s)) ?? [];
  if (unknown.length > 0)
    throw new UsageError(
      `--skip: no limit named ${unknown.map((u) => `"${u}"`).join(', ')}; the limits are: ${LIMIT_NAMES.join(', ')}`,
    );
  const rows = await runLimits({
    skip,
    baseUrl: required(values, 'base-url', USAGE).replace(/\/+$/, ''),
    clientId: required(values, 'client-id', USAGE),
    clientSecret: required(values, 'client-secret', USAGE),
    timeScale: scale,
    revocable: revId && revSecret ? { clientId: revId, clientSecret: revSecret } : undefined,
    rotation: rotationScale !== undefined ? { scale: rotationScale, checkMs: rotationCheckMs } : undefined,
  });
  say(formatLimits(rows));
  return rows.some((r) => r.outcome === 'fail') ? 1 : 0;
}
