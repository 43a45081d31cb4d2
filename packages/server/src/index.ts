export * from "./Authentication.ts"
export * from "./HttpApp.ts"
export * from "./ProblemRouting.ts"
export * from "./Validation.ts"
