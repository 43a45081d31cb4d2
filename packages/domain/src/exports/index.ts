export * from "./Api.ts"
export * from "./Export.ts"
export * from "./errors.ts"
