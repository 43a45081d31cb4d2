/**
 * The store speaks the domain, not HTTP: its services refuse with the tagged errors of
 * @burnbox/domain, named for the rule and carrying its data. Called directly here, on a fresh
 * database cloned from the run's migrated template, without the HTTP server.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, layer } from "@effect/vitest"
import {
  Accounts,
  Aliases,
  CandidateRandom,
  Entitlements,
  Keyring,
  MessageActions,
  Messages,
  RateLimiter,
  Tags,
  Tokens,
  Webhooks
} from "@burnbox/store"
import { TestDatabase } from "@burnbox/testkit"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"

const Store = Layer.mergeAll(
  Accounts.layer,
  Tags.layer,
  Tokens.layer,
  Messages.layer,
  MessageActions.layer,
  Webhooks.layer,
  Aliases.layer.pipe(Layer.provide([RateLimiter.layer, CandidateRandom.layer]))
).pipe(Layer.provideMerge(Keyring.layer), Layer.provideMerge(Entitlements.layer), Layer.provideMerge(TestDatabase))

let accounts = 0
const newAccount = Effect.gen(function*() {
  const repo = yield* Accounts
  return yield* repo.create({ email: `store${++accounts}.${randomBytes(3).toString("hex")}@example.com`, password: "correct horse battery", plan: "pro" })
    .pipe(Effect.orDie)
})

/** An active alias of the account on the public test domain, claimed as a client would. */
const claimedAlias = (accountId: number) =>
  Effect.gen(function*() {
    const aliases = yield* Aliases
    const reservation = yield* aliases.reserve(accountId, { domainId: 1, style: "words" }).pipe(Effect.orDie)
    const alias = yield* aliases.claim(accountId, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken })
      .pipe(Effect.orDie)
    return alias.id
  })

layer(Store, { timeout: 120_000 })("the store's refusals are domain errors", (it) => {
  describe("aliases", () => {
    it.effect("a stranger's alias is AliasNotFound, for a change and for test mail alike", () =>
      Effect.gen(function*() {
        const aliases = yield* Aliases
        const owner = yield* newAccount
        const stranger = yield* newAccount
        const aliasId = yield* claimedAlias(owner.id)
        const changed = yield* Effect.flip(aliases.transition(stranger.id, aliasId, "pause"))
        expect(changed).toMatchObject({ _tag: "AliasNotFound", aliasId })
        const injected = yield* Effect.flip(aliases.injectableAddress(stranger.id, aliasId))
        expect(injected).toMatchObject({ _tag: "AliasNotFound", aliasId })
        expect(yield* aliases.injectableAddress(owner.id, aliasId)).toMatch(/@burnbox\.test$/)
      }))

    it.effect("test mail to a paused alias is AliasPaused; to a burned one AliasBurned, which no transition undoes", () =>
      Effect.gen(function*() {
        const aliases = yield* Aliases
        const owner = yield* newAccount
        const aliasId = yield* claimedAlias(owner.id)
        yield* aliases.transition(owner.id, aliasId, "pause")
        expect(yield* Effect.flip(aliases.injectableAddress(owner.id, aliasId))).toMatchObject({ _tag: "AliasPaused", aliasId })
        yield* aliases.transition(owner.id, aliasId, "burn")
        expect(yield* Effect.flip(aliases.injectableAddress(owner.id, aliasId)))
          .toMatchObject({ _tag: "AliasBurned", aliasId, refused: "mailInjection" })
        expect(yield* Effect.flip(aliases.transition(owner.id, aliasId, "resume")))
          .toMatchObject({ _tag: "AliasBurned", aliasId, refused: "statusChange" })
        expect(yield* Effect.flip(aliases.clearTimer(owner.id, aliasId)))
          .toMatchObject({ _tag: "AliasBurned", aliasId, refused: "timerChange" })
      }))

    it.effect("an unknown domain is DomainNotFound; an unknown reservation is ReservationUnavailable", () =>
      Effect.gen(function*() {
        const aliases = yield* Aliases
        const owner = yield* newAccount
        expect(yield* Effect.flip(aliases.reserve(owner.id, { domainId: 999_999, style: "words" })))
          .toMatchObject({ _tag: "DomainNotFound", domainId: 999_999 })
        expect(yield* Effect.flip(aliases.claim(owner.id, { aliasId: 1, reservationToken: "no-such-token" })))
          .toMatchObject({ _tag: "ReservationUnavailable" })
      }))
  })

  describe("tags", () => {
    it.effect("a duplicate name is TagNameTaken (case-insensitively); a stranger's tag is TagNotFound", () =>
      Effect.gen(function*() {
        const tags = yield* Tags
        const owner = yield* newAccount
        const stranger = yield* newAccount
        const tag = yield* tags.create(owner.id, { name: "Receipts" })
        expect(yield* Effect.flip(tags.create(owner.id, { name: "receipts" }))).toMatchObject({ _tag: "TagNameTaken", name: "receipts" })
        expect(yield* Effect.flip(tags.update(stranger.id, tag.id, { name: "Mine" }))).toMatchObject({ _tag: "TagNotFound", tagId: tag.id })
        expect(yield* Effect.flip(tags.remove(stranger.id, tag.id))).toMatchObject({ _tag: "TagNotFound", tagId: tag.id })
      }))
  })

  describe("accounts and tokens", () => {
    it.effect("a second account for an email is EmailTaken; a token past the limit is TokenLimitReached", () =>
      Effect.gen(function*() {
        const repo = yield* Accounts
        const tokens = yield* Tokens
        const owner = yield* newAccount
        expect(yield* Effect.flip(repo.create({ email: owner.email.toUpperCase(), password: "correct horse battery" })))
          .toMatchObject({ _tag: "EmailTaken" })
        yield* repo.changeOverrides(owner.id, { developerAccess: false })
        expect(yield* Effect.flip(tokens.create(owner.id, { name: "not in the plan", scopes: ["read"] })))
          .toMatchObject({ _tag: "FeatureNotInPlan", feature: "developerAccess" })
        yield* repo.changeOverrides(owner.id, { apiTokenCount: 0 })
        expect(yield* Effect.flip(tokens.create(owner.id, { name: "one too many", scopes: ["read"] })))
          .toMatchObject({ _tag: "TokenLimitReached", limit: 0 })
      }))
  })

  describe("messages", () => {
    it.effect("a stranger's message is MessageNotFound; a stranger's alias's trash is AliasNotFound", () =>
      Effect.gen(function*() {
        const actions = yield* MessageActions
        const owner = yield* newAccount
        const stranger = yield* newAccount
        const aliasId = yield* claimedAlias(owner.id)
        expect(yield* Effect.flip(actions.remove(stranger.id, 424_242, false))).toMatchObject({ _tag: "MessageNotFound", messageId: 424_242 })
        expect(yield* Effect.flip(actions.emptyTrash(stranger.id, aliasId))).toMatchObject({ _tag: "AliasNotFound", aliasId })
        expect(yield* Effect.flip(actions.bulk(owner.id, { ids: [1], action: "add_tag" })))
          .toMatchObject({ _tag: "BulkTagActionWithoutTag", action: "add_tag" })
      }))

    it.effect("a cursor the list never gave out is InvalidCursor; a bad q is the search syntax's own error", () =>
      Effect.gen(function*() {
        const messages = yield* Messages
        const owner = yield* newAccount
        expect(yield* Effect.flip(messages.list(owner.id, { cursor: "not-a-cursor" }))).toMatchObject({ _tag: "InvalidCursor" })
        expect(yield* Effect.flip(messages.list(owner.id, { q: "before:2024-02-30" })))
          .toMatchObject({ _tag: "InvalidSearchDate", term: "before:2024-02-30" })
      }))
  })

  describe("webhooks", () => {
    it.effect("a stranger's endpoint is WebhookNotFound; an unknown delivery is DeliveryNotFound; a refused URL names its rule", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const sql = yield* SqlClient.SqlClient
        const owner = yield* newAccount
        const stranger = yield* newAccount
        const [row] = yield* sql<{ id: number }>`
          INSERT INTO webhooks (account_id, name, url, subscription, secret_encrypted, created_at, updated_at)
          VALUES (${owner.id}, 'hook', 'https://hooks.example.com/in', '{"mode":"all"}'::jsonb, 'x', now(), now())
          RETURNING id`
        expect(yield* Effect.flip(webhooks.remove(stranger.id, row!.id))).toMatchObject({ _tag: "WebhookNotFound", webhookId: row!.id })
        expect(yield* Effect.flip(webhooks.queueTest(stranger.id, row!.id))).toMatchObject({ _tag: "WebhookNotFound", webhookId: row!.id })
        expect(yield* Effect.flip(webhooks.redeliver(owner.id, 424_242))).toMatchObject({ _tag: "DeliveryNotFound", deliveryId: 424_242 })
        expect(yield* Effect.flip(webhooks.create(owner.id, { name: "plain", url: "http://hooks.example.com/in", subscription: { mode: "all" } })))
          .toMatchObject({ _tag: "WebhookUrlRefused" })
      }))
  })
})
