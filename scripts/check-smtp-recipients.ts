/**
 * A regression check for a defect found while benchmarking (scripts/bench-smtp.ts; fixed in
 * 6dbd9e2 "recipients of one SMTP transaction never leak into the next"): does burnbox store each
 * message only for the recipients of its own transaction when one SMTP connection carries
 * several transactions (what every MTA does with a persistent connection)? Before the fix the
 * recipients were kept on the smtp-server session object, which outlives transactions, so
 * message 2 below was also stored in account A's mailbox.
 *
 * Usage: pnpm exec node scripts/check-smtp-recipients.ts
 *
 * Starts `burnbox start` on a temp data dir, creates two accounts with one alias each (A, B),
 * then on ONE connection: message 1 to A; message 2 to B; RSET; message 3 to B. Prints the
 * 250 replies and, from PostgreSQL, which aliases/accounts each message was stored for.
 * Expected: each message stored once, for its own recipient. Exit code 1 when not.
 */
import { Burnbox, Session } from "./lib/burnbox.ts"
import { table } from "./lib/common.ts"
import { SmtpConnection } from "./lib/smtp.ts"

const session = new Session("check:smtp-recipients")

await session.run(180_000, async () => {
  const burnbox = await Burnbox.create(session, { logName: "check-smtp-recipients" })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  const accounts = await burnbox.createAccountsWithAliases("check-recipients", 2)
  const a = accounts[0]!
  const b = accounts[1]!
  const connection = await SmtpConnection.open(burnbox.smtpPort)
  const sent: Array<{ n: number; to: string; reply: string }> = []
  const send = async (n: number, to: string) => {
    connection.write(`MAIL FROM:<sender@bench.localhost>\r\nRCPT TO:<${to}>\r\nDATA\r\n`)
    const envelope = [await connection.reply(), await connection.reply(), await connection.reply()]
    if (envelope[2]!.code !== 354) throw new Error(`message ${n}: ${envelope.map((r) => `${r.code} ${r.text}`).join(" / ")}`)
    connection.write(`Subject: message ${n}\r\nMessage-ID: <check-${n}@bench.localhost>\r\n\r\nmessage ${n} for ${to}\r\n.\r\n`)
    const reply = await connection.reply()
    sent.push({ n, to, reply: `${reply.code} ${reply.text}` })
  }
  await send(1, a.address)
  await send(2, b.address)
  connection.write("RSET\r\n")
  await connection.reply()
  await send(3, b.address)
  await connection.quit()

  const db = await burnbox.db()
  const rows = (await db.query<{ id: number; alias: string; account: string; head: Buffer }>(`
    SELECT m.id, al.local_part || '@' || d.name AS alias, ac.email AS account, substring(r.raw FROM 1 FOR 200) AS head
    FROM messages m JOIN aliases al ON al.id = m.alias_id JOIN domains d ON d.id = al.domain_id
    JOIN accounts ac ON ac.id = m.account_id JOIN message_raw r ON r.message_id = m.id ORDER BY m.id`)).rows
  await burnbox.closeDb(db)
  const stored = rows.map((r) => ({ id: r.id, alias: r.alias, account: r.account, n: Number(/check-(\d+)@/.exec(Buffer.from(r.head).toString("latin1"))?.[1]) }))
  const wrong = stored.filter((s) => sent.find((m) => m.n === s.n)?.to.toLowerCase() !== s.alias.toLowerCase())

  const out: Array<string> = [""]
  out.push("One SMTP connection, three transactions (A = first account's alias, B = second account's):")
  out.push(table(["message", "RCPT TO", "reply"], sent.map((m) => [String(m.n), m.to === a.address ? `A ${m.to}` : `B ${m.to}`, m.reply])))
  out.push("")
  out.push("Stored (PostgreSQL):")
  out.push(table(["message row", "message", "stored for alias", "account", "right recipient"], stored.map((s) => [
    String(s.id), String(s.n), s.alias, s.account, wrong.includes(s) ? "NO" : "yes"
  ])))
  out.push("")
  out.push(wrong.length === 0
    ? "each message was stored only for its own recipient: OK"
    : `${wrong.length} stored copies went to a recipient of an EARLIER transaction on the same connection (mail delivered into another account)`)
  process.stdout.write(out.join("\n") + "\n")
  return wrong.length === 0 ? 0 : 1
})
