export * from "./Worker.ts"
export * from "./Pipeline.ts"
export * from "./Delivery.ts"
export * from "./MailAuth.ts"
