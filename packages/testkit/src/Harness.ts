/**
 * The in-process harness: the real HTTP API on a real socket, on a fresh database cloned
 * from the migrated template, with an injected clock and helpers to make accounts,
 * sessions and tokens. One harness per test file.
 */
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { fileURLToPath } from "node:url"
import { zstdDecompressSync } from "node:zlib"
import { PgClient } from "@effect/sql-pg"
import { HotReads, httpListener } from "@burnbox/server"
import { SmtpListener, smtpListener } from "@burnbox/ingest"
import { type BuildOutcome, buildExports, DnsResolver, MailWorkers, type MailWorkLimits, PipelineLive, retention, sweepExports } from "@burnbox/worker"
import { Accounts, AccountSnapshots, Aliases, Mailstore, Realtime, BurnboxConfig, DatabaseUrl, freePort, type BurnboxSettings, CandidateRandom, processApplicationName, storeLayer, withClient, withDatabase, type HostResolver, TargetResolver } from "@burnbox/store"
import { seededRandom } from "@burnbox/domain/aliases/index"
import { Clock, Context, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { HttpServer } from "effect/http"
import pg from "pg"
import { inject } from "vitest"
import { makeManualClock, type ManualClock } from "./ManualClock.ts"

export interface Session {
  readonly cookie: string
  readonly csrf: string
  readonly accountId: number
  readonly email: string
}

export interface RequestOptions {
  readonly method?: string
  readonly body?: unknown
  readonly rawBody?: string | Uint8Array
  readonly token?: string
  readonly session?: Session
  /** Send the session without its CSRF header. */
  readonly withoutCsrf?: boolean
  readonly headers?: Record<string, string>
  /** Aborts the request (and its wait for the answer), e.g. `AbortSignal.timeout(ms)`. */
  readonly signal?: AbortSignal
}

export interface Answer<A = any> {
  readonly status: number
  readonly headers: Headers
  readonly body: A
  readonly text: string
}

export interface Harness {
  readonly baseUrl: string
  /** The SMTP ingest of this harness, on 127.0.0.1. */
  readonly smtpPort: number
  readonly databaseUrl: string
  readonly clock: ManualClock
  /** How many requests the hot read path (GET /me, /storage from caches) answered. */
  readonly hotReadsServed: () => number
  /** How many realtime subscriptions (waiting requests among them) this process holds. */
  readonly realtimeSubscriptions: () => Promise<number>
  /**
   * Answers once this process holds `count` realtime subscriptions (e.g. a GET ?wait request has
   * started waiting): the signal to send mail "after it started waiting". Fails after 30 s.
   */
  readonly untilRealtimeSubscriptions: (count: number) => Promise<void>
  readonly request: <A = any>(path: string, options?: RequestOptions) => Promise<Answer<A>>
  readonly signup: (options?: { email?: string; plan?: "free" | "premium" | "pro" }) => Promise<Session>
  readonly createToken: (session: Session, scopes: ReadonlyArray<string>, name?: string) => Promise<string>
  /**
   * Sets the account's plan row alone, without the effects of a plan change (aliases paused,
   * tokens suspended...): for tests of one plan's rules, and of what `worker.reconcilePlan` does.
   */
  readonly setPlan: (accountId: number, plan: "free" | "premium" | "pro") => Promise<void>
  /** A plan change through its one use case (`Accounts.changePlan`), every feature's effect applied, as an operator's `admin account plan` does. */
  readonly changePlan: (accountId: number, plan: "free" | "premium" | "pro") => Promise<void>
  readonly query: <R extends pg.QueryResultRow = any>(text: string, params?: ReadonlyArray<unknown>) => Promise<Array<R>>
  /**
   * A message's raw bytes as `message_raw` holds them (zstd-compressed since migration 0028), read
   * back as received, with how it holds them; undefined when the message has none.
   */
  readonly storedRaw: (messageId: number) => Promise<{ readonly raw: Buffer; readonly zstd: boolean; readonly storedBytes: number } | undefined>
  readonly cli: (args: ReadonlyArray<string>) => Promise<{ code: number; stdout: string; stderr: string; json: any }>
  /** The worker's periodic work, run once at the harness clock's time. */
  readonly worker: {
    readonly runTimers: () => Promise<{ burned: number; notified: number }>
    /** The fold of the mail counters' deltas (ingest's and the rules step's unread corrections) into their rows (store messages/MailCounts.ts); answers the deltas folded. */
    readonly foldCounts: () => Promise<number>
    readonly sweepReservations: () => Promise<number>
    readonly reconcilePlan: (accountId: number) => Promise<{ paused: number; resumed: number }>
    readonly purgeExpired: () => Promise<number>
    /** The scheduled `retention` job's handler (messages past retention, then desk Sent records past 90 days); answers the messages purged. */
    readonly retention: () => Promise<number>
    /** The `exports` job: builds every export due (an abort stops it as a worker's shutdown does). */
    readonly buildExports: (options?: { readonly signal?: AbortSignal }) => Promise<ReadonlyArray<BuildOutcome>>
    /** The `exports-sweep` job: expires exports past their window, then builds what is due. */
    readonly sweepExports: () => Promise<{ expired: number; due: number; built: number }>
  }
  readonly close: () => Promise<void>
}

const cliMain = fileURLToPath(new URL("../../cli/src/main.ts", import.meta.url))

let counter = 0
const uniqueEmail = () => `user${++counter}.${randomBytes(3).toString("hex")}@example.com`

export const TestSecret = "burnbox-test-secret-not-for-production"

/** The URL of the run's embedded PostgreSQL cluster (its `postgres` database), as the global setup started it. */
export const clusterUrl = (): string => inject("clusterUrl")

/**
 * Starts a harness on a fresh database, or, with `shareWith`, a second API process on the
 * database of another harness (as several `burnbox serve` processes share one PostgreSQL).
 */
export interface HarnessOptions {
  /** Seed of the candidate generator, so reservations are reproducible. */
  readonly seed?: number
  /** A certificate for the SMTP ingest: with it, EHLO offers STARTTLS. */
  readonly smtpTls?: { readonly key: Buffer; readonly cert: Buffer }
  /** DNS records mail authentication sees, keyed `"TXT name"`; every other name is ENOTFOUND. */
  readonly dnsRecords?: Readonly<Record<string, ReadonlyArray<unknown>>>
  /** Replaces DNS for webhook URL checks (the SSRF tests). */
  readonly targetResolver?: HostResolver
  /** The pipeline's mail worker threads: allowances (time, heap) and thread counts; the defaults otherwise. */
  readonly mailWork?: Partial<MailWorkLimits>
}

export const startHarness = async (
  settings: Partial<BurnboxSettings> = {},
  shareWith?: Harness,
  options: HarnessOptions = {}
): Promise<Harness> => {
  const cluster = Redacted.make(clusterUrl())
  let url: Redacted.Redacted<string>
  if (shareWith !== undefined) {
    url = Redacted.make(shareWith.databaseUrl)
  } else {
    const database = `t_${randomBytes(6).toString("hex")}`
    await Effect.runPromise(withClient(cluster, (client) => client.query(`CREATE DATABASE ${database} TEMPLATE burnbox_template`)))
    url = withDatabase(cluster, database)
  }
  const clock = shareWith?.clock ?? makeManualClock()
  const port = await freePort()
  const config = BurnboxConfig.make({
    secret: Redacted.make(TestSecret),
    databaseUrl: Option.some(url),
    siteUrl: `http://127.0.0.1:${port}`,
    ...settings
  })

  // The HTTP and SMTP roles and the worker's pipeline (timers, retention and webhook deliveries
  // are run by hand: `worker` below, Receiver.ts) on StoreLive's services, with what a test must
  // control: the listeners' ports, DNS (mail authentication answers from fixed records, as
  // strictly as the real resolver; webhook targets from `targetResolver`), the candidate seed,
  // the clock, and a database cloned from the migrated template.
  const roles = Layer.mergeAll(
    httpListener({ port, host: "127.0.0.1", disableListenLog: true }),
    smtpListener({ port: 0, host: "127.0.0.1", hostname: "mx.burnbox.test", tls: options.smtpTls }),
    PipelineLive.pipe(Layer.provide(MailWorkers.layerWith(options.mailWork)), Layer.provide(DnsResolver.fixed(options.dnsRecords ?? {})))
  )
  const app = roles.pipe(
    Layer.provideMerge(storeLayer({ random: Layer.succeed(CandidateRandom, seededRandom(options.seed ?? 20261121)) })),
    Layer.provide(options.targetResolver === undefined ? Layer.empty : Layer.succeed(TargetResolver, options.targetResolver)),
    // Named as a burnbox process's connections are, so the pipeline's takeover of dead claims runs here too.
    Layer.provide(PgClient.layer({ url, maxConnections: 5, applicationName: processApplicationName() })),
    Layer.provide(Layer.succeed(DatabaseUrl, url)),
    Layer.provide(Layer.succeed(BurnboxConfig, config)),
    Layer.provide(Layer.succeed(Clock.Clock, clock))
  )
  const scope = Scope.makeUnsafe()
  const context = await Effect.runPromise(Layer.buildWithScope(app, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  const aliases = Context.get(context, Aliases)
  const accounts = Context.get(context, Accounts)
  const mailstore = Context.get(context, Mailstore)
  const smtpPort = Context.get(context, SmtpListener).port
  const hotReads = Context.get(context, HotReads)
  const realtime = Context.get(context, Realtime)
  // Writes made on another connection or by another process reach the API's account
  // snapshots by notification; the helpers below forget them at once so tests need not wait.
  const snapshots = Context.get(context, AccountSnapshots)
  const runInHarness = <A>(effect: Effect.Effect<A>, signal?: AbortSignal) =>
    Effect.runPromise(Effect.provideService(effect, Clock.Clock, clock), signal === undefined ? undefined : { signal }).finally(() => snapshots.forgetAll())
  if (!("port" in address)) throw new Error("expected a TCP address")
  const origin = `http://127.0.0.1:${address.port}`
  const baseUrl = `${origin}/api/v1`
  const pool = new pg.Pool({ connectionString: Redacted.value(url), max: 2 })

  const request = async <A>(path: string, options: RequestOptions = {}): Promise<Answer<A>> => {
    const headers: Record<string, string> = { ...options.headers }
    let body: string | Uint8Array | undefined
    if (options.rawBody !== undefined) body = options.rawBody
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body)
      headers["content-type"] ??= "application/json"
    }
    if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`
    if (options.session !== undefined) {
      headers["cookie"] = `service_session=${options.session.cookie}`
      if (!options.withoutCsrf) headers["x-csrf-token"] = options.session.csrf
    }
    const response = await fetch(path.startsWith("http") ? path : `${path.startsWith("/api") || path.startsWith("/docs") || path.startsWith("/.well-known") ? origin : baseUrl}${path}`, {
      method: options.method ?? "GET",
      headers,
      ...(body === undefined ? {} : { body }),
      ...(options.signal === undefined ? {} : { signal: options.signal })
    })
    const text = await response.text()
    let parsed: unknown = undefined
    try {
      parsed = text === "" ? undefined : JSON.parse(text)
    } catch {
      parsed = undefined
    }
    return { status: response.status, headers: response.headers, body: parsed as A, text }
  }

  const setPlan = async (accountId: number, plan: string) => {
    await pool.query("UPDATE accounts SET plan = $1 WHERE id = $2", [plan, accountId])
    snapshots.forgetAll()
  }

  const signup = async (options: { email?: string; plan?: "free" | "premium" | "pro" } = {}): Promise<Session> => {
    const email = options.email ?? uniqueEmail()
    const answer = await request<{ id: number }>("/auth/signup", { method: "POST", body: { email, password: "correct horse battery" } })
    if (answer.status !== 201) throw new Error(`signup failed: ${answer.status} ${answer.text}`)
    const cookie = /service_session=([^;]+)/.exec(answer.headers.get("set-cookie") ?? "")?.[1]
    if (cookie === undefined) throw new Error("signup set no session cookie")
    const bootstrap = await request<{ csrfToken: string }>("/bootstrap", { headers: { cookie: `service_session=${cookie}` } })
    if (options.plan !== undefined) await setPlan(answer.body.id, options.plan)
    return { cookie, csrf: bootstrap.body.csrfToken, accountId: answer.body.id, email }
  }

  const createToken = async (session: Session, scopes: ReadonlyArray<string>, name = "test token") => {
    const answer = await request<{ secret: string }>("/tokens", { method: "POST", session, body: { name, scopes } })
    if (answer.status !== 201) throw new Error(`token creation failed: ${answer.status} ${answer.text}`)
    return answer.body.secret
  }

  const cli = (args: ReadonlyArray<string>) =>
    new Promise<{ code: number; stdout: string; stderr: string; json: any }>((resolve) => {
      execFile(process.execPath, [cliMain, ...args], {
        env: { ...process.env, DATABASE_URL: Redacted.value(url), BURNBOX_SECRET: TestSecret },
        timeout: 60_000
      }, (error, stdout, stderr) => {
        let json: unknown = undefined
        try {
          json = JSON.parse(stdout)
        } catch {
          json = undefined
        }
        snapshots.forgetAll()
        resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr, json })
      })
    })

  return {
    baseUrl,
    smtpPort,
    databaseUrl: Redacted.value(url),
    clock,
    hotReadsServed: hotReads.served,
    realtimeSubscriptions: () => Effect.runPromise(realtime.subscriptions),
    untilRealtimeSubscriptions: async (count) => {
      for (const deadline = Date.now() + 30_000; ;) {
        const open = await Effect.runPromise(realtime.subscriptions)
        if (open === count) return
        if (Date.now() > deadline) throw new Error(`${open} realtime subscriptions after 30 s, not ${count}`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    },
    request,
    signup,
    createToken,
    setPlan,
    changePlan: (accountId, plan) => runInHarness(Effect.asVoid(accounts.changePlan(accountId, plan))),
    query: async (text, params) => {
      const { rows } = await pool.query(text, params as Array<unknown>)
      snapshots.forgetAll()
      return rows
    },
    storedRaw: async (messageId) => {
      const { rows } = await pool.query<{ raw: Buffer; zstd: boolean }>("SELECT raw, zstd FROM message_raw WHERE message_id = $1", [messageId])
      const row = rows[0]
      return row === undefined ? undefined : { raw: row.zstd ? zstdDecompressSync(row.raw) : row.raw, zstd: row.zstd, storedBytes: row.raw.byteLength }
    },
    cli,
    worker: {
      runTimers: () => runInHarness(aliases.runTimers),
      foldCounts: () => runInHarness(mailstore.foldCounts),
      sweepReservations: () => runInHarness(aliases.sweepReservations),
      reconcilePlan: (accountId) => runInHarness(aliases.reconcilePlan(accountId)),
      purgeExpired: () => runInHarness(mailstore.purgeExpired),
      retention: () => runInHarness(Effect.provideContext(retention, context)),
      buildExports: (stop) => runInHarness(Effect.provideContext(buildExports, context), stop?.signal),
      sweepExports: () => runInHarness(Effect.provideContext(sweepExports, context))
    },
    close: async () => {
      await pool.end()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }
}
