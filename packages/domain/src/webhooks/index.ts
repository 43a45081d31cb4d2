export * from "./signature.ts"
export * from "./dispatch.ts"
