export * from "./Harness.ts"
export * from "./ManualClock.ts"
export * from "./Shapes.ts"
export * from "./Receiver.ts"
