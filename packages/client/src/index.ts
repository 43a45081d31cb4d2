/**
 * @burnbox/client: the typed client of the burnbox API, derived from the HttpApi contract.
 * `BurnboxClient` is the Effect face, `createClient` the Promise face; `verifyWebhook` checks a
 * delivery's signatures. No `node:` imports: it runs in Node 20+ and in browsers.
 */
export * from "./BurnboxClient.ts"
export * from "./BurnboxProblem.ts"
export * from "./createClient.ts"
export * from "./exports.ts"
export * from "./verifyWebhook.ts"
export * from "./rules.ts"
