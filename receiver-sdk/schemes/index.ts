/**
 * The signature schemes every delivery is signed with, in order: the dispatcher adds each one's
 * headers (../signing.ts), and a receiver's `verifyWebhook` (../verify.ts) checks the one it names,
 * or with `scheme: 'auto'` the first one the headers carry (Sluice's when both are there).
 *
 * Adding a scheme: a file here exporting a `SignatureScheme` (scheme.ts), and its entry below.
 */
import { sluiceScheme } from './sluice.ts';
import { standardScheme } from './standard.ts';

export const SIGNATURE_SCHEMES = [sluiceScheme, standardScheme] as const;

/** The name of a scheme: what `verifyWebhook`'s `scheme` option takes besides 'auto'. */
export type SchemeName = (typeof SIGNATURE_SCHEMES)[number]['name'];

export type { SignatureScheme, SignedParts, WebhookHeaders } from './scheme.ts';
