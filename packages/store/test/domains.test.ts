/**
 * Receiving domains against the embedded PostgreSQL, called directly: the configured domains
 * are listed with their tier, added (or re-tiered) by name, and retired without being removed.
 */
import { Domains, toMailDomain } from "@burnbox/store"
import { TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"

layer(Domains.layer.pipe(Layer.provideMerge(TestDatabase)))("Domains", (it) => {
  it.effect("the seeded domains are listed in the order they were added, with their state and tier", () =>
    Effect.gen(function*() {
      const domains = yield* Domains
      const listed = yield* domains.list
      assert.deepStrictEqual(listed.map(({ name, state, tier }) => ({ name, state, tier })), [
        { name: "burnbox.test", state: "active", tier: "public" },
        { name: "vip.test", state: "active", tier: "premium_only" }
      ])
      assert.deepStrictEqual(toMailDomain(listed[1]!, false), { ...listed[1]!, claimable: false, upgradeRequired: true })
    }))

  it.effect("adding a domain stores its name in lowercase; adding a known name changes only its tier", () =>
    Effect.gen(function*() {
      const domains = yield* Domains
      const added = yield* domains.add("Mail.Example.TEST", "public")
      assert.deepStrictEqual(added, { id: added.id, name: "mail.example.test", state: "active", tier: "public" })
      assert.deepStrictEqual(yield* domains.add("mail.example.test", "premium_only"), { ...added, tier: "premium_only" })
      assert.deepStrictEqual((yield* domains.list).at(-1), { ...added, tier: "premium_only" })
    }))

  it.effect("a retired domain stays listed as retired; retiring an unknown name retires nothing", () =>
    Effect.gen(function*() {
      const domains = yield* Domains
      const added = yield* domains.add("old.example.test", "public")
      assert.deepStrictEqual(yield* domains.retire("OLD.example.test"), { ...added, state: "retired" })
      assert.deepStrictEqual((yield* domains.list).find((d) => d.id === added.id), { ...added, state: "retired" })
      assert.deepStrictEqual(toMailDomain({ ...added, state: "retired" }, true), { ...added, state: "retired", claimable: false, upgradeRequired: false })
      assert.isUndefined(yield* domains.retire("never.example.test"))
    }))
})
