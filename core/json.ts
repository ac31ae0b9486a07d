/** JSON parsing that reports where a fault is, as a JSON path (`$.events[2]`). */
import { invalidRequest, type FieldError } from './errors.ts';

/** The JSON path of the value being read at `pos` in `text` (best effort for malformed input). */
export function jsonPathAt(text: string, pos: number): string {
  type Frame = { kind: 'object'; key: string | null; expectKey: boolean } | { kind: 'array'; index: number };
  const stack: Frame[] = [];
  let i = 0;
  const end = Math.min(pos, text.length);
  while (i < end) {
    const ch = text[i];
    const top = stack[stack.length - 1];
    if (ch === '"') {
      let j = i + 1;
      let s = '';
      while (j < text.length && text[j] !== '"') {
        if (text[j] === '\\') {
          s += text[j + 1] ?? '';
          j += 2;
        } else s += text[j++];
      }
      if (top?.kind === 'object' && top.expectKey) {
        top.key = s;
        top.expectKey = false;
      }
      i = j + 1;
      continue;
    }
    if (ch === '{') stack.push({ kind: 'object', key: null, expectKey: true });
    else if (ch === '[') stack.push({ kind: 'array', index: 0 });
    else if (ch === '}' || ch === ']') stack.pop();
    else if (ch === ',') {
      if (top?.kind === 'array') top.index++;
      else if (top?.kind === 'object') top.expectKey = true;
    }
    i++;
  }
  let path = '$';
  for (const f of stack) {
    if (f.kind === 'array') path += `[${f.index}]`;
    else if (f.key !== null) path += /^[A-Za-z_][A-Za-z0-9_]*$/.test(f.key) ? `.${f.key}` : `[${JSON.stringify(f.key)}]`;
  }
  return path;
}

/** Parses a JSON body or throws 400 INVALID_REQUEST naming the path and position of the fault. */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === '') throw invalidRequest([{ path: '$', message: 'the request body is empty; a JSON document is required' }]);
  try {
    return JSON.parse(text);
  } catch (err) {
    const m = /position (\d+)/.exec((err as Error).message);
    const pos = m ? Number(m[1]) : text.length;
    const errors: FieldError[] = [{ path: jsonPathAt(text, pos), message: `malformed JSON at position ${pos}: ${(err as Error).message.replace(/ in JSON at position \d+.*$/, '')}` }];
    throw invalidRequest(errors);
  }
}
