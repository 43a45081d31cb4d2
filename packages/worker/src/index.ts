export * from "./Worker.ts"
