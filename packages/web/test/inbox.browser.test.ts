/**
 * The web inbox in real Chromium against `burnbox start` on its embedded database: what a
 * person does with it, in order, in one browser (the suite stays well under 5 minutes).
 * A screenshot of each main page goes to `.screenshots/`.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fakeMail } from "@burnbox/testkit/FakeMail"
import { type Relay, startRelay } from "@burnbox/testkit/Relay"
import { ServiceProcess } from "@burnbox/testkit/ServiceProcess"
import { SmtpClient } from "@burnbox/testkit/SmtpClient"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { launchChromium, screenshot, seriousViolations } from "./browser.ts"

let service: ServiceProcess
let relay: Relay
let browser: Browser
let context: BrowserContext
let page: Page
let dataDir: string
const email = "reader@example.com"
const password = "correct horse battery"
let address = ""

const expectAccessible = async (name: string) => {
  const violations = await seriousViolations(page)
  expect(violations, `${name}: ${JSON.stringify(violations, null, 1)}`).toEqual([])
}

/** Sends mail over SMTP to the claimed alias. */
const send = (content: { subject?: string; code?: string; link?: string; html?: boolean }) =>
  SmtpClient.sendOne(service.smtpPort, address, fakeMail({ to: address, date: new Date(), ...content }))

/** The session's API as the page sees it (same cookie), for what the test must know but not click. */
const api = async <A>(path: string): Promise<A> => {
  const response = await page.request.get(`${service.baseUrl}/api/v1${path}`)
  expect(response.status(), path).toBe(200)
  return await response.json() as A
}

const rows = () => page.locator("li.message-row")

/** A state change through the session's API, with its CSRF token, for what the test sets up but does not click. */
const apiPost = async (path: string, body: unknown): Promise<number> => {
  const boot = await api<{ csrfToken: string }>("/bootstrap")
  const response = await page.request.post(`${service.baseUrl}/api/v1${path}`, { data: body, headers: { "x-csrf-token": boot.csrfToken } })
  return response.status()
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "burnbox-web-"))
  // A real SMTP relay for the desk's sends (#34).
  relay = await startRelay()
  ;[service, browser] = await Promise.all([ServiceProcess.start({ dataDir, env: { BURNBOX_OUTBOUND_SMTP_URL: relay.url } }), launchChromium()])
  context = await browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme: "light" })
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: service.baseUrl })
  page = await context.newPage()
  page.setDefaultTimeout(15_000)
}, 180_000)

afterAll(async () => {
  await browser?.close()
  await service?.stop()
  await relay?.stop()
  rmSync(dataDir, { recursive: true, force: true })
})

describe("the web inbox", () => {
  it("is served at / with a strict CSP", async () => {
    const response = await page.goto(`${service.baseUrl}/`)
    const csp = response?.headers()["content-security-policy"] ?? ""
    expect(csp).toContain("script-src 'self'")
    expect(csp).toContain("frame-ancestors 'none'")
    expect(csp).not.toContain("unsafe-inline")
    expect(csp).not.toContain("unsafe-eval")
    await expect.poll(() => page.getByRole("heading", { name: "Sign in" }).isVisible()).toBe(true)
    await screenshot(page, "sign-in")
    await expectAccessible("sign in")
  })

  it("signs up, refuses a taken email and a wrong password in words, signs out and in", async () => {
    await page.getByRole("link", { name: "Create an account" }).click()
    await page.getByLabel("Email").fill(email)
    await page.getByLabel("Password").fill(password)
    await page.getByRole("button", { name: "Sign up" }).click()
    await page.getByRole("link", { name: "Settings" }).waitFor()
    await page.getByRole("button", { name: "Sign out" }).click()

    await page.getByRole("link", { name: "Create an account" }).click()
    await page.getByLabel("Email").fill(email)
    await page.getByLabel("Password").fill(password)
    await page.getByRole("button", { name: "Sign up" }).click()
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("already exists")

    await page.getByRole("link", { name: "Sign in" }).click()
    await page.getByLabel("Email").fill(email)
    await page.getByLabel("Password").fill("not the password")
    await page.getByRole("button", { name: "Sign in" }).click()
    await expect.poll(() => page.getByRole("alert").textContent()).toBe("Wrong email or password.")
    await page.getByLabel("Password").fill(password)
    await page.getByRole("button", { name: "Sign in" }).click()
    await page.getByRole("link", { name: "Settings" }).waitFor()
  })

  it("reserves five candidates, shuffles and claims one", async () => {
    await page.getByRole("link", { name: "Aliases", exact: true }).click()
    await page.getByRole("button", { name: "Show five addresses" }).click()
    await expect.poll(() => page.getByRole("radio").count()).toBe(5)
    const first = await page.locator(".candidate code").first().textContent()
    await page.getByRole("button", { name: "Shuffle" }).click()
    await expect.poll(() => page.locator(".candidate code").first().textContent()).not.toBe(first)
    address = (await page.locator(".candidate code").nth(1).textContent()) ?? ""
    await page.getByRole("radio").nth(1).check()
    await page.getByLabel("Label").fill("ci signups")
    await page.getByRole("button", { name: "Claim" }).click()
    await expect.poll(() => page.getByRole("status").textContent()).toContain(`Claimed ${address}`)
    await expect.poll(() => page.locator(".alias-list").textContent()).toContain(address)
    await screenshot(page, "aliases")
    await expectAccessible("aliases")
  })

  it("shows the plan hints of exports and mail rules on the free plan", async () => {
    await page.getByRole("link", { name: "Settings" }).click()
    await page.getByRole("heading", { name: "Exports" }).waitFor()
    await page.getByTestId("exports-plan").waitFor()
    expect(await page.getByTestId("exports-plan").textContent()).toContain("Pro plan")
    await page.getByTestId("rules-plan").waitFor()
    expect(await page.getByRole("button", { name: "Request export" }).count()).toBe(0)
    expect(await page.getByRole("button", { name: "Create rule" }).count()).toBe(0)
  })

  it("shows an SMTP mail in the open inbox without a reload within 2 s of its processing", async () => {
    await page.getByRole("link", { name: /^Inbox/ }).click()
    await page.getByText("No mail here yet").waitFor()
    const navigations: Array<string> = []
    page.on("framenavigated", (frame) => { if (frame === page.mainFrame()) navigations.push(frame.url()) })
    await send({ code: "482913" })
    // When the pipeline has processed it, as the API says.
    let processedAt = 0
    await expect.poll(async () => {
      const list = await api<{ items: Array<{ processingStatus: string }> }>("/messages")
      if (list.items[0]?.processingStatus === "processed" && processedAt === 0) processedAt = Date.now()
      return processedAt > 0
    }, { timeout: 30_000, interval: 50 }).toBe(true)
    await rows().first().waitFor({ timeout: 2_000 })
    const shownAfter = Date.now() - processedAt
    expect(shownAfter).toBeLessThanOrEqual(2_000)
    expect(navigations).toEqual([])
    expect(await rows().first().textContent()).toContain("482913")
  })

  it("opens the message with the keyboard; the code comes first and is copied in one click", async () => {
    await page.keyboard.press("j")
    await page.keyboard.press("o")
    await page.getByTestId("otp").first().waitFor()
    expect(await page.getByTestId("otp").first().textContent()).toBe("482913")
    await page.getByRole("button", { name: "Copy code" }).first().click()
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe("482913")
    await screenshot(page, "message")
    await expectAccessible("message")
    await page.keyboard.press("u")
    await rows().first().waitFor()
  })

  it("searches with the q syntax and shows the hints", async () => {
    await send({ subject: "Your invoice 2026-11", link: "https://shop.example.com/verify?t=abc", html: true })
    await expect.poll(() => rows().count(), { timeout: 30_000 }).toBe(2)
    await page.keyboard.press("/")
    expect(await page.getByRole("list", { name: "Search syntax" }).isVisible()).toBe(true)
    await page.getByLabel("Search mail").fill("subject:invoice")
    await page.keyboard.press("Enter")
    await page.getByText("results for “subject:invoice”").waitFor()
    await expect.poll(() => rows().count()).toBe(1)
    expect(await rows().first().textContent()).toContain("Your invoice")
    await page.getByRole("button", { name: "Clear" }).click()
    await expect.poll(() => rows().count()).toBe(2)
  })

  it("shows HTML in a sandboxed iframe without scripts, behind the remote-images bar, the link first", async () => {
    await rows().filter({ hasText: "Your invoice" }).locator("a.row-link").click()
    const frame = page.locator("iframe.html-body")
    await frame.waitFor()
    expect(await frame.getAttribute("sandbox")).toBe("")
    expect(await page.getByRole("status").filter({ hasText: "Remote images are blocked" }).count()).toBe(1)
    expect(await page.getByRole("link", { name: "Open verification link" }).getAttribute("href")).toBe("https://shop.example.com/verify?t=abc")
    await page.getByRole("button", { name: "Load once" }).click()
    await expect.poll(() => frame.getAttribute("src")).toContain("remote=1")
    await page.getByRole("link", { name: "← Inbox" }).click()
    await expect.poll(() => rows().count()).toBe(2)
  })

  it("archives and trashes in bulk with outcomes, restores and empties the trash", async () => {
    // Pro: trash, webhooks (and the next test's token scopes).
    const upgraded = await service.cli(["admin", "account", "plan", "--email", email, "--plan", "pro"])
    expect(upgraded.code, upgraded.stderr).toBe(0)
    await page.reload()
    await expect.poll(() => rows().count()).toBe(2)
    await page.getByLabel("Select all").check()
    await page.getByRole("toolbar").getByRole("button", { name: "Archive" }).click()
    await expect.poll(() => page.getByRole("status").textContent()).toContain("2 updated")
    await expect.poll(() => rows().count()).toBe(0)
    await page.getByRole("button", { name: "Archived" }).click()
    await expect.poll(() => rows().count()).toBe(2)
    await page.getByLabel("Select all").check()
    await page.getByRole("toolbar").getByRole("button", { name: "Delete" }).click()
    await expect.poll(() => page.getByRole("status").textContent()).toContain("2 moved to trash")
    await page.getByRole("button", { name: "Trash" }).click()
    {
      await expect.poll(() => rows().count()).toBe(2)
      expect(await rows().first().textContent()).toContain("purged")
      await screenshot(page, "trash")
      await rows().first().getByRole("checkbox").check()
      await page.getByRole("toolbar").getByRole("button", { name: "Restore" }).click()
      await expect.poll(() => page.getByRole("status").textContent()).toContain("1 restored")
      await expect.poll(() => rows().count()).toBe(1)
      page.once("dialog", (dialog) => void dialog.accept())
      await page.getByRole("button", { name: "Empty trash" }).click()
      await expect.poll(() => page.getByRole("status").textContent()).toContain("1 deleted permanently")
      await expect.poll(() => rows().count()).toBe(0)
      // Restored where it was: among the archived.
      await page.getByRole("button", { name: "Archived" }).click()
      await expect.poll(() => rows().count()).toBe(1)
    }
  })

  it("creates a token and a webhook; each secret is shown once", async () => {
    await page.getByRole("link", { name: "Settings" }).click()
    await page.getByLabel("Token name").fill("ci")
    await page.getByRole("button", { name: "Create token" }).click()
    await expect.poll(() => page.getByTestId("secret").textContent()).toMatch(/^bbx_pat_/)
    await page.getByRole("button", { name: "Done" }).click()
    expect(await page.getByTestId("secret").count()).toBe(0)
    await page.getByLabel("Webhook name").fill("ci hook")
    await page.getByLabel("HTTPS URL").fill("https://93.184.215.14/burnbox")
    await page.getByRole("button", { name: "Create webhook" }).click()
    await expect.poll(() => page.getByTestId("secret").textContent()).not.toBe("")
    await screenshot(page, "settings")
    await expectAccessible("settings")
    await page.reload()
    await page.getByRole("heading", { name: "Webhooks" }).waitFor()
    expect(await page.getByTestId("secret").count()).toBe(0)
    await expect.poll(() => page.locator("body").textContent()).toContain("ci hook")
  })

  it("moves with j/k, stars with s and shows the shortcut help with ?", async () => {
    await page.getByRole("link", { name: /^Inbox/ }).click()
    await send({ subject: "Welcome aboard", code: "771204" })
    await send({ subject: "Confirm your email", link: "https://shop.example.com/confirm?t=1" })
    await expect.poll(() => rows().count(), { timeout: 30_000 }).toBeGreaterThanOrEqual(2)
    // Both processed and shown (a later live reload starts the focus over).
    await expect.poll(async () => (await api<{ items: Array<{ processingStatus: string }> }>("/messages")).items.every((m) => m.processingStatus === "processed"), { timeout: 30_000 }).toBe(true)
    await expect.poll(() => rows().filter({ hasText: "Welcome aboard" }).count()).toBe(1)
    await expect.poll(() => rows().filter({ hasText: "Confirm your email" }).count()).toBe(1)
    await page.keyboard.press("j")
    await expect.poll(() => page.locator("li.message-row.focused").getAttribute("data-index")).toBe("1")
    await page.keyboard.press("k")
    await expect.poll(() => page.locator("li.message-row.focused").getAttribute("data-index")).toBe("0")
    // The focused message by id: a reload may order two mails of the same second either way.
    const focusedId = await page.locator("li.message-row.focused").getAttribute("data-id")
    await page.keyboard.press("s")
    await expect.poll(() => page.getByRole("status").textContent()).toContain("1 updated")
    await expect.poll(() => page.locator(`li.message-row[data-id="${focusedId}"] .star`).getAttribute("aria-pressed")).toBe("true")
    await page.keyboard.press("?")
    await page.getByRole("dialog", { name: "Keyboard shortcuts" }).waitFor()
    await page.keyboard.press("Escape")
    expect(await page.getByRole("dialog").count()).toBe(0)
  })

  it("fits 360 px without horizontal scrolling, in light and dark", async () => {
    await page.setViewportSize({ width: 360, height: 740 })
    await rows().first().waitFor()
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360)
    await screenshot(page, "inbox-360")
    await page.emulateMedia({ colorScheme: "dark" })
    await screenshot(page, "inbox-360-dark")
    await expectAccessible("inbox at 360 px, dark")
    await page.setViewportSize({ width: 1280, height: 860 })
    await screenshot(page, "inbox-dark")
    await page.emulateMedia({ colorScheme: "light" })
    await screenshot(page, "inbox")
    await expectAccessible("inbox")
  })

  it("requests exports of every mailbox and of one, follows them to ready and downloads the ZIP", async () => {
    await page.getByRole("link", { name: "Settings" }).click()
    const statuses = () => page.getByTestId("export-status").allTextContents()
    await page.getByRole("button", { name: "Request export" }).click()
    await expect.poll(() => page.getByTestId("export").count()).toBe(1)
    await expect.poll(statuses, { timeout: 60_000 }).toEqual(["ready"])
    // One at a time: the next once this one is ready.
    await page.getByLabel("Mailboxes to export").selectOption({ label: address })
    await page.getByRole("button", { name: "Request export" }).click()
    await expect.poll(() => page.getByTestId("export").count()).toBe(2)
    await expect.poll(statuses, { timeout: 60_000 }).toEqual(["ready", "ready"])
    const link = page.getByRole("link", { name: /^Download export/ }).first()
    await link.waitFor()
    const zip = await page.request.get(`${service.baseUrl}${new URL((await link.getAttribute("href")) ?? "", service.baseUrl).pathname}`)
    expect(zip.status()).toBe(200)
    expect(zip.headers()["content-type"]).toContain("application/zip")
    expect((await zip.body()).subarray(0, 2).toString("latin1")).toBe("PK")
    expect(await page.locator("section[aria-labelledby=exports-title]").textContent()).toContain(address)
  })

  it("creates, reorders, edits and deletes mail rules, and says the plan's limit in words", async () => {
    const names = () => page.getByTestId("rule").locator("strong").allTextContents()
    await page.getByTestId("rules-limit").waitFor()
    expect(await page.getByTestId("rules-limit").textContent()).toContain("0 of 50")
    await page.getByLabel("Rule name").fill("Receipts")
    await page.getByLabel("Subject contains").fill("invoice")
    await page.getByLabel("star").check()
    await page.getByRole("button", { name: "Create rule" }).click()
    await expect.poll(names).toEqual(["Receipts"])
    await page.getByLabel("Rule name").fill("Codes")
    await page.getByLabel("has a code").check()
    await page.getByLabel("mark read").check()
    await page.getByLabel("Stop after this rule").check()
    await page.getByLabel("Applies to").selectOption({ label: address })
    await page.getByRole("button", { name: "Create rule" }).click()
    await expect.poll(names).toEqual(["Receipts", "Codes"])
    expect(await page.getByTestId("rule").nth(1).textContent()).toContain(`hasOtp → mark read · ${address} · stop`)
    await page.getByRole("button", { name: "Move Codes up" }).click()
    await expect.poll(names).toEqual(["Codes", "Receipts"])
    await page.getByRole("button", { name: "Edit Receipts" }).click()
    await page.getByLabel("Rule name").first().fill("Invoices")
    await page.getByLabel("Enabled").first().uncheck()
    await page.getByRole("button", { name: "Save rule" }).click()
    await expect.poll(names).toEqual(["Codes", "Invoices"])
    expect(await page.getByTestId("rule").nth(1).textContent()).toContain("(disabled)")
    const rules = await api<{ items: Array<{ name: string; position: number; enabled: boolean; match: object }> }>("/rules")
    expect(rules.items.map((r) => [r.name, r.enabled])).toEqual([["Codes", true], ["Invoices", false]])
    await screenshot(page, "settings-rules")
    await expectAccessible("settings with exports and rules")
    page.once("dialog", (dialog) => void dialog.accept())
    await page.getByRole("button", { name: "Delete Codes" }).click()
    await expect.poll(names).toEqual(["Invoices"])
    // Up to Pro's 50 through the API, then the 51st in the page: the 409 in words.
    for (let i = 0; i < 49; i++) expect(await apiPost("/rules", { name: `r${i}`, actions: [{ type: "star" }] })).toBe(201)
    await page.getByLabel("Rule name").last().fill("One too many")
    await page.getByLabel("pin").last().check()
    await page.getByRole("button", { name: "Create rule" }).click()
    await expect.poll(() => page.locator("section[aria-labelledby=rules-title]").getByRole("alert").textContent()).toContain("plan's limit of 50 mail rules")
  })

  it("turns browser push on, dismisses the nudge and toggles push per alias", async () => {
    await context.grantPermissions(["notifications"], { origin: service.baseUrl })
    await page.reload()
    await page.getByTestId("push-nudge").waitFor()
    await page.getByRole("button", { name: "Not now" }).click()
    await expect.poll(() => page.getByTestId("push-nudge").count()).toBe(0)
    expect((await api<{ nudgeDismissed: boolean }>("/push/settings")).nudgeDismissed).toBe(true)
    await page.getByRole("button", { name: "Enable push in this browser" }).click()
    await expect.poll(() => page.getByTestId("push-state").textContent()).toBe("on")
    expect((await api<{ enabled: boolean; publicKey: string | null }>("/push/settings")).enabled).toBe(true)
    // Headless Chromium has no push service: subscribing ends in "Push is on" or a reason in words.
    await expect.poll(async () => (await page.locator("section[aria-labelledby=push-title] [role=alert], section[aria-labelledby=push-title] [role=status]").count()) > 0).toBe(true)
    // The served /sw.js is registered; a push delivered to it (DevTools protocol) shows its notification.
    const cdp = await context.newCDPSession(page)
    const registration = new Promise<string>((resolve) => cdp.on("ServiceWorker.workerRegistrationUpdated", (e) => {
      const found = e.registrations.find((r) => r.scopeURL.startsWith(service.baseUrl) && !r.isDeleted)
      if (found !== undefined) resolve(found.registrationId)
    }))
    await cdp.send("ServiceWorker.enable")
    const registrationId = await registration
    await page.evaluate(async () => void await navigator.serviceWorker.ready)
    const pushText = await page.locator("section[aria-labelledby=push-title]").textContent()
    const push = JSON.stringify({ type: "message", messageId: 7, alias: address, from: "Shop <no-reply@shop.example>", subject: "Your code", otp: "482913" })
    // Delivered again until shown (the worker may still be starting); one tag, so one notification.
    await expect.poll(async () => {
      await cdp.send("ServiceWorker.deliverPushMessage", { origin: service.baseUrl, registrationId, data: push })
      return await page.evaluate(async () => {
        const ready = await navigator.serviceWorker.ready
        return (await ready.getNotifications()).map((n) => ({ title: n.title, body: n.body, data: n.data as unknown }))
      })
    }, { message: pushText ?? "", interval: 500 }).toEqual([{ title: "Your code", body: "From Shop <no-reply@shop.example>\nCode 482913", data: { url: "/#/m/7" } }])
    await cdp.detach()
    await page.reload()
    await page.getByTestId("push-state").waitFor()
    expect(await page.getByTestId("push-nudge").count()).toBe(0)
    await page.getByRole("link", { name: "Aliases", exact: true }).click()
    const toggle = page.getByLabel(`Push for ${address}`)
    const pushOf = async () => (await api<{ aliases: Array<{ address: string; pushEnabled: boolean }> }>("/bootstrap")).aliases.find((a) => a.address === address)?.pushEnabled
    const before = await pushOf()
    expect(await toggle.isChecked()).toBe(before)
    await toggle.click()
    await expect.poll(pushOf).toBe(!before)
    await expect.poll(() => toggle.isChecked()).toBe(!before)
    await screenshot(page, "aliases-push")
    await expectAccessible("aliases with the push toggle")
  })

  it("composes, replies (prefilled) and lists Sent from a desk", async () => {
    const granted = await service.cli(["admin", "desk", "grant", "--alias", address])
    expect(granted.code, granted.stderr).toBe(0)
    await page.reload()
    await page.getByRole("link", { name: "Desk: write mail" }).click()
    await page.getByRole("heading", { name: `Desk ${address}` }).waitFor()
    await page.getByLabel("To").fill("customer@example.org")
    await page.getByLabel("Subject").fill("Hello from the desk")
    await page.getByLabel("Message").fill("First line.")
    await page.getByRole("button", { name: "Send" }).click()
    await expect.poll(() => page.getByRole("status").textContent()).toContain("Sent to customer@example.org")
    await expect.poll(() => page.getByTestId("sent").count()).toBe(1)
    expect(relay.received.length).toBe(1)
    await screenshot(page, "desk")
    await expectAccessible("desk")

    await page.getByRole("link", { name: /^Inbox/ }).click()
    await rows().filter({ hasText: "Welcome aboard" }).locator("a.row-link").click()
    await page.getByRole("link", { name: "Reply" }).click()
    await expect.poll(() => page.getByLabel("Subject").inputValue()).toBe("Re: Welcome aboard")
    expect(await page.getByLabel("To").inputValue()).toBe("no-reply@shop.example.com")
    await page.getByLabel("Message").fill("Thanks.")
    await page.getByRole("button", { name: "Send" }).click()
    await expect.poll(() => page.getByTestId("sent").count()).toBe(2)
    expect(await page.getByTestId("sent").first().textContent()).toContain("Re: Welcome aboard")
    expect(relay.received.length).toBe(2)
    // A relay that is down: the refusal in words, the attempt in Sent as failed.
    await relay.stop()
    await page.getByLabel("To").fill("customer@example.org")
    await page.getByLabel("Subject").fill("While the relay is down")
    await page.getByLabel("Message").fill("Again.")
    await page.getByRole("button", { name: "Send" }).click()
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("check Sent before trying again")
    await expect.poll(() => page.getByTestId("sent").first().textContent()).toContain("While the relay is down to customer@example.org · failed")
  })
})
