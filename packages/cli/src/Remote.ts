/**
 * `burnbox alias new|burn`, `burnbox mail wait` (decisions.md, "Waiting for mail") and `burnbox export` (Export.ts): commands
 * for test scripts and CI that talk to a running burnbox's API through `@burnbox/client`, with
 * BURNBOX_URL and BURNBOX_TOKEN, and answer with exit codes a shell can branch on (`ExitCode`).
 */
import { BurnboxProblem, createClient } from "@burnbox/client"
import { Effect } from "effect"
import { type Args, CliError, flag, parseArgs } from "./Args.ts"
import { exportCommand } from "./Export.ts"

/** What a script sees in `$?`. */
export const ExitCode = {
  ok: 0,
  /** `mail wait` timed out, or the alias, message, code or link asked for does not exist. */
  notFound: 1,
  /** Unknown command, missing or malformed flags. */
  usage: 2,
  /** BURNBOX_URL or BURNBOX_TOKEN unset, the token refused, the API unreachable or failing. */
  api: 3,
  /** `export`: the downloaded archive does not match its manifest's hashes. */
  corrupt: 4
} as const

export const remoteUsage = `Usage (against a running burnbox, with BURNBOX_URL and BURNBOX_TOKEN set):
  burnbox alias new [--domain D] [--style words|pronounceable|numeric] [--label L] [--json]
  burnbox alias burn ADDRESS [--json]
  burnbox mail wait --alias ADDRESS [--since DATE] [--timeout S] [--otp|--link|--json]
  burnbox export [--alias ADDRESS] --out FILE [--timeout S] [--json]
Exit codes: 0 ok, 1 time-out or not found, 2 usage error, 3 configuration, token or API error,
4 the exported archive does not match its manifest.
`

/** Why a remote command stopped: the exit code, a Problem-shaped code and one line for people. */
export class RemoteFailure {
  readonly exit: number
  readonly code: string
  readonly message: string
  readonly fields: unknown
  constructor(exit: number, code: string, message: string, fields?: unknown) {
    this.exit = exit
    this.code = code
    this.message = message
    this.fields = fields
  }
}

export const usageError = (message: string) => new RemoteFailure(ExitCode.usage, "usage", message)

const styles = ["words", "pronounceable", "numeric"] as const
type Style = (typeof styles)[number]

export const connect = () => {
  const baseUrl = process.env["BURNBOX_URL"] ?? ""
  const token = process.env["BURNBOX_TOKEN"] ?? ""
  if (baseUrl === "") throw new RemoteFailure(ExitCode.api, "missing_url", "BURNBOX_URL is not set; export the API's address, e.g. BURNBOX_URL=http://127.0.0.1:8080/api/v1")
  if (!/^https?:\/\/./.test(baseUrl)) throw new RemoteFailure(ExitCode.api, "invalid_url", `BURNBOX_URL must be an http(s) URL, not "${baseUrl}"`)
  if (token === "") throw new RemoteFailure(ExitCode.api, "missing_token", "BURNBOX_TOKEN is not set; export an API token with the read and manage-aliases scopes")
  return createClient({ baseUrl, token })
}

/** A failure of the client as the exit code and line a script gets. */
const fromClient = (error: unknown): RemoteFailure => {
  if (error instanceof RemoteFailure) return error
  if (!(error instanceof BurnboxProblem)) return new RemoteFailure(ExitCode.api, "failed", error instanceof Error ? error.message : String(error))
  if (error.code === "timeout") return new RemoteFailure(ExitCode.notFound, "timeout", error.message)
  if (error.code === "network_error") return new RemoteFailure(ExitCode.api, error.code, `cannot reach the API at ${process.env["BURNBOX_URL"]} (${error.message})`)
  if (error.status === 404) return new RemoteFailure(ExitCode.notFound, error.code, error.message)
  if (error.status === 401) return new RemoteFailure(ExitCode.api, error.code, `the API refused the token (${error.message}); check BURNBOX_TOKEN`)
  if (error.status === 403) return new RemoteFailure(ExitCode.api, error.code, `the token may not do this (${error.message})`)
  const status = error.status > 0 ? `${error.status} ` : ""
  return new RemoteFailure(ExitCode.api, error.code, `the API answered ${status}${error.code}: ${error.message}`, error.fields)
}

export const call = <A>(run: () => Promise<A>) => Effect.tryPromise({ try: run, catch: fromClient })

export const positiveSeconds = (args: Args, name: string, fallback: number) => {
  const value = flag(args, name)
  if (value === undefined) return fallback
  const seconds = Number(value)
  if (!/^\d+(\.\d+)?$/.test(value) || !(seconds > 0)) throw usageError(`--${name} takes a number of seconds greater than 0, not "${value}"`)
  return seconds
}

const aliasNew = (args: Args) =>
  Effect.gen(function*() {
    const style = flag(args, "style")
    if (style !== undefined && !styles.includes(style as Style)) throw usageError(`--style takes ${styles.join(", ")}, not "${style}"`)
    const domain = flag(args, "domain")
    const label = flag(args, "label")
    const client = connect()
    const alias = yield* call(() => client.aliases.create({
      ...(domain === undefined ? {} : { domain }),
      ...(style === undefined ? {} : { style: style as Style }),
      ...(label === undefined ? {} : { label })
    }))
    return args.flags.has("json") ? alias : alias.address
  })

const aliasBurn = (args: Args, address: string | undefined) =>
  Effect.gen(function*() {
    if (address === undefined || address === "") throw usageError("give the address to burn, e.g. burnbox alias burn quiet.river@example.com")
    const client = connect()
    yield* call(() => client.aliases.burn(address))
    if (!args.flags.has("json")) return address
    return yield* call(() => client.aliases.find(address))
  })

const mailWait = (args: Args) =>
  Effect.gen(function*() {
    const alias = flag(args, "alias")
    if (alias === undefined || alias === "") throw usageError("--alias ADDRESS is required")
    const since = flag(args, "since")
    if (since !== undefined && Number.isNaN(Date.parse(since))) throw usageError(`--since takes a date-time such as 2026-11-21T12:00:00Z, not "${since}"`)
    const timeout = positiveSeconds(args, "timeout", 60)
    const outputs = ["otp", "link", "json"].filter((name) => args.flags.has(name))
    if (outputs.length > 1) throw usageError("choose one of --otp, --link and --json")
    const client = connect()
    const message = yield* call(() => client.messages.wait({
      alias,
      timeout,
      ...(since === undefined ? {} : { since: new Date(since).toISOString() })
    }))
    if (args.flags.has("otp")) {
      const code = message.otpCodes[0]
      if (code === undefined) throw new RemoteFailure(ExitCode.notFound, "no_code", `message ${message.id} ("${message.subject}") carries no code`)
      return code
    }
    if (args.flags.has("link")) {
      const link = message.verificationLinks[0]
      if (link === undefined) throw new RemoteFailure(ExitCode.notFound, "no_link", `message ${message.id} ("${message.subject}") carries no verification link`)
      return link
    }
    if (args.flags.has("json")) return message
    return [
      `message ${message.id} from ${message.sender.address} at ${message.receivedAt}`,
      `subject: ${message.subject}`,
      ...(message.otpCodes.length > 0 ? [`code: ${message.otpCodes[0]}`] : []),
      ...(message.verificationLinks.length > 0 ? [`link: ${message.verificationLinks[0]}`] : [])
    ].join("\n")
  })

const dispatch = (argv: ReadonlyArray<string>): Effect.Effect<unknown, RemoteFailure> => {
  const [group, action, ...rest] = argv
  let args: Args
  try {
    if (group === "export") return exportCommand(parseArgs(argv.slice(1)))
    args = parseArgs(rest)
  } catch (error) {
    throw usageError(error instanceof CliError ? error.message : String(error))
  }
  const command = `${group} ${action ?? ""}`.trim()
  if (command === "alias new" && args.positional.length === 0) return aliasNew(args)
  if (command === "alias burn" && args.positional.length <= 1) return aliasBurn(args, args.positional[0])
  if (command === "mail wait" && args.positional.length === 0) return mailWait(args)
  throw usageError(`unknown command "burnbox ${[command, ...args.positional].join(" ")}"`)
}

/**
 * Runs a remote command: text or, with --json, one JSON document on stdout; a failure is one
 * line on stderr (with --json the Problem body `{error: {code, message, fields?}}`), a usage
 * error is followed by the usage, and the exit code is `ExitCode`'s.
 */
export const remote = (argv: ReadonlyArray<string>) => {
  const json = argv.includes("--json")
  return Effect.suspend(() => dispatch(argv)).pipe(
    // What the commands throw while reading flags and the environment is a failure, not a defect.
    Effect.catchDefect((defect) => defect instanceof RemoteFailure ? Effect.fail(defect) : Effect.die(defect)),
    Effect.map((output) => {
      process.stdout.write(typeof output === "string" ? `${output}\n` : `${JSON.stringify(output, null, 2)}\n`)
    }),
    Effect.catch((failure) =>
      Effect.sync(() => {
        if (json) {
          const fields = failure.fields === undefined ? {} : { fields: failure.fields }
          process.stderr.write(`${JSON.stringify({ error: { code: failure.code, message: failure.message, ...fields } })}\n`)
        } else {
          process.stderr.write(`burnbox: ${failure.message}\n${failure.exit === ExitCode.usage ? `\n${remoteUsage}` : ""}`)
        }
        process.exitCode = failure.exit
      })
    )
  )
}
