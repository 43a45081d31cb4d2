/** The rules of an account's tags (spec 2.5, 4.2). */
import { Schema } from "effect"

/** No tag of the account has this id. */
export class TagNotFound extends Schema.TaggedError<TagNotFound>()("TagNotFound", {
  tagId: Schema.Int
}) {}

/** Tag names are unique per account, compared case-insensitively. */
export class TagNameTaken extends Schema.TaggedError<TagNameTaken>()("TagNameTaken", {
  name: Schema.String
}) {}

/** Which input of a message change named the tags: `tagIds` of a PATCH, `tagId` of a bulk action. */
export const TagInput = Schema.Literals(["tagIds", "tagId"])
export type TagInput = typeof TagInput.Type

/** Mail is tagged only with the reader's own tags. */
export class TagNotOwned extends Schema.TaggedError<TagNotOwned>()("TagNotOwned", {
  tagIds: Schema.Array(Schema.Int),
  input: TagInput
}) {}

export type TagError = TagNotFound | TagNameTaken | TagNotOwned
