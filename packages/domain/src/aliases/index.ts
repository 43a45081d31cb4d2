export * from "./candidates.ts"
export { aliasWords, parseWordList } from "./words.ts"
export * from "./errors.ts"
