/**
 * The package's public surface (`import ... from 'sluice'`). Receivers need only the webhook
 * verification (also at 'sluice/webhooks'); the rest is for code that embeds or talks to Sluice.
 */
export {
  verifyWebhook,
  WebhookVerificationError,
  type WebhookVerificationCode,
  type VerifyWebhookOptions,
  type WebhookHeaders,
  type SchemeName,
} from './verify.ts';
export type { WebhookBody, EndpointState } from '../core/webhooks/records.ts';
export { KNOWN_EVENT_KINDS } from '../core/webhooks/records.ts';
export { EVENT_ID_HEADER, EVENT_TYPE_HEADER, ATTEMPT_HEADER } from '../outbound/signing.ts';
export { SIGNATURE_HEADER, PREVIOUS_SIGNATURE_HEADER, TIMESTAMP_HEADER } from './schemes/sluice.ts';
export {
  STANDARD_ID_HEADER,
  STANDARD_TIMESTAMP_HEADER,
  STANDARD_SIGNATURE_HEADER,
} from './schemes/standard.ts';
export {
  checkTargetUrl,
  assertPublicAddress,
  type TargetGuardOptions,
  type TargetLookup,
} from '../outbound/target-guard.ts';
export { SluiceBaseError, SluiceError, ERRORS, type ErrorCode } from '../core/errors.ts';
