export * from "./signature.ts"
