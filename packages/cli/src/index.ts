/**
 * @burnbox/cli: the `burnbox` program. No folders and no layer of its own: `main.ts` is the edge
 * where the packages' wired layers meet (HttpLive, IngestLive, WorkerLive, on StoreLive and
 * DatabaseLive, provided once per command); `Admin.ts` the admin commands, `Args.ts` their flags.
 */
export const name = "burnbox"
