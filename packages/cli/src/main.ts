/**
 * The `burnbox` program (decisions.md): start | serve | ingest | worker | migrate | admin, and
 * the API commands alias new | alias burn | mail wait | export (Remote.ts, Export.ts). Each group is loaded only
 * when asked for: a CI script's `burnbox mail wait` does not load the server.
 */
import { readFileSync } from "node:fs"
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Runtime } from "effect"
import { parseArgs } from "./Args.ts"
import { withProgramLogging } from "./Logging.ts"

/** The program's version: its package's (packages/cli, or the published package beside lib/). */
const version = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version

const usage = `burnbox: receive-only disposable email with an automation API

Usage:
  burnbox start              API, SMTP ingest and worker in one process (embedded PostgreSQL by default)
  burnbox serve              the HTTP API only
  burnbox ingest             the SMTP ingest only
  burnbox worker             the background worker only
  burnbox migrate            apply database migrations and exit
  burnbox start --detach [--ephemeral] [--account EMAIL]
                             start in the background, wait until it answers, print KEY=value lines
                             (BURNBOX_URL, BURNBOX_SMTP_HOST/PORT, BURNBOX_DATA_DIR; BURNBOX_TOKEN
                             for EMAIL's account); --ephemeral: all data in a temporary folder
  burnbox stop               stop the detached burnbox of the data dir (removes an ephemeral one)
  burnbox --version
  burnbox admin account create --email E --password P [--plan free|premium|pro] [--admin]
  burnbox admin account plan --email E --plan free|premium|pro
  burnbox admin account override --email E --set key=value[,key=value...] | --clear
  burnbox admin token create --email E --scopes read,manage-aliases,delete,webhooks,test [--name N]
  burnbox admin domain add NAME [--tier public|premium_only]
  burnbox admin domain retire NAME
  burnbox admin desk grant|revoke --alias ADDRESS  make an alias a protected desk, or end it (prints the Alias)
  burnbox admin keys rotate  new Ed25519 webhook signing key (the old one stays published 7 days)
  burnbox admin storage status  how far the conversion of older mail (raw bytes compressed, migration 0028; events no endpoint received deleted, 0035) is (JSON)
  burnbox admin storage compact [--batch N] [--batches N]  convert it while the service runs (resumable)
  burnbox admin clusters [--remove]
                             root's database clusters whose data dir is gone (--remove: delete them)

Configuration comes from the environment: DATABASE_URL, BURNBOX_DATA_DIR, BURNBOX_HTTP_PORT,
BURNBOX_SMTP_PORT, BURNBOX_HOST, BURNBOX_SITE_URL, BURNBOX_DOMAINS, BURNBOX_SECRET, ...

Against a running burnbox's API (BURNBOX_URL, BURNBOX_TOKEN), for test scripts and CI:
  burnbox alias new [--domain D] [--style words|pronounceable|numeric] [--label L] [--json]
                             reserve and claim an alias; prints its address
  burnbox alias burn ADDRESS [--json]
  burnbox mail wait --alias ADDRESS [--since DATE] [--timeout S] [--otp|--link|--json]
                             prints the first matching message's code, link or detail
  burnbox export [--alias ADDRESS] --out FILE [--timeout S] [--json]
                             export the mailbox (Pro) as a ZIP of .eml files and manifest.json:
                             progress bar (JSON lines with --json), download, hashes checked
  Exit codes: 0 ok, 1 time-out or not found, 2 usage error, 3 configuration, token or API error,
  4 the exported archive does not match its manifest.
`

const main = (argv: ReadonlyArray<string>) => {
  const [command, ...rest] = argv
  const inBackground = (which: "start" | "stop" | "clusters") =>
    Effect.promise(() => import("./Detach.ts")).pipe(Effect.flatMap(({ detached }) => detached(which, parseArgs(rest))))
  if (command === "start" && rest.includes("--detach")) return inBackground("start")
  if (command === "admin" && rest[0] === "clusters") return inBackground("clusters")
  switch (command) {
    case "stop":
      return inBackground("stop")
    case "--version":
    case "version":
      return Effect.sync(() => process.stdout.write(`burnbox ${version}\n`))
    case "start":
    case "serve":
    case "ingest":
    case "worker":
    case "migrate":
    case "admin":
      return Effect.promise(() => import("./Service.ts")).pipe(Effect.flatMap(({ service }) => service(command, rest)))
    case "alias":
    case "mail":
    case "export":
      return Effect.promise(() => import("./Remote.ts")).pipe(Effect.flatMap(({ remote }) => remote(argv)))
    case undefined:
    case "help":
    case "--help":
      return Effect.sync(() => process.stdout.write(usage))
    default:
      return Effect.sync(() => {
        process.stderr.write(`burnbox: unknown command "${command}"\n\n${usage}`)
        process.exitCode = 2
      })
  }
}

/**
 * The roles that run until stopped: SIGINT or SIGTERM is their planned end, exit code 0 (not 130),
 * unless a part of the program ended on its own first and set the exit code (IngestWorker.ts).
 */
const runsUntilStopped = new Set(["start", "serve", "ingest", "worker"])
const stoppedOnPurpose: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) && runsUntilStopped.has(process.argv[2] ?? "")
    ? onExit(typeof process.exitCode === "number" ? process.exitCode : 0)
    : Runtime.defaultTeardown(exit, onExit)

main(process.argv.slice(2)).pipe(
  withProgramLogging,
  NodeRuntime.runMain({ teardown: stoppedOnPurpose })
)
