/**
 * `./pnpmw -s exec node packages/bench/src/openapi.ts > openapi.json`: the OpenAPI document of the contract, exactly as
 * GET /api/v1/openapi.json serves it (HttpApiBuilder serves `OpenApi.fromApi(BurnboxApi)`), without
 * starting the service: run it on two commits and `cmp` the outputs to see whether a change to
 * `packages/domain` changed the published contract.
 */
import { BurnboxApi } from "@burnbox/domain"
import { OpenApi } from "effect/http-api"

process.stdout.write(JSON.stringify(OpenApi.fromApi(BurnboxApi)))
