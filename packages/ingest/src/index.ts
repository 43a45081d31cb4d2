export * from "./SmtpIngest.ts"
