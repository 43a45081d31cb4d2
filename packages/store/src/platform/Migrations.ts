/**
 * Numbered SQL migrations (`migrations/NNNN_name.sql`), applied in order, each once, inside
 * one transaction under an advisory lock so several processes starting together apply them
 * once. Runs through node-postgres' simple query protocol so a file may hold many statements.
 */
import { readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Effect, Redacted } from "effect"
import pg from "pg"
import { StartupFailure } from "./Startup.ts"

const directory = fileURLToPath(new URL("../../migrations/", import.meta.url))

export interface Migration {
  readonly id: number
  readonly name: string
  readonly sql: string
}

export const loadMigrations = (): ReadonlyArray<Migration> =>
  readdirSync(directory)
    .filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      id: Number(file.slice(0, 4)),
      name: file.slice(5, -4),
      sql: readFileSync(directory + file, "utf8")
    }))

/** The oldest PostgreSQL the migrations run on (tested on 15 and 18; nothing they use is newer than 14). */
export const OldestPostgres = 14

/** Why a server of this version (`server_version_num`, `server_version`) cannot hold burnbox's database, if it cannot. */
export const postgresTooOld = (versionNum: number, version: string): string | undefined =>
  versionNum >= OldestPostgres * 10_000
    ? undefined
    : `PostgreSQL ${version} is older than burnbox needs (${OldestPostgres} or newer); point DATABASE_URL at a newer one`

/** Applies pending migrations; answers the ones it applied. */
export const migrate = (url: Redacted.Redacted<string>) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: Redacted.value(url) })
    await client.connect()
    try {
      const [server] = (await client.query<{ num: string; version: string }>(
        "SELECT current_setting('server_version_num') AS num, current_setting('server_version') AS version"
      )).rows
      const refusal = postgresTooOld(Number(server?.num), server?.version ?? "?")
      if (refusal !== undefined) throw new StartupFailure({ message: refusal })
      await client.query("BEGIN")
      await client.query("SELECT pg_advisory_xact_lock(727272)")
      await client.query(`CREATE TABLE IF NOT EXISTS burnbox_migrations (
        id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
      const done = new Set((await client.query<{ id: number }>("SELECT id FROM burnbox_migrations")).rows.map((r: { id: number }) => r.id))
      const applied: Array<string> = []
      for (const migration of loadMigrations()) {
        if (done.has(migration.id)) continue
        await client.query(migration.sql)
        await client.query("INSERT INTO burnbox_migrations (id, name) VALUES ($1, $2)", [migration.id, migration.name])
        applied.push(`${String(migration.id).padStart(4, "0")}_${migration.name}`)
      }
      await client.query("COMMIT")
      return applied
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined)
      throw error
    } finally {
      await client.end()
    }
  })
