// The sign-up recipe in plain JavaScript with @burnbox/client (Node 20+, no test runner):
// APP_URL is the app under test, BURNBOX_URL and BURNBOX_TOKEN come from `burnbox start --detach`.
import assert from "node:assert/strict"
import { createClient } from "@burnbox/client"

const burnbox = createClient({ baseUrl: process.env.BURNBOX_URL, token: process.env.BURNBOX_TOKEN })
const alias = await burnbox.aliases.create({ label: "signup test" })
try {
  await fetch(`${process.env.APP_URL}/signup`, { method: "POST", body: new URLSearchParams({ email: alias.address }) })
  const mail = await burnbox.messages.wait({ alias: alias.address, timeout: 30 })
  const code = mail.otpCodes[0]
  assert.match(code, /^\d{6}$/)
  const verified = await fetch(`${process.env.APP_URL}/verify`, { method: "POST", body: new URLSearchParams({ email: alias.address, code }) })
  assert.match(await verified.text(), /Email verified/)
  console.log(`verified ${alias.address} with code ${code}`)
} finally {
  await burnbox.aliases.burn(alias.address)
}
