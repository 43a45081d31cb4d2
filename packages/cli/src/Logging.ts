/**
 * How the program logs, on every thread that runs part of it: to stderr (stdout carries only
 * what a command prints), at Info unless BURNBOX_LOG_LEVEL=debug.
 */
import { Effect, Logger, References } from "effect"

const StderrLogger = Logger.layer([Logger.withConsoleError(Logger.formatSimple)])

export const withProgramLogging = <A, E, R>(program: Effect.Effect<A, E, R>) =>
  program.pipe(
    Effect.provide(StderrLogger),
    Effect.provideService(References.MinimumLogLevel, process.env["BURNBOX_LOG_LEVEL"] === "debug" ? "Debug" : "Info")
  )
