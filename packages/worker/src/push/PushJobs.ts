/**
 * Browser push sending (issue #32) as the JobQueue's `push` job: every minute (the retries that
 * came due), and at once whenever a push is queued (the pipeline's trigger or a test push
 * notifies `burnbox_push`; this process then sends a `push` job, which pg-boss hands to one
 * worker). The handler sends until nothing is due; claims are row locks, so workers racing
 * send each push once.
 */
import { JobQueue, PushSender } from "@burnbox/store"
import { Effect, Layer, Queue } from "effect"

export const PushQueue = "push"

export const PushJobsLive = Layer.effectDiscard(Effect.gen(function*() {
  const jobs = yield* JobQueue
  const sender = yield* PushSender
  yield* jobs.work(PushQueue, sender.sendAll.pipe(Effect.catchCause((cause) => Effect.as(Effect.logError("push job", cause), 0))))
  yield* jobs.schedule(PushQueue, "* * * * *")
  const wakeups = yield* sender.wakeups
  yield* Queue.take(wakeups).pipe(
    Effect.andThen(jobs.send(PushQueue)),
    Effect.catchCause((cause) => Effect.logError("push wake-up", cause)),
    Effect.forever,
    Effect.forkScoped
  )
}))
