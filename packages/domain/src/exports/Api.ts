/** Spec 4.7: the exports group (Pro only; a downgrade keeps archives but suspends this API). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires } from "../auth/Access.ts"
import { Errors as E } from "../platform/Problem.ts"
import { CreateExportInput, ExportDetail, ExportList, QueuedExport } from "./Export.ts"

export class ExportsGroup extends HttpApiGroup.make("exports")
  .add(
    HttpApiEndpoint.get("list", "/exports", { success: ExportList, error: E.Forbidden }).annotate(Access, requires("read")),
    HttpApiEndpoint.post("create", "/exports", {
      // An empty body is the whole mailbox: it decodes as null.
      payload: [CreateExportInput, Schema.Null],
      success: QueuedExport.pipe(HttpApiSchema.status(202)),
      error: [E.Forbidden, E.NotFound, E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("get", "/exports/:id", { params: IdParams, success: ExportDetail, error: [E.Forbidden, E.NotFound] })
      .annotate(Access, requires("read")),
    HttpApiEndpoint.get("download", "/exports/:id/download", {
      params: IdParams,
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "application/zip" })),
      error: [E.Forbidden, E.NotFound]
    }).annotate(Access, requires("read"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Exports" }))
{}
