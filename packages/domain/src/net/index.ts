export * from "./address-policy.ts"
export * from "./webhook-url.ts"
