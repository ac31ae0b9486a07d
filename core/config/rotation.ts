/** Rotation settings: how often signing keys and client secrets rotate, the secrets' overlap, the check period. */
import { intSetting, numSetting, type Setting } from './schema.ts';

export const ROTATION_SETTINGS = {
  keyRotationDays: numSetting('rotation', 'SLUICE_KEY_ROTATION_DAYS', 30, 0.0001, 365, 'signing-key rotation period'),
  secretRotationDays: numSetting(
    'rotation',
    'SLUICE_SECRET_ROTATION_DAYS',
    30,
    0.0001,
    365,
    'client-secret rotation period',
  ),
  /** How long a rotated-out client secret keeps working beside its successor (the overlap; at most 7 days). */
  secretGraceDays: numSetting(
    'rotation',
    'SLUICE_SECRET_GRACE_DAYS',
    1,
    0,
    7,
    'how long a rotated-out client secret keeps working beside its successor (0 to 7, fractions ' +
      'allowed): the time the tenant has to hand the new secret to the client; a token of the old ' +
      'secret never reads the new one (`docs/operations.md`)',
  ),
  /** How often the rotation leader checks whether a key or secret is due (real milliseconds). */
  rotationCheckMs: intSetting(
    'rotation',
    'SLUICE_ROTATION_CHECK_MS',
    60_000,
    50,
    3_600_000,
    'how often the rotation leader checks whether a key or a client secret is due (real ms)',
  ),
} satisfies Record<string, Setting>;
