/** How the program words a failure (Service.ts on the main thread, IngestWorkerThread.ts on its own). */
import { StartupFailure } from "@burnbox/store"
import { Cause } from "effect"

/** What a failure says: a startup failure's or configuration error's one line, anything else whole. */
export const failureLine = (cause: Cause.Cause<unknown>): string => {
  const errors = cause.reasons.flatMap((reason) => Cause.isFailReason(reason) ? [reason.error] : Cause.isDieReason(reason) ? [reason.defect] : [])
  const startup = errors.find((error): error is StartupFailure => error instanceof StartupFailure)
  const configError = errors.find((error) => (error as { _tag?: unknown })?._tag === "ConfigError")
  return startup?.message ?? (configError === undefined ? Cause.pretty(cause) : `configuration: ${String((configError as { message?: unknown }).message ?? configError)}`)
}

