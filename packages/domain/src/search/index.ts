export * from "./query.ts"
