/** The route every server of the edge cases answers: Sluice's `GET /v1/webhooks/endpoints` of a tenant with none. */
export const ROUTE = '/v1/webhooks/endpoints?limit=1';
export const SCOPE = 'webhooks:read';
export const LIST_BODY = JSON.stringify({ data: [], next_cursor: null });
