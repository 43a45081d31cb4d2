/**
 * Phase stamps: when each message passed each step from its SMTP DATA to a wait's answer, for the
 * latency breakdown `bench:wait` prints (issue #36 item 4: "found where the time goes"). Off
 * unless `BURNBOX_PHASE_STAMPS` names a file; then every stamp (message id, phase, epoch ms with
 * sub-millisecond resolution: `performance.timeOrigin + performance.now()`, the clock the
 * benchmarks stamp with) is kept in memory and appended to that file as one JSON line
 * (`[id, phase, ms]`) about every 200 ms and when the process exits. Off, a stamp costs one test.
 *
 * A step that runs before its messages have ids (an accept's queueing) takes its time with
 * `phaseClock` and stamps it once the ids are known.
 */
import { appendFileSync } from "node:fs"

/** The steps, in the order a message passes them (the names the breakdown prints). */
export type Phase =
  /** The accept was asked (SMTP DATA ended, or an injection). */
  | "accept.asked"
  /** Its group commit's batch started (after the gathering window and a free batch slot). */
  | "accept.batch"
  /** The batch's transaction committed. */
  | "accept.committed"
  /** The 250 (or 202) was handed to the client's socket. */
  | "accept.replied"
  /** The claimer that claimed it woke (a NOTIFY, or the claim before came back full). */
  | "claim.woke"
  /** Its claim's statement was sent. */
  | "claim.sent"
  /** Its claim answered. */
  | "claim.answered"
  /** Its work started (a place in the work budget and the mail thread's turn taken). */
  | "work.started"
  /** Its work ended: results ready to store. */
  | "work.done"
  /** Its store's transaction started (the group commit took it). */
  | "store.sent"
  /** Its store committed. */
  | "store.committed"
  /** The serving process heard its realtime NOTIFY. */
  | "realtime.heard"
  /** A wait holding for it woke. */
  | "wait.woke"
  /** That wait's read answered with it. */
  | "wait.read"

const file = process.env["BURNBOX_PHASE_STAMPS"]

/** True when stamps are kept (BURNBOX_PHASE_STAMPS is set). */
export const phaseStampsOn = file !== undefined && file !== ""

/** Now, on the stamps' clock. */
export const phaseClock = (): number => performance.timeOrigin + performance.now()

let pending: Array<string> = []
const flush = () => {
  if (pending.length === 0 || !phaseStampsOn) return
  const lines = pending
  pending = []
  appendFileSync(file!, lines.join("\n") + "\n")
}
if (phaseStampsOn) {
  setInterval(flush, 200).unref()
  process.on("exit", flush)
}

/** Stamps `phase` for each of `ids`, at `at` (by default now). */
export const stampPhase = (phase: Phase, ids: number | ReadonlyArray<number>, at: number = phaseClock()): void => {
  if (!phaseStampsOn) return
  const stamp = at.toFixed(3)
  if (typeof ids === "number") pending.push(`[${ids},"${phase}",${stamp}]`)
  else for (const id of ids) pending.push(`[${id},"${phase}",${stamp}]`)
}
