/**
 * JSON Schema 2020-12 validation against the contract's schemas (ajv, formats on).
 *
 *   const schemas = new ContractSchemas(loadContract());
 *   schemas.errors('#/components/schemas/TokenResponse', body); // [] when valid
 */
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import type { Json } from './contract.ts';

// ajv and ajv-formats are CommonJS with a `default` member; under NodeNext the default import is the module object.
const Ajv2020 = ((Ajv2020Module as { default?: unknown }).default ??
  Ajv2020Module) as typeof import('ajv/dist/2020.js').default;
const addFormats = ((addFormatsModule as { default?: unknown }).default ??
  addFormatsModule) as typeof import('ajv-formats').default;

export const CONTRACT_ID = 'sluice-contract';

type AjvOptions = ConstructorParameters<typeof Ajv2020>[0];
export type Ajv = InstanceType<typeof Ajv2020>;

/** An ajv (2020-12, formats on) holding the contract under CONTRACT_ID, so `sluice-contract#/...` refs resolve. */
export function contractAjv(doc: Json, options: AjvOptions = {}): Ajv {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false, ...options });
  addFormats(ajv);
  ajv.addSchema(doc, CONTRACT_ID);
  return ajv;
}

export class ContractSchemas {
  private readonly ajv;
  private readonly byRef = new Map<string, ValidateFunction>();
  private readonly inline = new WeakMap<object, ValidateFunction>();

  constructor(doc: Json) {
    this.ajv = contractAjv(doc);
  }

  /** Errors of `value` against a schema of the contract: a `#/...` pointer or a schema object from it. */
  errors(schema: string | Json, value: unknown): string[] {
    const validate = this.compile(schema);
    if (validate(value)) return [];
    return (validate.errors ?? []).map((e) => {
      const extra = e.params && 'additionalProperty' in e.params ? ` "${e.params.additionalProperty}"` : '';
      const unevaluated = e.params && 'unevaluatedProperty' in e.params ? ` "${e.params.unevaluatedProperty}"` : '';
      return `${e.instancePath || '(root)'} ${e.message}${extra}${unevaluated}`;
    });
  }

  private compile(schema: string | Json): ValidateFunction {
    if (typeof schema === 'string') {
      let v = this.byRef.get(schema);
      if (!v) {
        v = this.ajv.compile({ $ref: `${CONTRACT_ID}${schema}` });
        this.byRef.set(schema, v);
      }
      return v;
    }
    let v = this.inline.get(schema);
    if (!v) {
      // Schemas taken from the document hold `#/components/...` refs: resolve them against the contract.
      v = this.ajv.compile({ $id: `inline-${Math.random().toString(36).slice(2)}`, ...rebase(schema) });
      this.inline.set(schema, v);
    }
    return v;
  }
}

/** A schema taken from the document, its `#/components/...` refs pointed at the contract held by the ajv. */
export function rebase<T>(value: T): T {
  if (Array.isArray(value)) return value.map(rebase) as T;
  if (value && typeof value === 'object') {
    const out: Json = {};
    for (const [k, v] of Object.entries(value))
      out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `${CONTRACT_ID}${v}` : rebase(v);
    return out as T;
  }
  return value;
}
