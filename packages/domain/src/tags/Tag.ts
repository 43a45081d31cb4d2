import { Schema } from "effect"
import { Id, NonNegativeInt } from "../platform/Common.ts"

export const TagName = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(64))
/** Stored and answered as uppercase hex (spec 2.5). */
export const TagColor = Schema.String.check(Schema.isPattern(/^#[0-9A-F]{6}$/u))
/** Input accepts either case. */
export const TagColorInput = Schema.String.check(Schema.isPattern(/^#[0-9A-Fa-f]{6}$/u, { message: "invalid_color" }))

const tagFields = { id: Id, name: TagName, color: Schema.NullOr(TagColor) }

export const Tag = Schema.Struct(tagFields).annotate({ identifier: "Tag" })
export type Tag = typeof Tag.Type

export const TagWithCount = Schema.Struct({ ...tagFields, messageCount: NonNegativeInt }).annotate({ identifier: "TagWithCount" })
export type TagWithCount = typeof TagWithCount.Type

export const CreateTag = Schema.Struct({
  name: TagName,
  color: Schema.optionalKey(Schema.NullOr(TagColorInput))
})
export const UpdateTag = Schema.Struct({
  name: Schema.optionalKey(TagName),
  color: Schema.optionalKey(Schema.NullOr(TagColorInput))
})

export const normalizeTagColor = (color: string | null | undefined): string | null =>
  color === null || color === undefined ? null : color.toUpperCase()
