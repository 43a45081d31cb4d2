/**
 * A real HTTPS webhook receiver on 127.0.0.1 with its own test CA (made with `openssl`), that
 * records every request and when it arrived; and the worker's delivery engine on a harness's
 * database and clock, for tests to run a pass at a time.
 */
import { execFileSync } from "node:child_process"
import { createHash, X509Certificate } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:https"
import type { IncomingHttpHeaders } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { BurnboxConfig, type BurnboxSettings, DatabaseUrl, type HostResolver, StoreLive, TargetResolver } from "@burnbox/store"
import { makeDelivery } from "@burnbox/worker"
import { Clock, Context, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { Webhook as StandardWebhook } from "standardwebhooks"
import { type Harness, TestSecret } from "./Harness.ts"

export interface TestCertificates {
  readonly dir: string
  readonly caFile: string
  readonly keyPem: string
  readonly certPem: string
  /** `sha256/<base64>` of the leaf certificate's SubjectPublicKeyInfo. */
  readonly spkiPin: string
}

const openssl = (args: ReadonlyArray<string>) => execFileSync("openssl", args, { stdio: "pipe" })

/** A CA and a leaf for 127.0.0.1, localhost and the given names, valid for two days. */
export const makeTestCertificates = (names: ReadonlyArray<string> = ["receiver.example"]): TestCertificates => {
  const dir = mkdtempSync(join(tmpdir(), "burnbox-receiver-"))
  const at = (file: string) => join(dir, file)
  openssl([
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
    "-subj", "/CN=burnbox test CA", "-keyout", at("ca.key"), "-out", at("ca.pem"),
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"
  ])
  openssl([
    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-subj", "/CN=burnbox test receiver", "-keyout", at("leaf.key"), "-out", at("leaf.csr")
  ])
  const san = ["IP:127.0.0.1", "DNS:localhost", ...names.map((n) => `DNS:${n}`)].join(",")
  writeFileSync(at("leaf.ext"), `basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=${san}\n`)
  openssl([
    "x509", "-req", "-in", at("leaf.csr"), "-CA", at("ca.pem"), "-CAkey", at("ca.key"), "-CAcreateserial",
    "-days", "2", "-extfile", at("leaf.ext"), "-out", at("leaf.pem")
  ])
  const certPem = readFileSync(at("leaf.pem"), "utf8")
  const spki = new X509Certificate(certPem).publicKey.export({ type: "spki", format: "der" })
  return {
    dir,
    caFile: at("ca.pem"),
    keyPem: readFileSync(at("leaf.key"), "utf8"),
    certPem,
    spkiPin: `sha256/${createHash("sha256").update(spki).digest("base64")}`
  }
}

export interface ReceivedRequest {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: Uint8Array
  readonly text: string
  /** When the whole body had arrived: milliseconds since the epoch, sub-millisecond (the machine clock). */
  readonly receivedAt: number
}

/** What the receiver answers: a status (and body), or `hang` (never answer). */
export type Reply = { readonly status: number; readonly body?: string; readonly headers?: Record<string, string> } | "hang"

export interface Receiver {
  readonly port: number
  /** `https://127.0.0.1:<port>/hook`. */
  readonly url: string
  readonly certificates: TestCertificates
  readonly requests: Array<ReceivedRequest>
  /** Sets how the receiver answers from now on (default 200). */
  readonly reply: (f: (request: ReceivedRequest) => Reply) => void
  /** TLS connections accepted so far. */
  readonly connections: () => number
  /** Called with each request as it arrives, after it is recorded. */
  onRequest: ((request: ReceivedRequest) => void) | undefined
  /** Resolves once `count` requests arrived in all (real time; bounded). */
  readonly waitFor: (count: number, timeoutMs?: number) => Promise<ReadonlyArray<ReceivedRequest>>
  readonly close: () => Promise<void>
}

const replyOk = (): Reply => ({ status: 200, body: "ok" })

export const startReceiver = async (certificates: TestCertificates = makeTestCertificates()): Promise<Receiver> => {
  const requests: Array<ReceivedRequest> = []
  let replyWith: (request: ReceivedRequest) => Reply = replyOk
  const waiters: Array<() => void> = []
  const server: Server = createServer({ key: certificates.keyPem, cert: certificates.certPem }, (req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const receivedAt = performance.timeOrigin + performance.now()
      const body = new Uint8Array(Buffer.concat(chunks))
      const received: ReceivedRequest = {
        receivedAt,
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body,
        text: Buffer.from(body).toString("utf8")
      }
      requests.push(received)
      for (const wake of waiters.splice(0)) wake()
      const reply = replyWith(received)
      if (reply !== "hang") {
        res.writeHead(reply.status, { "content-type": "text/plain", ...reply.headers })
        res.end(reply.body ?? "")
      }
      receiver.onRequest?.(received)
    })
  })
  let connections = 0
  server.on("secureConnection", () => connections++)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("expected a TCP address")
  const waitFor = async (count: number, timeoutMs = 10_000) => {
    const deadline = Date.now() + timeoutMs
    while (requests.length < count) {
      if (Date.now() > deadline) throw new Error(`expected ${count} webhook requests, got ${requests.length}`)
      await new Promise<void>((resolve) => {
        waiters.push(resolve)
        setTimeout(resolve, 50)
      })
    }
    return requests
  }
  const receiver: Receiver = {
    port: address.port,
    url: `https://127.0.0.1:${address.port}/hook`,
    certificates,
    requests,
    connections: () => connections,
    onRequest: undefined,
    reply: (f) => {
      replyWith = f
    },
    waitFor,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      rmSync(certificates.dir, { recursive: true, force: true })
    }
  }
  return receiver
}

/** The worker's delivery engine against a harness's database and clock. */
export interface DeliveryWorker {
  /** Dispatches the outbox and attempts every delivery due at the harness clock's time. */
  readonly runOnce: () => Promise<{ dispatched: number; attempted: number }>
  readonly dispatch: () => Promise<number>
  /** Claims due deliveries without attempting them (a worker that dies right after). */
  readonly claimOnly: () => Promise<number>
  readonly purge: () => Promise<number>
  readonly close: () => Promise<void>
}

export const startDeliveryWorker = async (
  h: Harness,
  settings: Partial<BurnboxSettings> = {},
  options: { readonly resolver?: HostResolver } = {}
): Promise<DeliveryWorker> => {
  const url = Redacted.make(h.databaseUrl)
  const config = BurnboxConfig.make({ secret: Redacted.make(TestSecret), siteUrl: "http://127.0.0.1", webhookAllowPrivate: true, ...settings })
  // A worker process of its own on the harness's database: StoreLive with this worker's config,
  // the harness's clock and, when given, the webhook targets' DNS.
  const layer = StoreLive.pipe(
    Layer.provideMerge(PgClient.layer({ url, maxConnections: 4 })),
    Layer.provideMerge(Layer.succeed(DatabaseUrl, url)),
    Layer.provideMerge(Layer.succeed(BurnboxConfig, config)),
    Layer.provideMerge(Layer.succeed(Clock.Clock, h.clock)),
    Layer.provideMerge(options.resolver === undefined ? Layer.empty : Layer.succeed(TargetResolver, options.resolver))
  )
  const scope = Scope.makeUnsafe()
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const run = <A>(effect: Effect.Effect<A, never, any>) => Effect.runPromise(Effect.provideContext(effect, context as Context.Context<any>))
  // The engine's kept-alive connections close with the scope.
  const engine = await run(Scope.provide(scope)(makeDelivery))
  return {
    runOnce: () => run(engine.runOnce),
    dispatch: () => run(engine.dispatch),
    claimOnly: () => run(Effect.map(engine.claim, (rows) => rows.length)),
    purge: () => run(engine.purge),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/** The settings that make a harness or delivery worker trust this receiver (loopback, its CA). */
export const caFileSetting = (receiver: Receiver): Pick<BurnboxSettings, "webhookCaFile" | "webhookAllowPrivate"> => ({
  webhookCaFile: Option.some(receiver.certificates.caFile),
  webhookAllowPrivate: true
})

/**
 * Verifies a received request with the official `standardwebhooks` package, unchanged (it
 * checks the timestamp against the real clock, within five minutes). Throws when it fails;
 * answers the parsed body.
 */
export const verifyWithStandardWebhooks = (secret: string, request: ReceivedRequest): unknown =>
  new StandardWebhook(secret).verify(request.text, {
    "webhook-id": String(request.headers["webhook-id"]),
    "webhook-timestamp": String(request.headers["webhook-timestamp"]),
    "webhook-signature": String(request.headers["webhook-signature"])
  })
