/** Consumer mocks: an in-memory Sluice and msw handlers answering from it (see docs/contract-testing.md). */
export { MockSluice, type MockClient, type MockEvent, type MockTestSend, type TargetAnswer } from './state.ts';
export { sluiceHandlers, MockContractError, type HandlerOptions } from './handlers.ts';
