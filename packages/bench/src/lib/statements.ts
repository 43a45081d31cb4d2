/**
 * The statements the service sends for a request, taken from the store's own code rather than
 * written again: runs `Messages.list` (the repository behind GET /messages) in this process on
 * the service's database, with a statement transformer that records every statement as it is
 * compiled (its text with $n placeholders and its values), then answers them in order.
 */
import { encodeCursor, Keyring, type ListPage, Messages } from "@burnbox/store"
import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Layer, Redacted, Scope } from "effect"
import { Statement } from "effect/sql"

export interface SentStatement {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
}

export interface StatementRecorder {
  /** The statements `Messages.list` sends for this page (SELECT and WITH only), in the order they were compiled. */
  readonly list: (accountId: number, page: ListPage) => Promise<Array<SentStatement>>
  /** A cursor of the list (newest first, default filters) that continues after this position, as the service signs it. */
  readonly cursorAfter: (accountId: number, position: { readonly receivedAt: string; readonly id: number }) => string
  readonly close: () => Promise<void>
}

export const statementRecorder = async (database: { readonly host: string; readonly port: number; readonly user: string; readonly password: string; readonly database: string }, secret: string): Promise<StatementRecorder> => {
  const url = `postgres://${encodeURIComponent(database.user)}:${encodeURIComponent(database.password)}@${database.host}:${database.port}/${database.database}`
  const keyring = Keyring.make(Redacted.make(secret))
  const layer = Messages.layer.pipe(
    Layer.provideMerge(Layer.succeed(Keyring, keyring)),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 }))
  )
  const scope = Scope.makeUnsafe()
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  return {
    list: async (accountId, page) => {
      const sent: Array<SentStatement> = []
      const record: Statement.Transformer = (self) =>
        Effect.sync(() => {
          const [text, params] = self.compile()
          if (/^\s*(SELECT|WITH)\b/i.test(text)) sent.push({ text, params })
          return self
        })
      const listed = Effect.flatMap(Messages, (messages) => messages.list(accountId, page)).pipe(
        Effect.provideService(Statement.CurrentTransformer, record),
        Effect.provideContext(context)
      )
      await Effect.runPromise(listed)
      return sent
    },
    cursorAfter: (accountId, position) => encodeCursor(keyring, accountId, {}, position),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
