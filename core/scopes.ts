/** Scopes are `<resource>:<action>`; roles map to scope sets. */

export const CONTROL_PLANE_SCOPES = [
  'webhooks:read',
  'webhooks:write',
  'events:publish',
  'credentials:revoke',
  'credentials:read',
  'credentials:read-any',
  'audit:read',
] as const;

export const DATA_PLANE_SCOPES = [
  'inference:read',
  'inference:write',
  'pipeline:read',
  'pipeline:write',
  'telemetry:read',
  'telemetry:write',
  'telemetry:export',
] as const;

export const ALL_SCOPES: readonly string[] = [...CONTROL_PLANE_SCOPES, ...DATA_PLANE_SCOPES];

const SCOPE_PATTERN = /^[a-z][a-z0-9-]*:[a-z][a-z0-9-]*$/;

export function isScope(value: string): boolean {
  return SCOPE_PATTERN.test(value);
}

export const DEFAULT_ROLES: Readonly<Record<string, readonly string[]>> = Object.freeze({
  admin: ALL_SCOPES,
  'webhook-publisher': ['webhooks:read', 'webhooks:write', 'events:publish'],
  'inference-reader': ['inference:read'],
  'pipeline-operator': ['pipeline:read', 'pipeline:write', 'events:publish'],
  'telemetry-exporter': ['telemetry:read', 'telemetry:export'],
  'security-officer': ['credentials:revoke', 'credentials:read', 'audit:read'],
});

/** Parses a space-delimited scope string (RFC 6749 §3.3) into a deduplicated list. */
export function parseScopeString(scope: string): string[] {
  return [...new Set(scope.split(' ').filter((s) => s.length > 0))];
}
