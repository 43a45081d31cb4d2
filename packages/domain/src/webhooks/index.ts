export * from "./signature.ts"
export * from "./errors.ts"
