/**
 * Checks one response against what the contract documents for it: the status is documented (or
 * covered by `default`), the Content-Type is one of the documented media types, the body and the
 * documented headers validate, a 204 has no body, and nothing answers 500.
 */
import type { ResponseSpec } from '../contract.ts';
import type { ContractSchemas } from '../schemas.ts';
import type { Exchange } from './http.ts';

export function responseFaults(
  schemas: ContractSchemas,
  documented: Record<string, ResponseSpec>,
  ex: Exchange,
): string[] {
  const faults: string[] = [];
  if (ex.status === 500) faults.push('answered 500 (never allowed)');
  const spec = documented[String(ex.status)] ?? documented[`${String(ex.status)[0]}XX`] ?? documented.default;
  if (!spec) {
    faults.push(`status ${ex.status} is not documented (documented: ${Object.keys(documented).join(', ')})`);
    return faults;
  }
  const content = spec.content ?? {};
  const types = Object.keys(content);
  if (types.length === 0) {
    if (ex.text !== '' && spec !== documented.default)
      faults.push(`status ${ex.status} documents no body, got ${ex.text.length} bytes`);
  } else {
    const media = content[ex.mediaType] ?? (types.includes('*/*') ? content['*/*'] : undefined);
    if (!media)
      faults.push(
        `Content-Type "${ex.mediaType || '(none)'}" is not documented for ${ex.status} ` +
          `(documented: ${types.join(', ')})`,
      );
    else if (media.schema && ex.mediaType.endsWith('json')) {
      if (!ex.isJson) faults.push(`body is not JSON: ${ex.text.slice(0, 120)}`);
      else for (const e of schemas.errors(media.schema, ex.json)) faults.push(`body ${e}`);
    }
  }
  for (const [name, h] of Object.entries(spec.headers ?? {})) {
    const value = ex.headers.get(name);
    if (value === null) {
      if (h.required) faults.push(`required header ${name} is missing`);
      continue;
    }
    if (h.schema)
      for (const e of schemas.errors(h.schema, value))
        faults.push(`header ${name} ${e.replace('(root) ', '')}: "${value}"`);
  }
  return faults;
}
