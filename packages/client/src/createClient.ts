/**
 * The Promise face of @burnbox/client, for test suites and programs that do not use Effect:
 * the same conveniences as BurnboxClient, each a Promise that rejects with a BurnboxProblem.
 */
import { Cause, Effect, Exit, Layer, Option, Stream } from "effect"
import { FetchHttpClient } from "effect/http"
import {
  type Alias,
  type AliasRef,
  type ClientOptions,
  type CreateAliasOptions,
  type CreateWebhook,
  type InjectedTestMessage,
  type InjectInput,
  type ListMessagesQuery,
  make,
  type MessageDetail,
  type MessagePage,
  type RawClient,
  type WaitOptions,
  type WebhookList,
  type WebhookWithSecret
} from "./BurnboxClient.ts"
import { type BurnboxProblem, toProblem } from "./BurnboxProblem.ts"
import type { ExportDetail, ExportState, QueuedExport, WaitForExportOptions } from "./exports.ts"

export interface CreateClientOptions extends ClientOptions {
  /** The fetch to send requests with; the global one when omitted. */
  readonly fetch?: typeof globalThis.fetch | undefined
}

export interface Client {
  /** The client derived from the contract, for any other endpoint: run its Effects with `run`. */
  readonly raw: RawClient
  /** Runs an Effect (a `raw` call), rejecting with a BurnboxProblem. */
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  readonly aliases: {
    readonly create: (options?: CreateAliasOptions) => Promise<Alias>
    readonly burn: (aliasIdOrAddress: AliasRef) => Promise<void>
    readonly find: (address: string) => Promise<Alias | undefined>
  }
  readonly messages: {
    readonly wait: (options: WaitOptions) => Promise<MessageDetail>
    readonly get: (id: number, options?: { readonly wait?: number | undefined }) => Promise<MessageDetail>
    readonly list: (query?: ListMessagesQuery) => Promise<MessagePage>
  }
  readonly testMessages: {
    readonly inject: (input: InjectInput) => Promise<InjectedTestMessage>
  }
  readonly exports: {
    readonly create: (options?: { readonly aliasId?: number | undefined }) => Promise<QueuedExport>
    readonly get: (id: number) => Promise<ExportState>
    readonly wait: (id: number, options?: WaitForExportOptions) => Promise<ExportDetail>
    /** The ZIP from `offset` (a range request when not 0): its whole size, where the body starts, and the body. */
    readonly download: (id: number, options?: { readonly offset?: number | undefined }) => Promise<{
      readonly size: number
      readonly offset: number
      readonly body: ReadableStream<Uint8Array>
    }>
  }
  readonly webhooks: {
    readonly list: () => Promise<WebhookList>
    readonly create: (input: CreateWebhook) => Promise<WebhookWithSecret>
    readonly delete: (id: number) => Promise<void>
  }
}

/** Settles like the Effect: the value, or the BurnboxProblem it failed with. */
const runAsPromise = async <A, E>(effect: Effect.Effect<A, E>): Promise<A> => {
  const exit = await Effect.runPromiseExit(Effect.catch(effect, toProblem))
  if (Exit.isSuccess(exit)) return exit.value
  const error: BurnboxProblem | undefined = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
  throw error ?? Cause.squash(exit.cause)
}

export const createClient = (options: CreateClientOptions): Client => {
  const http = options.fetch === undefined
    ? FetchHttpClient.layer
    : FetchHttpClient.layer.pipe(Layer.provide(Layer.succeed(FetchHttpClient.Fetch, options.fetch)))
  // Building the client is synchronous: the fetch layer and HttpApiClient only assemble functions.
  const client = Effect.runSync(make(options).pipe(Effect.provide(http)))
  const run = runAsPromise
  return {
    raw: client.raw,
    run,
    aliases: {
      create: (createOptions) => run(client.aliases.create(createOptions)),
      burn: (alias) => run(client.aliases.burn(alias)),
      find: (address) => run(client.aliases.find(address))
    },
    messages: {
      wait: (waitOptions) => run(client.messages.wait(waitOptions)),
      get: (id, getOptions) => run(client.messages.get(id, getOptions)),
      list: (query) => run(client.messages.list(query))
    },
    testMessages: {
      inject: (input) => run(client.testMessages.inject(input))
    },
    exports: {
      create: (createOptions) => run(client.exports.create(createOptions)),
      get: (id) => run(client.exports.get(id)),
      wait: (id, waitOptions) => run(client.exports.wait(id, waitOptions)),
      download: (id, downloadOptions) =>
        run(Effect.map(client.exports.download(id, downloadOptions), (d) => ({ size: d.size, offset: d.offset, body: Stream.toReadableStream(d.bytes) })))
    },
    webhooks: {
      list: () => run(client.webhooks.list()),
      create: (input) => run(client.webhooks.create(input)),
      delete: (id) => run(client.webhooks.delete(id))
    }
  }
}
