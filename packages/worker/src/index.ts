export * from "./Worker.ts"
export * from "./Pipeline.ts"
