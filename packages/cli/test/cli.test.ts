/** The `burnbox` program itself, run as a child process against the harness database. */
import { expectProblem, type Harness, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

describe("burnbox admin account", () => {
  it("create prints {id, email, plan} and the account can sign in", async () => {
    const result = await h.cli(["admin", "account", "create", "--email", "ops@example.com", "--password", "operator pass", "--plan", "premium", "--admin"])
    expect(result.code).toBe(0)
    expect(result.json).toEqual({ id: expect.any(Number), email: "ops@example.com", plan: "premium" })
    const login = await h.request("/auth/login", { method: "POST", body: { email: "ops@example.com", password: "operator pass" } })
    expect(login.status).toBe(200)
    expect(login.body.plan.code).toBe("premium")
    const [row] = await h.query("SELECT is_admin, password_hash FROM accounts WHERE id = $1", [result.json.id])
    expect(row.is_admin).toBe(true)
    expect(row.password_hash).toMatch(/^\$argon2id\$/)
  })

  it("create refuses a taken email, a short password and an unknown plan with a JSON error and exit code 1", async () => {
    await h.cli(["admin", "account", "create", "--email", "dup@example.com", "--password", "12345678"])
    const cases = [
      [["--email", "DUP@example.com", "--password", "12345678"], "email_taken"],
      [["--email", "short@example.com", "--password", "1234"], "invalid_password"],
      [["--email", "plan@example.com", "--password", "12345678", "--plan", "gold"], "invalid_plan"],
      [["--password", "12345678"], "missing_flag"],
      [["--email", "flag@example.com", "--password", "12345678", "--pro"], "unknown_flag"]
    ] as const
    const results = await Promise.all(cases.map(([args]) => h.cli(["admin", "account", "create", ...args])))
    results.forEach((result, i) => {
      expect(result.code, result.stdout).toBe(1)
      expect(result.json.error.code).toBe(cases[i]![1])
    })
  })

  it("plan changes the plan; losing Pro suspends bearer tokens and regaining it reinstates them", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read"])
    const down = await h.cli(["admin", "account", "plan", "--email", session.email, "--plan", "free"])
    expect(down.json).toEqual({ id: session.accountId, email: session.email, plan: "free" })
    // The CLI is another process: a running server sees its change once its token cache lapses.
    h.clock.advance("3 seconds")
    expectProblem(await h.request("/me", { token }), 403, "token_suspended")
    expect((await h.request("/tokens", { session })).body.items[0].status).toBe("suspended")
    await h.cli(["admin", "account", "plan", "--email", session.email, "--plan", "pro"])
    h.clock.advance("3 seconds")
    expect((await h.request("/me", { token })).status).toBe(200)
  })

  it("override sets PlanLimits fields and request limits, prints them resolved, and --clear removes them", async () => {
    const session = await h.signup()
    const set = await h.cli(["admin", "account", "override", "--email", session.email, "--set", "activeAliasCap=7,developerAccess=true,apiTokenCount=2,requestsPerMinute=5000"])
    expect(set.code).toBe(0)
    expect(set.json).toMatchObject({ id: session.accountId, email: session.email, requestsPerMinute: 5000, requestsPerDay: 100000 })
    expect(set.json.plan).toMatchObject({ code: "free", activeAliasCap: 7, developerAccess: true, claimsPerDay: 5 })
    expect(Object.keys(set.json.plan)).toHaveLength(18)
    expect((await h.request("/me", { session })).body.plan.activeAliasCap).toBe(7)
    expect((await h.request("/tokens", { method: "POST", session, body: { name: "x", scopes: ["read"] } })).status).toBe(201)
    const cleared = await h.cli(["admin", "account", "override", "--email", session.email, "--clear"])
    expect(cleared.json.plan.activeAliasCap).toBe(3)
    expect(cleared.json.requestsPerMinute).toBe(600)
  })

  it("override refuses unknown keys and wrongly typed values", async () => {
    const session = await h.signup()
    const sets = ["nope=1", "activeAliasCap=-1", "developerAccess=yes", "activeAliasCap"]
    const [unknown, ...results] = await Promise.all([
      h.cli(["admin", "account", "override", "--email", "ghost@example.com", "--clear"]),
      ...sets.map((set) => h.cli(["admin", "account", "override", "--email", session.email, "--set", set]))
    ])
    results.forEach((result, i) => {
      expect(result.code, sets[i]).toBe(1)
      expect(result.json.error.code).toBe("invalid_override")
    })
    expect(unknown.json.error.code).toBe("account_not_found")
  })
})

describe("burnbox admin token create", () => {
  it("prints {id, secret}; the secret works with exactly the given scopes", async () => {
    const session = await h.signup()
    const result = await h.cli(["admin", "token", "create", "--email", session.email, "--scopes", "read,test", "--name", "ci"])
    expect(result.code).toBe(0)
    expect(result.json).toEqual({ id: expect.any(Number), secret: expect.stringMatching(/^bbx_pat_/) })
    expect((await h.request("/me", { token: result.json.secret })).status).toBe(200)
    const list = (await h.request("/tokens", { session })).body.items
    expect(list).toEqual([expect.objectContaining({ id: result.json.id, name: "ci", scopes: ["read", "test"] })])
  })

  it("refuses unknown or repeated scopes", async () => {
    const session = await h.signup()
    const results = await Promise.all(["read,admin", "read,read", ","].map((scopes) =>
      h.cli(["admin", "token", "create", "--email", session.email, "--scopes", scopes])))
    for (const result of results) expect(result.json.error.code).toBe("invalid_scopes")
  })
})

describe("burnbox admin domain", () => {
  it("add prints the Domain; retire marks it retired", async () => {
    const added = await h.cli(["admin", "domain", "add", "Fresh.Example", "--tier", "premium_only"])
    expect(added.json).toEqual({ id: expect.any(Number), name: "fresh.example", state: "active", tier: "premium_only", claimable: true, upgradeRequired: false })
    const retired = await h.cli(["admin", "domain", "retire", "fresh.example"])
    expect(retired.json).toMatchObject({ name: "fresh.example", state: "retired", claimable: false })
    const [missing, invalid] = await Promise.all([
      h.cli(["admin", "domain", "retire", "nope.example"]),
      h.cli(["admin", "domain", "add", "not a domain"])
    ])
    expect(missing.json.error.code).toBe("domain_not_found")
    expect(invalid.json.error.code).toBe("invalid_domain")
  })
})

describe("burnbox migrate and help", () => {
  it("migrate on a migrated database applies nothing", async () => {
    const result = await h.cli(["migrate"])
    expect(result.code).toBe(0)
    expect(result.json).toEqual({ applied: [] })
  })

  it("help lists every command; an unknown command exits 2", async () => {
    const [help, unknown] = await Promise.all([h.cli(["help"]), h.cli(["explode"])])
    for (const command of ["start", "serve", "ingest", "worker", "migrate", "admin account create", "admin token create", "admin domain add"]) {
      expect(help.stdout).toContain(`burnbox ${command}`)
    }
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain('unknown command "explode"')
  })
})
