/**
 * The commands that run burnbox itself or work on its database: start | serve | ingest | worker |
 * migrate | admin. Loaded by main.ts only for them, so the API commands (Remote.ts) start fast.
 */
import { existsSync } from "node:fs"
import { IngestLive } from "@burnbox/ingest"
import { HttpLive } from "@burnbox/server"
import {
  Accounts,
  BurnboxConfig,
  checkPortFree,
  DatabaseLive,
  DatabaseUrl,
  DataDirConfig,
  holdsEmbeddedCluster,
  MigratedDatabase,
  StartupFailure,
  StoreLive
} from "@burnbox/store"
import { WorkerLive } from "@burnbox/worker"
import { Cause, Config, Effect, Layer, Option } from "effect"
import type * as WebBuild from "@burnbox/web"
import { admin } from "./Admin.ts"
import { CliError, parseArgs } from "./Args.ts"
import { failureLine } from "./Failure.ts"
import { IngestWorkerThread } from "./IngestWorker.ts"

/** How a reader runs this program: from a clone, through the workspace's wrapper; installed, by its name. */
const programCommand = import.meta.url.includes("/packages/cli/src/") ? "./pnpmw burnbox" : "burnbox"

const banner = Effect.gen(function*() {
  const config = yield* BurnboxConfig
  // How to create an account is news only while there is none.
  const firstAccount = !(yield* (yield* Accounts).anyExists)
  const lines = [
    "burnbox is running",
    `  inbox    ${config.siteUrl}/`,
    `  API      ${config.baseUrl}`,
    `  docs     ${config.siteUrl}/docs`,
    `  SMTP     ${config.host}:${config.smtpPort} (domains: ${config.domains.map((d) => d.name).join(", ")})`,
    `  data     ${config.dataDir}`,
    ...(firstAccount
      ? [
        `Create an account: open ${config.siteUrl}/ and sign up, or`,
        `  curl -i -X POST ${config.baseUrl}/auth/signup -H 'content-type: application/json' -d '{"email":"you@example.com","password":"correct horse"}'`,
        `  or: ${programCommand} admin account create --email you@example.com --password 'correct horse' --plan pro`
      ]
      : []),
    "Stop with Ctrl-C."
  ]
  process.stdout.write(lines.join("\n") + "\n")
})

/** The listeners a role opens, checked before anything starts so a taken port is one line. */
const Ports = {
  http: (config: BurnboxConfig["Service"]) => checkPortFree(config.host, config.httpPort, "BURNBOX_HTTP_PORT"),
  smtp: (config: BurnboxConfig["Service"]) => checkPortFree(config.host, config.smtpPort, "BURNBOX_SMTP_PORT")
}

/**
 * Runs `roles` until interrupted, once the ports they listen on are known to be free: the
 * store's services and the database are provided here, once, for all of them.
 */
const launch = <A, E, R>(
  roles: Layer.Layer<A, E, R>,
  options: {
    readonly ports: ReadonlyArray<(config: BurnboxConfig["Service"]) => Effect.Effect<void, StartupFailure>>
    readonly database: ReturnType<typeof DatabaseLive>
    /** What a stop ends, as the line printed then says it. */
    readonly stops: string
  }
) =>
  Effect.gen(function*() {
    const config = yield* BurnboxConfig
    for (const port of options.ports) yield* port(config)
    // The banner once every role is up (`start`'s ingest and worker come up on their own thread).
    return yield* Layer.launch(Layer.effectDiscard(banner).pipe(Layer.provideMerge(roles)).pipe(
      Layer.provide(StoreLive),
      Layer.provide(options.database)
    )).pipe(
      // A signal is a planned stop: once everything has closed, one line says what stopped (main.ts exits 0).
      Effect.onInterrupt(() => Effect.sync(() => process.stdout.write(`burnbox stopped: ${options.stops}\n`)))
    )
  })

/**
 * A failure before the service runs is one line on stderr and exit code 1: what went wrong and
 * what to set. Anything else is printed whole.
 */
const reportFailure = <A, E, R>(program: Effect.Effect<A, E, R>) =>
  program.pipe(Effect.provide(BurnboxConfig.layer), Effect.catchCause((cause) => {
    if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
    const line = failureLine(cause)
    return Effect.sync(() => {
      process.stderr.write(`burnbox: ${line}\n`)
      process.exitCode = 1
      // Whatever a half-started role left open must not keep the process from exiting.
      setTimeout(() => process.exit(1), 2000).unref()
    })
  }))

/** Prints one JSON document; a CliError becomes `{error: {code, message}}` and exit code 1. */
const printJson = <A, E>(program: Effect.Effect<A, E>) =>
  program.pipe(
    Effect.map((value) => process.stdout.write(JSON.stringify(value, null, 2) + "\n")),
    Effect.catchCause((cause) => {
      const failure = [...Cause.prettyErrors(cause)][0]
      const defect = cause.reasons.find(Cause.isDieReason)?.defect
      const error = defect instanceof CliError ? defect : failure
      const code = error instanceof CliError ? error.code : "failed"
      // A refusal is one line.
      process.stdout.write(JSON.stringify({ error: { code, message: error?.message ?? "failed" } }) + "\n")
      process.exitCode = 1
      return Effect.void
    })
  )

/**
 * An operator command on the embedded database of a data dir that holds none (run from another
 * folder than the service, without its BURNBOX_DATA_DIR) would make an empty one and find
 * nothing: it is refused before anything is made.
 */
const refuseEmptyDataDir = Effect.gen(function*() {
  if (Option.isSome(yield* Config.option(Config.Redacted("DATABASE_URL")))) return
  const dataDir = yield* DataDirConfig
  if (holdsEmbeddedCluster(dataDir)) return
  return yield* Effect.die(new CliError(
    "no_burnbox_data",
    `the data directory ${dataDir} holds no burnbox data; run this where burnbox start runs, or set BURNBOX_DATA_DIR (or DATABASE_URL) to the service's`
  ))
}).pipe(Effect.orDie)

/** packages/web's build script, present in a clone (not in the packed program, which ships no web inbox). */
const webBuildScript = new URL("../../web/build.ts", import.meta.url)

/**
 * The web inbox's bundle, built when missing or older than its sources (a fresh clone, a pull).
 * The API starts without it when the build fails; `/` then says the inbox is not built. Imported
 * by a computed URL, so the packed program's bundler leaves the build (and rolldown) out.
 */
const webBuild = Effect.tryPromise(async () => {
  if (!existsSync(webBuildScript)) return
  const { ensureWebBuild } = await import(webBuildScript.href) as typeof WebBuild
  await ensureWebBuild((line) => process.stderr.write(`${line}\n`))
}).pipe(
  Effect.catch((error) => Effect.logWarning("the web inbox could not be built; the API runs without it", error))
)

/**
 * `burnbox start`'s two threads: the API's pool (reads queue behind no pipeline write), and the
 * ingest and worker's, at nice 10 (IngestWorker.ts). 30 connections in all, as one role's pool.
 */
const StartThreads = {
  api: { maxConnections: 10 },
  ingestWorker: { maxConnections: 20, nice: 10 }
} as const

export const service = (command: "start" | "serve" | "ingest" | "worker" | "migrate" | "admin", rest: ReadonlyArray<string>) => {
  switch (command) {
    case "start":
      // The API on the main thread with its own pool; the ingest and the worker on their thread, at a lower priority.
      return Effect.andThen(webBuild, reportFailure(launch(Layer.mergeAll(HttpLive, IngestWorkerThread(StartThreads.ingestWorker)), {
        ports: [Ports.http, Ports.smtp],
        database: DatabaseLive({ maxConnections: StartThreads.api.maxConnections, url: DatabaseUrl.layerExclusive }),
        stops: "the HTTP API, the SMTP ingest and the worker"
      })))
    case "serve":
      return Effect.andThen(webBuild, reportFailure(launch(HttpLive, { ports: [Ports.http], database: DatabaseLive({ maxConnections: 30 }), stops: "the HTTP API" })))
    case "ingest":
      return reportFailure(launch(IngestLive, { ports: [Ports.smtp], database: DatabaseLive({ maxConnections: 30 }), stops: "the SMTP ingest" }))
    case "worker":
      return reportFailure(launch(WorkerLive, { ports: [], database: DatabaseLive({ maxConnections: 30 }), stops: "the worker" }))
    case "migrate":
      return printJson(Effect.gen(function*() {
        const { applied } = yield* MigratedDatabase
        return { applied }
      }).pipe(Effect.provide(MigratedDatabase.layer.pipe(Layer.provideMerge(DatabaseUrl.layer))), Effect.provide(BurnboxConfig.layer)))
    case "admin":
      return printJson(Effect.andThen(
        refuseEmptyDataDir,
        Effect.suspend(() => admin(parseArgs(rest))).pipe(
          Effect.provide(StoreLive.pipe(Layer.provide(DatabaseLive({ maxConnections: 2 })))),
          Effect.provide(BurnboxConfig.layer)
        )
      ))
  }
}
