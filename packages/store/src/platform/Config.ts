import { randomBytes } from "node:crypto"
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs"
import { join, resolve } from "node:path"
import { Config, Context, Effect, Layer, Option, Redacted } from "effect"
import { StartupFailure } from "./Startup.ts"

/** The settings of decisions.md ("Configuration"), resolved once at the edge of each program. */
export interface BurnboxSettings {
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string
  readonly httpPort: number
  readonly smtpPort: number
  readonly host: string
  readonly siteUrl: string
  readonly baseUrl: string
  readonly domains: ReadonlyArray<{ readonly name: string; readonly tier: "public" | "premium_only" }>
  readonly secret: Redacted.Redacted<string>
  readonly webhookAllowPrivate: boolean
  readonly webhookCaFile: Option.Option<string>
  readonly outboundSmtpUrl: Option.Option<Redacted.Redacted<string>>
  /** BURNBOX_MERCURE_URL and BURNBOX_MERCURE_JWT_KEY: an external Mercure hub instead of the project's own (issue #32). */
  readonly externalHub: Option.Option<{ readonly url: string; readonly key: Redacted.Redacted<string> }>
}

/** The data dir when BURNBOX_DATA_DIR is unset: `.burnbox` in the current folder. */
export const DefaultDataDir = "./.burnbox"
/** BURNBOX_DATA_DIR, resolved: read alone, it makes nothing (the settings below create the secret). */
export const DataDirConfig = Config.String("BURNBOX_DATA_DIR").pipe(Config.withDefault(DefaultDataDir), Config.map((dir) => resolve(dir)))

export class BurnboxConfig extends Context.Service<BurnboxConfig, BurnboxSettings>()("burnbox/Config") {
  /** Reads the environment; generates BURNBOX_SECRET into the data dir when it is unset. */
  static readonly layer = Layer.effect(BurnboxConfig, Effect.gen(function*() {
    const dataDir = yield* DataDirConfig
    const httpPort = yield* Config.Port("BURNBOX_HTTP_PORT").pipe(Config.withDefault(8080))
    const smtpPort = yield* Config.Port("BURNBOX_SMTP_PORT").pipe(Config.withDefault(2525))
    const host = yield* Config.String("BURNBOX_HOST").pipe(Config.withDefault("127.0.0.1"))
    const siteUrl = (yield* Config.String("BURNBOX_SITE_URL").pipe(Config.withDefault(`http://localhost:${httpPort}`)))
      .replace(/\/+$/, "")
    const domains = parseDomains(yield* Config.String("BURNBOX_DOMAINS").pipe(Config.withDefault("burnbox.test")))
    const databaseUrl = yield* Config.option(Config.Redacted("DATABASE_URL"))
    const explicitSecret = yield* Config.option(Config.Redacted("BURNBOX_SECRET"))
    const secret = Option.isSome(explicitSecret) ? explicitSecret.value : Redacted.make(loadOrCreateSecret(dataDir))
    const webhookAllowPrivate = yield* Config.Boolean("BURNBOX_WEBHOOK_ALLOW_PRIVATE").pipe(Config.withDefault(false))
    const webhookCaFile = yield* Config.option(Config.String("BURNBOX_WEBHOOK_CA_FILE"))
    const outboundSmtpUrl = yield* Config.option(Config.Redacted("BURNBOX_OUTBOUND_SMTP_URL"))
    const hubUrl = yield* Config.option(Config.String("BURNBOX_MERCURE_URL"))
    const hubKey = yield* Config.option(Config.Redacted("BURNBOX_MERCURE_JWT_KEY"))
    if (Option.isSome(hubUrl) && Option.isNone(hubKey)) {
      return yield* new StartupFailure({ message: "BURNBOX_MERCURE_URL needs BURNBOX_MERCURE_JWT_KEY (the hub's HS256 key)" })
    }
    const externalHub = Option.zipWith(hubUrl, hubKey, (url, key) => ({ url, key }))
    return BurnboxConfig.of({
      databaseUrl,
      dataDir,
      httpPort,
      smtpPort,
      host,
      siteUrl,
      baseUrl: `${siteUrl}/api/v1`,
      domains,
      secret,
      webhookAllowPrivate,
      webhookCaFile,
      outboundSmtpUrl,
      externalHub
    })
  }).pipe(Effect.orDie))

  static readonly make = (settings: Partial<BurnboxSettings> & Pick<BurnboxSettings, "secret">): BurnboxSettings => {
    const httpPort = settings.httpPort ?? 8080
    const siteUrl = settings.siteUrl ?? `http://localhost:${httpPort}`
    return {
      databaseUrl: Option.none(),
      dataDir: resolve("./.burnbox"),
      smtpPort: 2525,
      host: "127.0.0.1",
      domains: [{ name: "burnbox.test", tier: "public" }],
      webhookAllowPrivate: false,
      webhookCaFile: Option.none(),
      outboundSmtpUrl: Option.none(),
      externalHub: Option.none(),
      ...settings,
      httpPort,
      siteUrl,
      baseUrl: `${siteUrl}/api/v1`
    }
  }
}

/** `name` or `name:premium_only`, comma separated. */
export const parseDomains = (input: string): Array<{ name: string; tier: "public" | "premium_only" }> =>
  input.split(",").map((s) => s.trim()).filter((s) => s.length > 0).map((entry) => {
    const [name = "", tier] = entry.split(":")
    if (tier !== undefined && tier !== "public" && tier !== "premium_only") {
      throw new Error(`BURNBOX_DOMAINS: unknown tier "${tier}" in "${entry}" (use public or premium_only)`)
    }
    return { name: name.toLowerCase(), tier: tier ?? "public" }
  })

const loadOrCreateSecret = (dataDir: string): string => {
  const file = join(dataDir, "secret")
  try {
    if (existsSync(file)) return readFileSync(file, "utf8").trim()
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
    const secret = randomBytes(32).toString("base64url")
    writeFileSync(file, secret + "\n", { mode: 0o600, flag: "wx" })
    return secret
  } catch (error) {
    const code = (error as { code?: string }).code ?? String(error)
    throw new StartupFailure({
      message: `cannot create or write the data directory ${dataDir} (${code}, writing its secret); set BURNBOX_DATA_DIR to a directory you can write, or BURNBOX_SECRET`
    })
  }
}
