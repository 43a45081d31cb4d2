/** Spec 4.3: the aliases group: candidates, claims, state, timers. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires } from "../auth/Access.ts"
import { Errors as E } from "../platform/Problem.ts"
import {
  Alias,
  AliasTimer,
  CandidateRelease,
  CandidateReservation,
  ClaimAlias,
  ListAliasesQuery,
  ReleaseCandidates,
  ReserveCandidates,
  SetTimer,
  UpdateAlias
} from "./Alias.ts"

export class AliasesGroup extends HttpApiGroup.make("aliases")
  .add(
    HttpApiEndpoint.get("list", "/aliases", {
      query: ListAliasesQuery,
      success: Schema.Struct({ items: Schema.Array(Alias) })
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.post("claim", "/aliases", {
      payload: ClaimAlias,
      success: Alias.pipe(HttpApiSchema.status(201)),
      error: [E.Forbidden, E.Conflict, E.ValidationFailed, E.RateLimited]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("reserve", "/aliases/candidates", {
      payload: ReserveCandidates,
      success: CandidateReservation,
      error: [E.Forbidden, E.NotFound, E.Conflict, E.ValidationFailed, E.RateLimited]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("releaseCandidates", "/aliases/candidates", {
      payload: [ReleaseCandidates, Schema.Null],
      success: CandidateRelease,
      error: E.ValidationFailed
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("releaseCandidatesPost", "/aliases/candidates/release", {
      payload: [ReleaseCandidates, Schema.Null],
      success: CandidateRelease,
      error: E.ValidationFailed
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.patch("update", "/aliases/:id", {
      params: IdParams,
      payload: UpdateAlias,
      success: Alias,
      error: [E.NotFound, E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("remove", "/aliases/:id", { params: IdParams, success: Alias, error: [E.NotFound, E.Conflict] })
      .annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("pause", "/aliases/:id/pause", { params: IdParams, success: Alias, error: [E.NotFound, E.Conflict] })
      .annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("resume", "/aliases/:id/resume", { params: IdParams, success: Alias, error: [E.NotFound, E.Conflict] })
      .annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("burn", "/aliases/:id/burn", { params: IdParams, success: Alias, error: [E.NotFound, E.Conflict] })
      .annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.put("setTimer", "/aliases/:id/timer", {
      params: IdParams,
      payload: SetTimer,
      success: AliasTimer,
      error: [E.NotFound, E.Forbidden, E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("clearTimer", "/aliases/:id/timer", {
      params: IdParams,
      success: AliasTimer,
      error: [E.NotFound, E.Conflict]
    }).annotate(Access, requires("manage-aliases"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Aliases" }))
{}
