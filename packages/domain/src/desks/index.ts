export * from "./DeskMail.ts"
export * from "./errors.ts"
