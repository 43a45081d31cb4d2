/**
 * An external Mercure hub (issue #32, BURNBOX_MERCURE_URL): the worker's publisher POSTs every
 * update to it, private, on the account's topic, under an HS256 publisher JWT the hub can check
 * with its key; and the session bootstrap names that hub and sets the browser's subscriber JWT
 * for its own topic only. The hub here is a plain HTTP server that records what it is sent.
 */
import { createHmac } from "node:crypto"
import { createServer, type Server } from "node:http"
import { PgClient } from "@effect/sql-pg"
import { BurnboxConfig, DatabaseUrl, StoreLive } from "@burnbox/store"
import { claimAlias, type Harness, injectMail, startHarness, TestSecret } from "@burnbox/testkit"
import { MercurePublisherLive } from "@burnbox/worker"
import { Clock, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const key = "a-mercure-hub-key-for-tests-only-32b"
let hub: Server
let hubUrl: string
const posts: Array<{ authorization: string | undefined; form: URLSearchParams }> = []
let h: Harness
let scope: Scope.Closeable

const verifyJwt = (token: string) => {
  const [head, claims, signature] = token.split(".")
  expect(createHmac("sha256", key).update(`${head}.${claims}`).digest("base64url")).toBe(signature)
  return JSON.parse(Buffer.from(claims!, "base64url").toString())
}

beforeAll(async () => {
  hub = createServer((req, res) => {
    let body = ""
    req.on("data", (chunk: Buffer) => (body += chunk.toString()))
    req.on("end", () => {
      posts.push({ authorization: req.headers.authorization, form: new URLSearchParams(body) })
      res.writeHead(200, { "content-type": "text/plain" })
      res.end("urn:uuid:ok")
    })
  })
  await new Promise<void>((resolve) => hub.listen(0, "127.0.0.1", resolve))
  const address = hub.address()
  if (address === null || typeof address === "string") throw new Error("no port")
  hubUrl = `http://127.0.0.1:${address.port}/.well-known/mercure`
  h = await startHarness({}, undefined, { seed: 8812 })
  // A worker process of its own on the harness's database, with the external hub configured.
  const url = Redacted.make(h.databaseUrl)
  const layer = MercurePublisherLive.pipe(
    Layer.provideMerge(StoreLive),
    Layer.provideMerge(PgClient.layer({ url, maxConnections: 3 })),
    Layer.provideMerge(Layer.succeed(DatabaseUrl, url)),
    Layer.provideMerge(Layer.succeed(BurnboxConfig, BurnboxConfig.make({
      secret: Redacted.make(TestSecret),
      siteUrl: "https://burnbox.example",
      externalHub: Option.some({ url: hubUrl, key: Redacted.make(key) })
    }))),
    Layer.provideMerge(Layer.succeed(Clock.Clock, h.clock))
  )
  scope = Scope.makeUnsafe()
  await Effect.runPromise(Layer.buildWithScope(layer, scope))
})
afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await h.close()
  await new Promise<void>((resolve) => hub.close(() => resolve()))
})

describe("the external hub's publisher", () => {
  it("POSTs each update privately to the account's topic with a publisher JWT, never the body", async () => {
    const owner = await h.signup({ plan: "pro" })
    const alias = await claimAlias(h, { session: owner })
    const id = await injectMail(h, { session: owner }, alias.id, { text: "the secret body" })
    const topic = `https://burnbox.example/accounts/${owner.accountId}`
    const deadline = Date.now() + 15_000
    const published = () => posts.find((p) => p.form.get("topic") === topic && JSON.parse(p.form.get("data") ?? "{}").messageId === id)
    while (published() === undefined && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
    const post = published()
    expect(post, JSON.stringify(posts.map((p) => p.form.toString()))).toBeDefined()
    expect(post!.form.get("private")).toBe("on")
    expect(post!.form.get("id")).toMatch(/^urn:uuid:/)
    expect(JSON.parse(post!.form.get("data")!)).toEqual({ topic, type: "message.processed", aliasId: alias.id, messageId: id })
    expect(post!.form.toString()).not.toContain("secret")
    expect(verifyJwt(post!.authorization!.replace(/^Bearer /, ""))).toEqual({ mercure: { publish: ["*"] } })
    // The claim before it was published too.
    expect(posts.some((p) => p.form.get("topic") === topic && JSON.parse(p.form.get("data")!).type === "alias.claimed")).toBe(true)
  })
})

describe("the session bootstrap with an external hub", () => {
  it("names the hub and sets a subscriber JWT cookie for the account's own topic only", async () => {
    const api = await startHarness({ externalHub: Option.some({ url: hubUrl, key: Redacted.make(key) }) }, h)
    try {
      const session = await api.signup()
      const answer = await api.request("/bootstrap", { session })
      expect(answer.status, answer.text).toBe(200)
      const topic = `${api.baseUrl.replace(/\/api\/v1$/, "")}/accounts/${session.accountId}`
      expect(answer.body.mercure).toEqual({ hubUrl, topic })
      const cookie = answer.headers.getSetCookie().find((c) => c.startsWith("mercureAuthorization="))
      expect(cookie).toMatch(/HttpOnly/i)
      expect(cookie).toMatch(/Path=\/\.well-known\/mercure/)
      const claims = verifyJwt(/^mercureAuthorization=([^;]+)/.exec(cookie!)![1]!)
      expect(claims.mercure).toEqual({ subscribe: [topic] })
      expect(claims.exp).toBeGreaterThan(Date.now() / 1000)
    } finally {
      await api.close()
    }
  })
})
