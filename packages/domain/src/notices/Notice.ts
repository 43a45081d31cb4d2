import { Schema } from "effect"
import { DateTimeString, Id } from "../platform/Common.ts"

/**
 * Notices for the account owner (an additive resource): things the service did on its own
 * that the owner should learn about, such as a webhook endpoint disabled after three days of
 * failures (`kind` `webhook.disabled`). Newest first.
 */
export const Notice = Schema.Struct({
  id: Id,
  kind: Schema.String,
  data: Schema.Record(Schema.String, Schema.Unknown),
  createdAt: DateTimeString
}).annotate({ identifier: "Notice" })
