export * from "./signature.ts"
export * from "./errors.ts"
export * from "./dispatch.ts"
