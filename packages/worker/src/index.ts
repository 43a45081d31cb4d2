export * from "./Worker.ts"
export * from "./pipeline/Pipeline.ts"
export * from "./webhooks/Delivery.ts"
export * from "./pipeline/MailAuth.ts"
