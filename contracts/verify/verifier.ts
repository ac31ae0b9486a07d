/**
 * Provider verification: runs every operation of the contract against a live Sluice.
 *
 *   const report = await verifyProvider({ baseUrl, clientId, clientSecret });
 *   console.log(formatTable(report)); process.exitCode = failed(report).length ? 1 : 0;
 */
import { SluiceBaseError } from '../../core/errors.ts';
import { listOperations, loadContract, type Json, type Operation } from '../contract.ts';
import { ContractSchemas } from '../schemas.ts';
import { authCases, bodyCases, isImplemented, methodCase, publicCases, unknownMethodCase } from './cases.ts';
import { ORDER, SCENARIOS, validBody } from './scenarios/index.ts';
import { Session, TokenError, type VerifyOptions } from './session.ts';
import type { Report } from './report.ts';

export type { VerifyOptions } from './session.ts';

function ordered(ops: Operation[]): Operation[] {
  const rank = (op: Operation) => {
    const i = ORDER.indexOf(op.operationId);
    return i < 0 ? ORDER.length : i;
  };
  return [...ops].sort((a, b) => rank(a) - rank(b));
}

export async function verifyProvider(opts: VerifyOptions, doc: Json = loadContract()): Promise<Report> {
  const s = new Session(doc, new ContractSchemas(doc), { ...opts, baseUrl: opts.baseUrl.replace(/\/+$/, '') });
  // Fails fast: a TokenError when the credentials do not work, a clear line when nothing answers.
  await s.token().catch((err: Error) => {
    if (err instanceof TokenError) throw err;
    const why = (err.cause as Error | undefined)?.message ?? err.message;
    const detail = `cannot reach ${s.opts.baseUrl}: ${why}`;
    throw new SluiceBaseError('UNREACHABLE', detail, { retriable: true, cause: err });
  });
  const donePaths = new Set<string>();
  for (const op of ordered(listOperations(doc))) {
    const before = s.results.length;
    const scenario = SCENARIOS[op.operationId];
    if (!scenario) s.record(op, 'scenario', 'fail', 'the verifier has no scenario for this operation of the contract');
    else {
      const probe = await isImplemented(s, op);
      if (!probe.implemented)
        s.record(
          op,
          'route exists',
          'not-implemented',
          `${op.method} ${op.path} answers ${probe.status}`,
          probe.status,
        );
      else {
        await authCases(s, op);
        await publicCases(s, op);
        await methodCase(s, op, donePaths);
        await unknownMethodCase(s, op, donePaths);
        await bodyCases(s, op, validBody(s, op.operationId));
        await scenario(s, op);
      }
    }
    opts.onOperation?.(s.results.slice(before));
  }
  return { baseUrl: s.opts.baseUrl, results: s.results, allowUnimplemented: opts.allowUnimplemented === true };
}
