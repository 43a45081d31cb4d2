/**
 * A bulk loader of processed messages for bench-list.ts: accounts, aliases, messages and reader
 * states written with a few large `INSERT ... SELECT generate_series` statements straight into
 * the embedded PostgreSQL (no SMTP, no pipeline), consistent with the schema of
 * packages/store/migrations and with what the pipeline writes (processing_status 'processed',
 * the search index's row built exactly as the store statement of packages/store/src/pipeline/MailQueue.ts builds it, with search/SearchIndex.ts).
 *
 * Text comes from a small seeded corpus, so full-text terms have realistic selectivity: ~50
 * sender services with a Zipf-like share (the most common ~10 % of mail, the rarest ~0.5 %),
 * ~15 subject templates (verification codes, password resets, receipts, digests, ...), and
 * bodies of a template lead, three sentences drawn from a Zipf-distributed vocabulary of ~3,000
 * words, and a footer naming the service. Messages arrive interleaved across accounts in time
 * order (ids ascend with received_at, as with real arrivals), over the last 85 days, all still
 * inside the 90-day retention.
 */
import type { PgClient } from "./burnbox.ts"

// ---------------------------------------------------------------------------------------------
// A seeded corpus

const mulberry32 = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** Sampler of indexes 0..n-1 with P(i) proportional to 1 / (i + 1)^s. */
const zipf = (n: number, s: number, random: () => number) => {
  const cumulative: Array<number> = []
  let sum = 0
  for (let i = 0; i < n; i++) cumulative.push(sum += 1 / Math.pow(i + 1, s))
  return () => {
    const x = random() * sum
    let lo = 0
    let hi = n - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cumulative[mid]! < x) lo = mid + 1
      else hi = mid
    }
    return lo
  }
}

/** Sender services, most common first (the share falls as 1 / rank^0.8). */
export const services: ReadonlyArray<string> = [
  "GitHub", "Google", "Amazon", "Slack", "Netflix", "Stripe", "PayPal", "Dropbox", "LinkedIn", "Spotify",
  "Uber", "Airbnb", "Shopify", "Notion", "Figma", "Zoom", "Atlassian", "Microsoft", "Apple", "Discord",
  "Reddit", "Twitch", "Steam", "Coinbase", "Revolut", "Wise", "Trello", "Asana", "Mailchimp", "HubSpot",
  "Salesforce", "Heroku", "Vercel", "Netlify", "DigitalOcean", "Cloudflare", "Docker", "npm", "GitLab", "Bitbucket",
  "JetBrains", "Medium", "Substack", "Patreon", "Kickstarter", "Duolingo", "Strava", "Etsy"
]

const commonWords = (
  "the of and to a in is you that it for on with as your this be at by are from or have an we will not can all " +
  "our more new one about if has their up was out do so what when there which get please now just us time like " +
  "account email team free help here update information people see any only make also may been use over know " +
  "back first good day week need most some year work into them its how even way these other after well because " +
  "want then thanks great today click below link view learn support order receipt payment invoice total amount card " +
  "billing plan subscription renew renewal upgrade trial price discount offer sale shop cart item shipping delivery " +
  "tracking package address password security sign login verify verification code confirm confirmation device browser " +
  "location settings privacy terms policy notification message reply comment mention follow follower invite project " +
  "repository issue pull request branch commit release build deploy server database api token key access permission " +
  "admin member workspace channel meeting calendar event schedule reminder report dashboard analytics data file " +
  "document folder share shared download upload photo video music playlist song episode show movie watch listen " +
  "read article story news weekly daily monthly digest summary highlights popular recommended community forum " +
  "question answer feedback survey review rating customer service contact phone mobile app desktop version feature " +
  "improvement fix bug performance faster easier simple quick start started guide tutorial tips tricks best practices " +
  "example template design color style theme dark light mode night morning evening weekend holiday travel trip " +
  "booking flight hotel ride driver restaurant food coffee lunch dinner friend family home office remote city " +
  "country world local global market price stock crypto wallet balance transfer transaction bank savings budget " +
  "goal progress streak lesson course learn practice language run ride distance activity workout health sleep"
).split(" ")

const syllables = ["ka", "lo", "mi", "ra", "tu", "ve", "no", "si", "pa", "de", "ri", "mo", "ta", "le", "zu", "ba", "ne", "ko", "fi", "gu", "sha", "tor", "lin", "mar", "ven", "dor"]

/** ~3,000 words: the common English ones first, then a long tail of made-up words. */
const vocabulary = (random: () => number): Array<string> => {
  const words = [...new Set(commonWords)]
  const seen = new Set(words)
  while (words.length < 3_000) {
    const n = 2 + Math.floor(random() * 3)
    let w = ""
    for (let i = 0; i < n; i++) w += syllables[Math.floor(random() * syllables.length)]
    if (!seen.has(w)) {
      seen.add(w)
      words.push(w)
    }
  }
  return words
}

interface Template {
  readonly weight: number
  readonly subject: string
  readonly lead: string
  readonly code?: boolean
  readonly person?: boolean
}

const templates: ReadonlyArray<Template> = [
  { weight: 14, code: true, subject: "Your {S} verification code is {CODE}", lead: "Use the code {CODE} to verify your email address. The code expires in 10 minutes." },
  { weight: 8, code: true, subject: "{CODE} is your {S} login code", lead: "Enter {CODE} to finish signing in to {S}. If this was not you, reset your password." },
  { weight: 10, subject: "Confirm your email address for {S}", lead: "Please confirm your email address by clicking the link below to activate your {S} account." },
  { weight: 8, subject: "Welcome to {S}", lead: "Thanks for signing up for {S}. Here are a few tips to get started with your new account." },
  { weight: 6, subject: "Reset your {S} password", lead: "We received a request to reset the password for your {S} account. Click the link below to choose a new password." },
  { weight: 6, subject: "Your {S} receipt #{N}", lead: "Thank you for your payment. Your receipt number is {N}." },
  { weight: 5, subject: "Your {S} invoice for {MONTH}", lead: "Your invoice for {MONTH} is ready. The total amount will be charged to the card on file." },
  { weight: 6, subject: "New sign-in to your {S} account", lead: "We noticed a new sign-in to your {S} account from a new device. If this was you, no action is needed." },
  { weight: 7, subject: "{S} weekly digest: {W} and {W}", lead: "Here is what happened on {S} this week." },
  { weight: 5, subject: "Your order #{N} has shipped", lead: "Good news: your order {N} is on its way and should arrive within 3 to 5 business days." },
  { weight: 4, subject: "Action required: verify your {S} account", lead: "Your {S} account is not verified yet. Verify it within 48 hours to keep access." },
  { weight: 4, subject: "Security alert for your {S} account", lead: "A security setting was changed on your {S} account. Review your recent activity." },
  { weight: 6, subject: "{S} newsletter: {W} {W} {W}", lead: "This month on the {S} blog." },
  { weight: 3, subject: "Your {S} trial ends in {D} days", lead: "Your free trial of {S} ends soon. Upgrade to keep your projects and settings." },
  { weight: 4, person: true, subject: "Re: {W} {W}", lead: "Thanks for getting back to me about this." }
]

const months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
const firstNames = ["Anna", "Ben", "Chloe", "David", "Emma", "Felix", "Grace", "Hugo", "Iris", "Jonas", "Kate", "Leo", "Mia", "Noah", "Olivia", "Paul"]
const lastNames = ["Smith", "Meyer", "Garcia", "Rossi", "Novak", "Dubois", "Jansen", "Kowalski", "Silva", "Berg", "Nakamura", "Okafor"]
const mailboxes = ["noreply", "no-reply", "notifications", "support", "security", "billing", "hello", "team"]

export interface Corpus {
  /** subject pool: subject and lead keep {CODE} and {N} for SQL to fill per message */
  readonly subjects: ReadonlyArray<{ subject: string; lead: string; footer: string; senderName: string; senderAddress: string; domain: string; hasCode: boolean }>
  readonly sentences: ReadonlyArray<string>
  readonly vocabularySize: number
}

export const makeCorpus = (seed = 20_260_831, subjectPool = 8_000, sentencePool = 6_000): Corpus => {
  const random = mulberry32(seed)
  const words = vocabulary(random)
  const word = zipf(words.length, 1.0, random)
  const service = zipf(services.length, 0.8, random)
  const totalWeight = templates.reduce((a, t) => a + t.weight, 0)
  const template = () => {
    let x = random() * totalWeight
    for (const t of templates) if ((x -= t.weight) < 0) return t
    return templates[0]!
  }
  const pick = <A>(list: ReadonlyArray<A>) => list[Math.floor(random() * list.length)]!
  const subjects: Array<Corpus["subjects"][number]> = []
  for (let i = 0; i < subjectPool; i++) {
    const t = template()
    const s = services[service()]!
    const domain = `${s.toLowerCase()}.com`
    const fill = (text: string) =>
      text.replaceAll("{S}", s).replaceAll("{MONTH}", pick(months)).replaceAll("{D}", String(1 + Math.floor(random() * 14)))
        .replace(/\{W\}/g, () => words[word()]!)
    const person = t.person === true
    const first = pick(firstNames)
    const last = pick(lastNames)
    subjects.push({
      subject: fill(t.subject),
      lead: fill(t.lead),
      footer: person ? `Best regards, ${first}` : `You are receiving this email because you have an account with ${s}. Manage your notification settings or unsubscribe.`,
      senderName: person ? `${first} ${last}` : random() < 0.5 ? s : `The ${s} Team`,
      senderAddress: person ? `${first.toLowerCase()}.${last.toLowerCase()}@${pick(["gmail.com", "outlook.com", "proton.me", "fastmail.com"])}` : `${pick(mailboxes)}@${domain}`,
      domain: person ? "gmail.com" : domain,
      hasCode: t.code === true
    })
  }
  const sentences: Array<string> = []
  for (let i = 0; i < sentencePool; i++) {
    const n = 8 + Math.floor(random() * 11)
    const parts: Array<string> = []
    for (let k = 0; k < n; k++) parts.push(words[word()]!)
    const text = parts.join(" ")
    sentences.push(text[0]!.toUpperCase() + text.slice(1) + ".")
  }
  return { subjects, sentences, vocabularySize: words.length }
}

// ---------------------------------------------------------------------------------------------
// Loading

export interface LoadOptions {
  readonly total: number
  readonly accounts: number
  /** every `largestEvery`-th message goes to the largest account (5: 20 %) */
  readonly largestEvery: number
  readonly largestAccountId: number
  readonly largestAliases: number
  /** the receiving domain the aliases live on */
  readonly domainId: number
  readonly domainName: string
  /** rows per INSERT statement */
  readonly chunk: number
  /** keep the secondary indexes of messages during the load (slower) instead of rebuilding them */
  readonly keepIndexes: boolean
  readonly log: (line: string) => void
  readonly checkInterrupted: () => void
}

export interface LoadStep {
  readonly step: string
  readonly seconds: number
  readonly rows?: number
}

const timed = async <A>(steps: Array<LoadStep>, step: string, f: () => Promise<A>, rows?: (a: A) => number | undefined): Promise<A> => {
  const t0 = performance.now()
  const a = await f()
  const seconds = (performance.now() - t0) / 1000
  const n = rows?.(a)
  steps.push(n === undefined ? { step, seconds } : { step, seconds, rows: n })
  return a
}

/** 0..2^32-1, a deterministic hash of a bigint expression (PostgreSQL's own hashint8). */
const h = (expr: string) => `(hashint8(${expr})::bigint + 2147483648)`

export const loadMessages = async (db: PgClient, corpus: Corpus, o: LoadOptions): Promise<Array<LoadStep>> => {
  const steps: Array<LoadStep> = []
  await db.query("SET maintenance_work_mem = '512MB'")
  await db.query("SET work_mem = '64MB'")
  await db.query("SET synchronous_commit = off")

  // Accounts: the largest exists (made with the CLI); the others copy its password hash.
  const [big] = (await db.query<{ password_hash: string }>("SELECT password_hash FROM accounts WHERE id = $1", [o.largestAccountId])).rows
  if (big === undefined) throw new Error(`account ${o.largestAccountId} not found`)
  await timed(steps, "accounts (SQL)", () =>
    db.query(
      `INSERT INTO accounts (email, email_key, password_hash, plan, created_at)
       SELECT 'bench-user-' || k || '@example.com', 'bench-user-' || k || '@example.com', $1, 'pro', now() - interval '120 days'
       FROM generate_series(1, $2::int) k`,
      [big.password_hash, o.accounts - 1]
    ), (r) => r.rowCount ?? 0)
  const others = (await db.query<{ id: number }>("SELECT id FROM accounts WHERE email_key LIKE 'bench-user-%' ORDER BY id")).rows.map((r) => r.id)

  // Aliases: the largest account has `largestAliases`, the others 1 to 8.
  const aliasRows: Array<{ account: number; n: number }> = [{ account: o.largestAccountId, n: o.largestAliases }]
  others.forEach((account, k) => aliasRows.push({ account, n: 1 + (k % 8) }))
  await timed(steps, "aliases (SQL)", () =>
    db.query(
      `INSERT INTO aliases (account_id, domain_id, local_part, local_key, style, status, claimed_at)
       SELECT a.account, $3, w.word || '-' || a.account || '-' || j, w.word || '-' || a.account || '-' || j, 'words', 'active',
              now() - interval '100 days'
       FROM unnest($1::int[], $2::int[]) AS a(account, n)
       CROSS JOIN LATERAL generate_series(1, a.n) j
       CROSS JOIN LATERAL (SELECT (ARRAY['amber','brisk','cedar','dusty','ember','frost','gentle','hazel','ivory','jolly'])[1 + (a.account + j) % 10] AS word) w`,
      [aliasRows.map((r) => r.account), aliasRows.map((r) => r.n), o.domainId]
    ), (r) => r.rowCount ?? 0)
  await db.query(
    `INSERT INTO alias_claim_counts (account_id, lifetime) SELECT account_id, count(*)::int FROM aliases GROUP BY account_id
     ON CONFLICT (account_id) DO UPDATE SET lifetime = excluded.lifetime`
  )

  // Pools as temporary tables (this session only), joined by hash on a hashed index per message.
  await timed(steps, "corpus pools (temp tables)", async () => {
    await db.query(`CREATE TEMP TABLE bench_subjects (i int PRIMARY KEY, subject text, lead text, footer text, sender_name text,
                      sender_address text, domain text, has_code boolean)`)
    const s = corpus.subjects
    await db.query(
      `INSERT INTO bench_subjects SELECT i - 1, subject, lead, footer, sender_name, sender_address, domain, has_code
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[]) WITH ORDINALITY
            AS u(subject, lead, footer, sender_name, sender_address, domain, has_code, i)`,
      [s.map((x) => x.subject), s.map((x) => x.lead), s.map((x) => x.footer), s.map((x) => x.senderName), s.map((x) => x.senderAddress),
        s.map((x) => x.domain), s.map((x) => x.hasCode)]
    )
    await db.query("CREATE TEMP TABLE bench_sentences (i int PRIMARY KEY, s text)")
    await db.query("INSERT INTO bench_sentences SELECT i - 1, s FROM unnest($1::text[]) WITH ORDINALITY AS u(s, i)", [corpus.sentences])
    // Targets: the largest account's aliases at 0..B-1, then slots of the other accounts, each
    // account with a share falling as 1 / (rank + 5), its slots spread over its aliases.
    await db.query("CREATE TEMP TABLE bench_targets (i int PRIMARY KEY, alias_id int, account_id int, recipient text)")
    await db.query(
      `INSERT INTO bench_targets
       SELECT row_number() OVER (ORDER BY al.id) - 1, al.id, al.account_id, al.local_part || '@' || $2
       FROM aliases al WHERE al.account_id = $1`,
      [o.largestAccountId, o.domainName]
    )
    const slots = 10_000
    const weights = others.map((_, k) => 1 / (k + 6))
    const sum = weights.reduce((a, b) => a + b, 0)
    const counts = weights.map((w) => Math.max(1, Math.round((slots * w) / sum)))
    await db.query(
      `INSERT INTO bench_targets
       SELECT $3 + row_number() OVER (ORDER BY c.account, s) - 1, al.id, al.account_id, al.local_part || '@' || $4
       FROM unnest($1::int[], $2::int[]) AS c(account, n)
       CROSS JOIN LATERAL generate_series(0, c.n - 1) s
       CROSS JOIN LATERAL (SELECT count(*)::int AS k FROM aliases WHERE account_id = c.account) ak
       JOIN LATERAL (SELECT id, account_id, local_part FROM aliases WHERE account_id = c.account ORDER BY id OFFSET s % ak.k LIMIT 1) al ON true`,
      [others, counts, o.largestAliases, o.domainName]
    )
    await db.query("ANALYZE bench_subjects; ANALYZE bench_sentences; ANALYZE bench_targets")
  })
  const [{ n: otherSlots }] = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM bench_targets WHERE i >= $1`, [o.largestAliases])).rows as [{ n: number }]

  // Secondary indexes of messages and of its search index (message_search, written with each
  // message as the pipeline's index step does): dropped and rebuilt from their exact definitions
  // (a bulk load builds them once instead of maintaining them row by row), unless asked to keep them.
  const indexes = (await db.query<{ indexname: string; indexdef: string }>(
    `SELECT i.indexname, i.indexdef FROM pg_indexes i
     WHERE i.schemaname = 'public' AND i.tablename IN ('messages', 'message_search') AND i.indexname NOT LIKE '%_pkey'
     ORDER BY i.tablename, i.indexname`
  )).rows
  if (!o.keepIndexes) {
    await timed(steps, `drop ${indexes.length} secondary indexes of messages and message_search`, async () => {
      for (const ix of indexes) await db.query(`DROP INDEX ${ix.indexname}`)
    })
  }

  // Messages, in time order, interleaved across accounts.
  const now = Date.now()
  const start = new Date(now - 85 * 86_400_000)
  const spacingMs = (85 * 86_400_000 - 60_000) / o.total
  const insert = `
    WITH message AS (
    INSERT INTO messages (account_id, alias_id, source, recipient, envelope_from, client_address, client_helo,
      received_at, expires_at, size_bytes, processing_status, processing_attempts, processed_at,
      sender_name, sender_address, subject, snippet, text_body, headers, auth, spam_score, otp_codes, has_attachments)
    SELECT t.account_id, t.alias_id, 'smtp', t.recipient, 'bounces@' || ps.domain, '203.0.113.' || (x.h1 % 250 + 1), 'mail.' || ps.domain,
      x.received_at, x.received_at + interval '90 days', (1200 + x.h2 % 40000)::int, 'processed', 1,
      x.received_at + interval '40 milliseconds',
      ps.sender_name, ps.sender_address, y.subject, left(y.body, 200), y.body,
      jsonb_build_object('from', ps.sender_name || ' <' || ps.sender_address || '>', 'to', t.recipient, 'subject', y.subject,
                         'message-id', '<' || x.g || '.' || x.h3 || '@' || ps.domain || '>'),
      '{"spf": "pass", "dkim": "pass", "dmarc": "pass"}'::jsonb, 0.1,
      CASE WHEN ps.has_code THEN jsonb_build_array(x.code) ELSE '[]'::jsonb END,
      x.h2 % 20 = 0
    FROM (
      SELECT g, h1, h2, h3,
             CASE WHEN g % ${o.largestEvery} = 0 THEN (h4 % $3)::int ELSE ($3 + h4 % $4)::int END AS target,
             (h5 % ${corpus.subjects.length})::int AS subject_i,
             (h6 % ${corpus.sentences.length})::int AS s1, (h7 % ${corpus.sentences.length})::int AS s2,
             (h8 % ${corpus.sentences.length})::int AS s3,
             $5::timestamptz + ((g + (h3 % 1000) / 1000.0) * $6::float8) * interval '1 millisecond' AS received_at,
             lpad((h1 % 1000000)::text, 6, '0') AS code, (100000 + h2 % 900000)::text AS num
      FROM (SELECT g, ${h("g * 16 + 1")} AS h1, ${h("g * 16 + 2")} AS h2, ${h("g * 16 + 3")} AS h3, ${h("g * 16 + 4")} AS h4,
                   ${h("g * 16 + 5")} AS h5, ${h("g * 16 + 6")} AS h6, ${h("g * 16 + 7")} AS h7, ${h("g * 16 + 8")} AS h8
            FROM generate_series($1::bigint, $2::bigint) g) r
    ) x
    JOIN bench_targets t ON t.i = x.target
    JOIN bench_subjects ps ON ps.i = x.subject_i
    JOIN bench_sentences s1 ON s1.i = x.s1
    JOIN bench_sentences s2 ON s2.i = x.s2
    JOIN bench_sentences s3 ON s3.i = x.s3
    CROSS JOIN LATERAL (
      SELECT replace(replace(ps.subject, '{CODE}', x.code), '{N}', x.num) AS subject,
             replace(replace(ps.lead, '{CODE}', x.code), '{N}', x.num) || ' ' || s1.s || ' ' || s2.s || ' ' || s3.s || E'\n\n' || ps.footer AS body
    ) y
    RETURNING id, account_id, alias_id, received_at, has_attachments, subject, sender_name, sender_address, text_body
    )
    INSERT INTO message_search (id, account_id, alias_id, received_at, has_attachments, search)
    SELECT id, account_id, alias_id, received_at, has_attachments,
           account_lexemes(account_id, setweight(to_tsvector('simple', subject), 'A')
             || setweight(to_tsvector('simple', coalesce(sender_name, '') || ' ' || sender_address), 'B')
             || to_tsvector('simple', text_body))
    FROM message`
  for (let from = 1; from <= o.total; from += o.chunk) {
    o.checkInterrupted()
    const to = Math.min(o.total, from + o.chunk - 1)
    await timed(steps, `messages ${from.toLocaleString("en-US")}..${to.toLocaleString("en-US")}`, () =>
      db.query(insert, [from, to, o.largestAliases, otherSlots, start, spacingMs]), (r) => r.rowCount ?? 0)
    o.log(`loaded messages up to ${to.toLocaleString("en-US")} (${steps[steps.length - 1]!.seconds.toFixed(1)} s)`)
  }

  // Reader state: 40 % read, 3 % starred, 5 % archived, a few pinned; a row only where set.
  await timed(steps, "message_states", () =>
    db.query(`
      INSERT INTO message_states (message_id, account_id, is_read, starred, pinned, archived)
      SELECT id, account_id, hs % 100 < 40, (hs / 10000) % 100 < 3, hs % 20011 = 0, (hs / 100) % 100 < 5
      FROM (SELECT id, account_id, ${h("id::bigint * 31 + 7")} AS hs FROM messages) z
      WHERE hs % 100 < 40 OR (hs / 10000) % 100 < 3 OR hs % 20011 = 0 OR (hs / 100) % 100 < 5`), (r) => r.rowCount ?? 0)

  if (!o.keepIndexes) {
    for (const ix of indexes) {
      o.checkInterrupted()
      // A partitioned table's index reads `ON ONLY` (the parent alone, as pg_dump builds it): built
      // here on every partition.
      await timed(steps, `CREATE INDEX ${ix.indexname}`, () => db.query(ix.indexdef.replace(/ ON ONLY /, " ON ")))
    }
  }

  await timed(steps, "counters (aliases, accounts)", async () => {
    // The inserts appended their counts as deltas (migration 0029): the kept counts take them,
    // the aliases' and accounts' rows are set whole below.
    await db.query(`
      WITH folded AS (DELETE FROM mail_count_deltas RETURNING account_id, alias_id, in_mailbox, trashed),
      mailbox AS (
        UPDATE mailbox_counts c SET in_mailbox = c.in_mailbox + s.in_mailbox, trashed = c.trashed + s.trashed
        FROM (SELECT account_id, sum(in_mailbox)::int AS in_mailbox, sum(trashed)::int AS trashed FROM folded GROUP BY account_id) s
        WHERE c.account_id = s.account_id)
      UPDATE alias_counts c SET in_mailbox = c.in_mailbox + s.in_mailbox, trashed = c.trashed + s.trashed
      FROM (SELECT alias_id, sum(in_mailbox)::int AS in_mailbox, sum(trashed)::int AS trashed FROM folded GROUP BY alias_id) s
      WHERE c.alias_id = s.alias_id`)
    await db.query(`
      UPDATE aliases al SET received_count = c.n, storage_used_bytes = c.bytes, last_received_at = c.last, unread_count = c.n - c.read
      FROM (SELECT m.alias_id, count(*)::int AS n, sum(m.size_bytes)::bigint AS bytes, max(m.received_at) AS last,
                   (count(*) FILTER (WHERE s.is_read))::int AS read
            FROM messages m LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = m.account_id
            GROUP BY m.alias_id) c
      WHERE al.id = c.alias_id`)
    await db.query(`
      UPDATE accounts a SET storage_used_bytes = c.bytes
      FROM (SELECT account_id, sum(size_bytes)::bigint AS bytes FROM messages GROUP BY account_id) c WHERE a.id = c.account_id`)
  })
  await db.query("DROP TABLE bench_subjects, bench_sentences, bench_targets")
  const present = new Set((await db.query<{ name: string }>("SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'")).rows.map((r) => r.name))
  const tables = ["messages", "message_search", "message_states", "mailbox_counts", "aliases", "accounts"].filter((t) => present.has(t))
  await timed(steps, `VACUUM (ANALYZE) ${tables.join(", ")}`, async () => {
    for (const t of tables) await db.query(`VACUUM (ANALYZE) ${t}`)
  })
  return steps
}
