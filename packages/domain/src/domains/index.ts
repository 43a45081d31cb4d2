export * from "./errors.ts"
