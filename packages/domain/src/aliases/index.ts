export * from "./candidates.ts"
export { aliasWords, parseWordList } from "./words.ts"
