#!/usr/bin/env node
// The `burnbox` program's entry: plain JavaScript, so that a Node.js too old to load the
// TypeScript sources is told so in one line instead of failing on a `.ts` file.
const Required = 24
const major = Number(process.versions.node.split(".")[0])
if (!(major >= Required)) {
  process.stderr.write(
    `burnbox: Node.js ${process.version} is older than this workspace supports (${Required} or newer); ` +
      "run it as `./pnpmw burnbox ...`, which brings Node.js 24 into the clone\n"
  )
  process.exit(1)
}
await import("../src/main.ts")
