export * from "./Api.ts"
export * from "./errors.ts"
export * from "./Rule.ts"
